package broadcasts

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
)

// auditionPage is the audience page the plan and the preflight read.
const audiencePage = 500

// MaxPreflightWalk bounds the subscribers one preflight (and schedule's check) reads:
// beyond it the counts say so (truncated) and the audience is not empty.
const MaxPreflightWalk = 100_000

// source pages a broadcast's audience.
type source func(ctx context.Context, cursor string, limit int) ([]Person, string, error)

// audience is the pager of rec's audience: every subscriber, a segment's members, or (legacy)
// the subscribers having any of its labels.
func (s *Service) audience(rec record) source {
	bot := rec.bot
	if rec.Legacy || rec.Audience.Type == AudienceAll || rec.Audience.Type == "" {
		return func(ctx context.Context, cursor string, limit int) ([]Person, string, error) {
			return s.d.Audience.Page(ctx, bot, rec.Labels, limit, cursor)
		}
	}
	seg := rec.Audience.SegmentID
	return func(ctx context.Context, cursor string, limit int) ([]Person, string, error) {
		ids, next, err := s.d.Audience.Members(ctx, bot, seg, cursor, limit)
		if err != nil {
			return nil, "", err
		}
		out := make([]Person, 0, len(ids))
		for _, id := range ids {
			p, err := s.d.Audience.Person(ctx, bot, id)
			if httpapi.KindOf(err) == httpapi.KindNotFound {
				continue // deleted since the segment was computed
			}
			if err != nil {
				return nil, "", err
			}
			out = append(out, p)
		}
		return out, next, nil
	}
}

// Problem is one reason a broadcast cannot be launched as it is.
type Problem struct {
	// Code: content_missing, content_not_found, content_invalid (422 at schedule);
	// unpublished_content, segment_missing, segment_stale, not_an_experiment_cohort,
	// experiment_not_running, channel_not_connected, template_not_approved, empty_audience
	// (409 at schedule).
	Code       string `json:"code"`
	Channel    string `json:"channel,omitempty"`
	DocumentID string `json:"document_id,omitempty"`
	SegmentID  string `json:"segment_id,omitempty"`
	Message    string `json:"message"`
}

// unprocessable reports whether a problem is the content's (422) rather than readiness (409).
func (p Problem) unprocessable() bool {
	return p.Code == "content_missing" || p.Code == "content_not_found" || p.Code == "content_invalid"
}

// Preflight is the recipient check: what a launch now would send, and what keeps it from
// launching. It sends nothing.
type Preflight struct {
	BroadcastID string `json:"broadcast_id"`
	Ready       bool   `json:"ready"`
	// Recipients counts, per channel of the broadcast, the audience's subscribers on it.
	Recipients map[string]int `json:"recipients"`
	// Audience is how many subscribers the audience holds (every channel), Outside those on
	// a channel the broadcast does not use (or the web, which cannot be messaged).
	Audience int `json:"audience"`
	Outside  int `json:"outside"`
	// Truncated: the audience has more than MaxPreflightWalk subscribers; the counts are of
	// the first ones.
	Truncated bool      `json:"truncated"`
	Problems  []Problem `json:"problems"`
	versions  map[string]int
}

// launchError is the answer of schedule to a failed preflight: 422 first (the content must
// change), then 409 (the broadcast is not ready yet).
func (pf Preflight) launchError() error {
	var p httpapi.Problems
	var reasons []Problem
	for _, pr := range pf.Problems {
		if pr.unprocessable() {
			p.Add("content.channels."+pr.Channel, "%s", pr.Message)
		} else {
			reasons = append(reasons, pr)
		}
	}
	if err := p.Unprocessable("broadcast_content_invalid"); err != nil {
		return err
	}
	if len(reasons) > 0 {
		return httpapi.E(httpapi.KindConflict, "broadcast_not_ready", "the broadcast cannot be launched yet: see reasons").
			With("reasons", reasons)
	}
	return nil
}

// Preflight runs the recipient check of a broadcast.
func (s *Service) Preflight(ctx context.Context, bot, id string) (Preflight, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Preflight{}, err
	}
	return s.preflight(ctx, rec, true)
}

// preflight checks content, channels and audience, each whatever the others found.
func (s *Service) preflight(ctx context.Context, rec record, _ bool) (Preflight, error) {
	pf := Preflight{BroadcastID: rec.ID, Recipients: map[string]int{}, Problems: []Problem{}, versions: map[string]int{}}
	add := func(p Problem) { pf.Problems = append(pf.Problems, p) }
	for _, k := range rec.Channels {
		pf.Recipients[string(k)] = 0
		if _, _, err := s.d.Channels.Open(ctx, rec.bot, k); errors.Is(err, ErrNoChannel) {
			add(Problem{Code: "channel_not_connected", Channel: string(k), Message: fmt.Sprintf("the bot has no %s channel connected", k)})
		} else if err != nil {
			return pf, err
		}
		doc := rec.Content.document(k)
		if doc == "" {
			add(Problem{Code: "content_missing", Channel: string(k), Message: fmt.Sprintf("no content document for %s: set content.document_id or content.channels.%s", k, k)})
			continue
		}
		v, err := s.d.Content.Check(ctx, rec.bot, doc, k)
		var he *httpapi.Error
		errors.As(err, &he)
		switch {
		case err == nil:
			pf.versions[string(k)] = v
		case httpapi.KindOf(err) == httpapi.KindNotFound:
			add(Problem{Code: "content_not_found", Channel: string(k), DocumentID: doc, Message: fmt.Sprintf("content document %s does not exist in this bot (or is archived)", doc)})
		case httpapi.KindOf(err) == httpapi.KindConflict:
			add(Problem{Code: "unpublished_content", Channel: string(k), DocumentID: doc, Message: fmt.Sprintf("content document %s has no published version; publish it first", doc)})
		case httpapi.KindOf(err) == httpapi.KindUnprocessable || httpapi.KindOf(err) == httpapi.KindInvalid:
			add(Problem{Code: "content_invalid", Channel: string(k), DocumentID: doc, Message: fmt.Sprintf("content document %s cannot be sent on %s: %s", doc, k, he.Detail)})
		default:
			return pf, err
		}
	}
	if t := rec.WhatsAppTemplate; t != nil && slices.Contains(rec.Channels, channel.WhatsApp) && s.d.Templates != nil {
		ok, err := s.d.Templates.Approved(ctx, rec.bot, t.Name, t.Language)
		if err != nil {
			return pf, err
		}
		if !ok {
			add(Problem{Code: "template_not_approved", Channel: string(channel.WhatsApp), Message: fmt.Sprintf("WhatsApp template %s (%s) is not an approved template of the bot's channel", t.Name, t.Language)})
		}
	}
	if !s.audienceReady(ctx, rec, add) {
		pf.Ready = false
		return pf, nil
	}
	if err := s.tally(ctx, rec, &pf); err != nil {
		return pf, err
	}
	total := 0
	for _, n := range pf.Recipients {
		total += n
	}
	if total == 0 {
		add(Problem{Code: "empty_audience", Message: fmt.Sprintf("no one to send to: of %d subscribers in the audience, none is on a channel of the broadcast", pf.Audience)})
	}
	pf.Ready = len(pf.Problems) == 0
	return pf, nil
}

// audienceReady checks a segment audience: it exists, is not stale and, for an experiment
// cohort, comes from an experiment that is running.
func (s *Service) audienceReady(ctx context.Context, rec record, add func(Problem)) bool {
	a := rec.Audience
	if rec.Legacy || a.Type == AudienceAll || a.Type == "" {
		return true
	}
	kind, experiment, _, err := s.d.Audience.Segment(ctx, rec.bot, a.SegmentID)
	var he *httpapi.Error
	errors.As(err, &he)
	switch {
	case httpapi.KindOf(err) == httpapi.KindNotFound:
		add(Problem{Code: "segment_missing", SegmentID: a.SegmentID, Message: fmt.Sprintf("segment %s does not exist in this bot", a.SegmentID)})
		return false
	case httpapi.KindOf(err) == httpapi.KindConflict:
		add(Problem{Code: "segment_stale", SegmentID: a.SegmentID, Message: he.Detail})
		return false
	case err != nil:
		add(Problem{Code: "segment_missing", SegmentID: a.SegmentID, Message: "the segment could not be read: " + err.Error()})
		return false
	}
	if a.Type != AudienceExperiment {
		return true
	}
	if kind != "experiment_cohort" || experiment == "" {
		add(Problem{Code: "not_an_experiment_cohort", SegmentID: a.SegmentID, Message: fmt.Sprintf("segment %s is not an experiment's cohort", a.SegmentID)})
		return false
	}
	running, err := s.d.Audience.ExperimentRunning(ctx, rec.bot, experiment)
	if err != nil || !running {
		add(Problem{Code: "experiment_not_running", SegmentID: a.SegmentID, Message: fmt.Sprintf("experiment %s of segment %s is not running", experiment, a.SegmentID)})
		return false
	}
	return true
}

// tally walks the audience (at most MaxPreflightWalk subscribers) and counts, per channel of
// the broadcast, who is on it.
func (s *Service) tally(ctx context.Context, rec record, pf *Preflight) error {
	src := s.audience(rec)
	cursor := ""
	for {
		page, next, err := src(ctx, cursor, audiencePage)
		if err != nil {
			return err
		}
		for _, p := range page {
			pf.Audience++
			if slices.Contains(rec.Channels, p.Channel) {
				pf.Recipients[string(p.Channel)]++
			} else {
				pf.Outside++
			}
		}
		if next == "" {
			return nil
		}
		if pf.Audience >= MaxPreflightWalk {
			pf.Truncated = true
			return nil
		}
		cursor = next
	}
}
