package copilot

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
)

// SimulateRequest is the body of POST .../simulate: the channel the samples arrive on and
// 1 to MaxSamples samples.
type SimulateRequest struct {
	// Channel is telegram (default), vk or whatsapp (whose sends are message templates).
	Channel string   `json:"channel"`
	Samples []Sample `json:"samples"`
}

// Sample is one simulated run's input: a sample subscriber (labels, field values by field
// id), what they press at each buttons step, in order, and the trigger that starts the run
// (default: the proposed trigger's type).
type Sample struct {
	Subscriber *runtime.SimSubscriber `json:"subscriber"`
	Presses    []runtime.SimPress     `json:"presses"`
	Trigger    *runtime.TriggerInfo   `json:"trigger"`
}

// Validate checks the request's form.
func (r *SimulateRequest) Validate() error {
	if r.Channel == "" {
		r.Channel = string(channel.Telegram)
	}
	var p httpapi.Problems
	if !contains([]string{string(channel.Telegram), string(channel.VK), string(channel.WhatsApp)}, r.Channel) {
		p.Add("channel", "must be telegram, vk or whatsapp")
	}
	if len(r.Samples) < MinSamples || len(r.Samples) > MaxSamples {
		p.Add("samples", "has %d samples; %d to %d", len(r.Samples), MinSamples, MaxSamples)
	}
	for i, s := range r.Samples {
		at := "samples[" + strconv.Itoa(i) + "]"
		if len(s.Presses) > runtime.MaxEntries {
			p.Add(at+".presses", "has %d presses; at most %d", len(s.Presses), runtime.MaxEntries)
		}
		if s.Trigger != nil && s.Trigger.Type == "" {
			p.Add(at+".trigger.type", "is required")
		}
	}
	return p.Err()
}

// Simulation is the answer of a simulation: each sample's run of the proposed draft and of
// the base draft, and whether the path (the step ids run, in order) changed. The same
// proposal and request always give the same answer, byte for byte: the clock starts at the
// proposal's created_at, and nothing else varies.
type Simulation struct {
	ProposalID  string         `json:"proposal_id"`
	Channel     string         `json:"channel"`
	Start       time.Time      `json:"start"`
	PathChanged int            `json:"path_changed"`
	Samples     []SampleResult `json:"samples"`
}

// SampleResult is one sample's two runs.
type SampleResult struct {
	Index       int  `json:"index"`
	PathChanged bool `json:"path_changed"`
	Proposed    Run  `json:"proposed"`
	Base        Run  `json:"base"`
}

// Run is a simulated run (runtime.SimResult: status, end reason, error, trace entries,
// notes) and its path.
type Run struct {
	Path []string `json:"path"`
	runtime.SimResult
}

// flowOf is c in the runtime's form: the published-version JSON that docs/reactions.md
// specifies, which both families speak.
func flowOf(reaction string, c reactions.Content) (runtime.Flow, error) {
	f, err := runtime.FlowOf(reactions.Version{ReactionID: reaction, Content: c})
	if err != nil {
		return runtime.Flow{}, fmt.Errorf("copilot: a draft: %w", err)
	}
	return f, nil
}

func run(f runtime.Flow, in runtime.SimInput) Run {
	res := runtime.Simulate(f, in)
	path := make([]string, len(res.Steps))
	for i, e := range res.Steps {
		path[i] = e.StepID
	}
	return Run{Path: path, SimResult: res}
}

// Simulate runs the proposed draft and the base draft on each sample, with the bot's
// labels, fields and published reactions as they are now, and keeps the outcome's gist.
func (s *Service) Simulate(ctx context.Context, p *auth.Principal, id string, req SimulateRequest) (Simulation, error) {
	if err := req.Validate(); err != nil {
		return Simulation{}, err
	}
	pr, err := s.proposal(ctx, p, withRight(writeAccess), id)
	if err != nil {
		return Simulation{}, err
	}
	proposed, err := flowOf(pr.ReactionID, pr.Draft)
	if err != nil {
		return Simulation{}, err
	}
	base, err := flowOf(pr.ReactionID, pr.base())
	if err != nil {
		return Simulation{}, err
	}
	v, err := s.vocabulary(ctx, pr.BotID)
	if err != nil {
		return Simulation{}, err
	}
	published, err := s.reactions.Published(ctx, pr.BotID)
	if err != nil {
		return Simulation{}, err
	}
	in := runtime.SimInput{Channel: channel.Kind(req.Channel), Start: pr.CreatedAt, Templates: req.Channel == string(channel.WhatsApp)}
	for _, l := range v.Labels {
		in.Labels = append(in.Labels, l.ID)
	}
	for _, f := range v.Fields {
		in.Fields = append(in.Fields, runtime.Field{ID: f.ID, Name: f.Name, Type: string(f.Type)})
	}
	for _, pub := range published {
		in.Published = append(in.Published, pub.ReactionID)
	}
	slices.Sort(in.Labels)
	slices.Sort(in.Published)
	slices.SortFunc(in.Fields, func(a, b runtime.Field) int { return compare(a.ID, b.ID) })
	out := Simulation{ProposalID: pr.ID, Channel: req.Channel, Start: pr.CreatedAt, Samples: make([]SampleResult, len(req.Samples))}
	for i, sm := range req.Samples {
		si := in
		si.Subscriber, si.Presses = sm.Subscriber, sm.Presses
		si.Trigger = runtime.TriggerInfo{Type: string(pr.Draft.Trigger.Type)}
		if sm.Trigger != nil {
			si.Trigger = *sm.Trigger
		}
		r := SampleResult{Index: i, Proposed: run(proposed, si), Base: run(base, si)}
		r.PathChanged = !slices.Equal(r.Proposed.Path, r.Base.Path)
		if r.PathChanged {
			out.PathChanged++
		}
		out.Samples[i] = r
	}
	pr.LastSimulation = &SimulationOutcome{Samples: len(req.Samples), PathChanged: out.PathChanged, SimulatedAt: stamp(s.now())}
	s.record(ctx, &pr)
	return out, nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
