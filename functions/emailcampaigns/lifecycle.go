package emailcampaigns

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// State is where a campaign is in its life.
type State string

// The states of a campaign and the transitions between them. Every other transition
// answers 409 invalid_transition with the current state:
//
//	draft                       → scheduled  schedule (confirm: true, every check passed)
//	scheduled                   → sending    the send job, at send_at
//	sending                     → paused     pause: the running step stops at its next batch
//	paused                      → sending    resume: a new run sends the rows still planned
//	sending                     → sent       the send job, once no row is planned or sending
//	scheduled, sending, paused  → canceled   cancel: the rows still planned become canceled
//	draft, sent, canceled       → archived   archive
//
// Only a draft changes (PATCH; 409 campaign_not_editable otherwise). A scheduled campaign
// does not go back to draft: cancel it and clone it.
const (
	Draft     State = "draft"
	Scheduled State = "scheduled"
	Sending   State = "sending"
	Paused    State = "paused"
	Sent      State = "sent"
	Canceled  State = "canceled"
	Archived  State = "archived"
)

// States lists every state, for the list filter.
func States() []State { return []State{Draft, Scheduled, Sending, Paused, Sent, Canceled, Archived} }

// from lists, for each action a client takes, the states it applies to.
var from = map[string][]State{
	"schedule": {Draft},
	"pause":    {Sending},
	"resume":   {Paused},
	"cancel":   {Scheduled, Sending, Paused},
	"archive":  {Draft, Sent, Canceled},
}

// can is nil when action applies to a campaign in state s, else the 409.
func can(action string, s State) error {
	if slices.Contains(from[action], s) {
		return nil
	}
	return httpapi.Errorf(httpapi.KindConflict, "invalid_transition", "a %s campaign cannot be %s", s, pastTense[action]).
		With("state", s)
}

var pastTense = map[string]string{"schedule": "scheduled", "pause": "paused", "resume": "resumed", "cancel": "canceled", "archive": "archived"}

// transit loads a campaign for action under expected_revision: 404, 409 stale_revision and
// 409 invalid_transition in that order.
func (s *Service) transit(ctx context.Context, bot, id string, expected int64, action string) (record, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return record{}, err
	}
	if rec.Revision != expected {
		return record{}, httpapi.StaleRevision(rec.Revision)
	}
	return rec, can(action, rec.State)
}

// JobSend is the job kind of a campaign's send (SendStep).
const JobSend = "emailcampaigns.send"

// jobPayload names the campaign a send job runs for and the run it is.
type jobPayload struct {
	Bot      string `json:"bot_id"`
	Campaign string `json:"campaign_id"`
	Epoch    int64  `json:"epoch"`
}

// startJob returns the writes that start run epoch of the campaign's send job after delay,
// to commit with the change that starts it, and what delivers the message afterwards.
func (s *Service) startJob(rec record, delay time.Duration) ([]store.Write, func(context.Context), error) {
	m, err := jobs.StartMessage(min(max(delay, 0), queue.MaxScheduledDelay), JobSend, jobPayload{Bot: rec.bot, Campaign: rec.ID, Epoch: rec.Epoch})
	if err != nil {
		return nil, nil, err
	}
	return s.d.Outbox.Stage(m)
}

// Schedule bounds.
const (
	// pastGrace is how far in the past a send_at may be (clocks differ): it means now.
	pastGrace = time.Minute
	// MaxScheduleAhead is how far ahead a campaign may be scheduled.
	MaxScheduleAhead = 365 * 24 * time.Hour
)

// Check is one item of the recipient check that schedule runs.
type Check struct {
	// Check names it: content, domain or audience.
	Check   string `json:"check"`
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

// readiness is the outcome of the recipient check.
type readiness struct {
	checks  []Check
	version int
	links   []string
}

func (r readiness) ok() bool {
	for _, c := range r.checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// ready runs every check, each one whatever the others found: the content has a published
// version, its From domain is a verified sending domain of the bot, and the audience has
// someone to send to (and is not larger than MaxAudience).
func (s *Service) ready(ctx context.Context, rec record) (readiness, error) {
	var r readiness
	version, err := s.d.Content.Published(ctx, rec.bot, rec.ContentID)
	switch {
	case err == nil:
		r.version = version
		r.checks = append(r.checks, Check{Check: "content", OK: true, Message: fmt.Sprintf("version %d of content document %s is published", version, rec.ContentID)})
	case clientError(err):
		r.checks = append(r.checks, Check{Check: "content", Message: fmt.Sprintf("content document %s: %s", rec.ContentID, detail(err))})
	default:
		return r, err
	}
	domain, err := s.domainCheck(ctx, rec, version)
	if err != nil {
		return r, err
	}
	r.checks = append(r.checks, domain.check)
	r.links = domain.links
	t, err := s.tally(ctx, rec.bot, rec.Audience.LabelIDs)
	var he *httpapi.Error
	switch {
	case errors.As(err, &he) && he.Code == "audience_too_large":
		r.checks = append(r.checks, Check{Check: "audience", Message: he.Detail})
	case err != nil:
		return r, err
	case t.Counts.Sendable == 0:
		r.checks = append(r.checks, Check{Check: "audience", Message: fmt.Sprintf("no one to send to: of %d subscribers, %s", t.Counts.Total, t.Counts.why())})
	default:
		r.checks = append(r.checks, Check{Check: "audience", OK: true, Message: fmt.Sprintf("%d of %d subscribers can be sent to", t.Counts.Sendable, t.Counts.Total)})
	}
	return r, nil
}

type domainResult struct {
	check Check
	links []string
}

// domainCheck renders the published version for no one (merge fields empty): its From
// address must be in a verified domain, and its links make the link table.
func (s *Service) domainCheck(ctx context.Context, rec record, version int) (domainResult, error) {
	fail := func(format string, args ...any) (domainResult, error) {
		return domainResult{check: Check{Check: "domain", Message: fmt.Sprintf(format, args...)}}, nil
	}
	if version == 0 {
		return fail("checked once the content has a published version")
	}
	out, err := s.d.Content.Render(ctx, rec.bot, rec.ContentID, version, Person{})
	if clientError(err) {
		return fail("the content could not be rendered: %s", detail(err))
	}
	if err != nil {
		return domainResult{}, err
	}
	from := out.From.Address
	if from == "" {
		return fail("the content has no From address")
	}
	_, err = s.d.Domains.Signer(ctx, rec.bot, from)
	switch {
	case err == nil:
	case errors.Is(err, ErrNotVerified) || clientError(err):
		return fail("%s is not sent from a verified sending domain of this bot: %s", from, detail(err))
	default:
		return domainResult{}, err
	}
	// A second rendering, for someone with every standard merge field set, tells the hrefs
	// that a merge field changes per recipient: they are left out of the table.
	other, err := s.d.Content.Render(ctx, rec.bot, rec.ContentID, version, linkProbe)
	if err != nil && !clientError(err) {
		return domainResult{}, err
	}
	links := linkTable(out.HTML)
	if err == nil {
		same := map[string]bool{}
		for _, l := range linkTable(other.HTML) {
			same[l] = true
		}
		links = slices.DeleteFunc(links, func(l string) bool { return !same[l] })
	}
	return domainResult{check: Check{Check: "domain", OK: true, Message: fmt.Sprintf("%s is in a verified sending domain", from)}, links: links}, nil
}

// linkProbe is the person the link table's second rendering is for.
var linkProbe = Person{SubscriberID: "sub_linkprobe", Email: "probe@example.invalid", Consent: true, FirstName: "probe",
	LastName: "probe", Name: "probe probe", Locale: "xx", Timezone: "UTC"}

// clientError reports whether err is another family's answer about the request (a
// document missing, unpublished, of another type) rather than a failure.
func clientError(err error) bool {
	k := httpapi.KindOf(err)
	return k == httpapi.KindNotFound || k == httpapi.KindConflict || k == httpapi.KindUnprocessable || k == httpapi.KindInvalid
}

// detail is what err says to a client: an *httpapi.Error's detail, else its text.
func detail(err error) string {
	var he *httpapi.Error
	if errors.As(err, &he) {
		return he.Detail
	}
	return err.Error()
}

// Schedule runs the recipient check and, when every check passes, schedules the campaign
// for sendAt (now when nil): the content version is frozen, the link table made, and the
// send job started in the same transaction, to run at sendAt. 422 campaign_not_ready lists
// every check otherwise.
func (s *Service) Schedule(ctx context.Context, bot, id string, expected int64, sendAt *time.Time) (Campaign, error) {
	now := stamp(s.d.Now())
	at := now
	if sendAt != nil {
		var p httpapi.Problems
		switch {
		case sendAt.Before(now.Add(-pastGrace)):
			p.Add("send_at", "is in the past: give a time from now on, or leave it out to send now")
		case sendAt.After(now.Add(MaxScheduleAhead)):
			p.Add("send_at", "at most %d days ahead", int(MaxScheduleAhead/(24*time.Hour)))
		case sendAt.After(now):
			at = stamp(*sendAt)
		}
		if err := p.Err(); err != nil {
			return Campaign{}, err
		}
	}
	rec, err := s.transit(ctx, bot, id, expected, "schedule")
	if err != nil {
		return Campaign{}, err
	}
	r, err := s.ready(ctx, rec)
	if err != nil {
		return Campaign{}, err
	}
	if !r.ok() {
		return Campaign{}, httpapi.E(httpapi.KindUnprocessable, "campaign_not_ready", "the campaign cannot be sent as it is: see checks").
			With("checks", r.checks)
	}
	rec.State, rec.ContentVersion, rec.SendAt, rec.ScheduledAt = Scheduled, ptr(r.version), &at, &now
	rec.Epoch++
	links, err := store.Encode(linkDoc{Links: r.links})
	if err != nil {
		return Campaign{}, err
	}
	extra := []store.Write{store.PutOp(store.Item{Key: linksKey(bot, id), Revision: 1, Data: links}, store.Always)}
	start, deliver, err := s.startJob(rec, at.Sub(now))
	if err != nil {
		return Campaign{}, err
	}
	if err := s.save(ctx, &rec, expected, append(extra, start...), 0); err != nil {
		return Campaign{}, err
	}
	deliver(ctx)
	return rec.Campaign, nil
}

// Pause stops a sending campaign: the running step stops at its next batch, and nothing is
// sent until resume.
func (s *Service) Pause(ctx context.Context, bot, id string, expected int64) (Campaign, error) {
	rec, err := s.transit(ctx, bot, id, expected, "pause")
	if err != nil {
		return Campaign{}, err
	}
	now := stamp(s.d.Now())
	rec.State, rec.PausedAt, rec.PauseReason = Paused, &now, ""
	if err := s.save(ctx, &rec, expected, nil, 0); err != nil {
		return Campaign{}, err
	}
	return rec.Campaign, nil
}

// Resume sends a paused campaign on: a new run of the send job continues with the rows
// still planned (or the plan where it stopped), never from the start.
func (s *Service) Resume(ctx context.Context, bot, id string, expected int64) (Campaign, error) {
	return s.restart(ctx, bot, id, expected, "resume", func(rec *record) bool {
		rec.State, rec.PausedAt, rec.PauseReason = Sending, nil, ""
		return true
	})
}

// Cancel ends a campaign that has not finished: the rows still planned become canceled (by
// a run of the send job), what was sent stays sent.
func (s *Service) Cancel(ctx context.Context, bot, id string, expected int64) (Campaign, error) {
	return s.restart(ctx, bot, id, expected, "cancel", func(rec *record) bool {
		// A scheduled campaign has no rows yet: the new epoch alone stops its job.
		started := rec.State != Scheduled
		now := stamp(s.d.Now())
		rec.State, rec.FinishedAt, rec.PausedAt, rec.PauseReason = Canceled, &now, nil, ""
		return started
	})
}

// restart applies change for action and starts a new run of the send job (when change says
// so) in the same transaction; the new epoch stops any step of the run before.
func (s *Service) restart(ctx context.Context, bot, id string, expected int64, action string, change func(*record) bool) (Campaign, error) {
	rec, err := s.transit(ctx, bot, id, expected, action)
	if err != nil {
		return Campaign{}, err
	}
	run := change(&rec)
	rec.Epoch++
	var extra []store.Write
	deliver := func(context.Context) {}
	if run {
		if extra, deliver, err = s.startJob(rec, 0); err != nil {
			return Campaign{}, err
		}
	}
	if err := s.save(ctx, &rec, expected, extra, 0); err != nil {
		return Campaign{}, err
	}
	deliver(ctx)
	return rec.Campaign, nil
}

// Archive retires a draft, sent or canceled campaign: it stays readable, with its report,
// and no longer counts toward MaxCampaigns.
func (s *Service) Archive(ctx context.Context, bot, id string, expected int64) (Campaign, error) {
	rec, err := s.transit(ctx, bot, id, expected, "archive")
	if err != nil {
		return Campaign{}, err
	}
	now := stamp(s.d.Now())
	rec.State, rec.ArchivedAt = Archived, &now
	if err := s.save(ctx, &rec, expected, nil, -1); err != nil {
		return Campaign{}, err
	}
	return rec.Campaign, nil
}
