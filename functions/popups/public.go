package popups

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/mail"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// EventType is what happened to a popup in a visitor's browser.
type EventType string

// The event types.
const (
	EventImpression EventType = "impression"
	EventClose      EventType = "close"
	EventConversion EventType = "conversion"
)

// Limits of an event.
const (
	MaxVisitorIDLen  = 64
	MaxFieldValueLen = 1000
	maxPhoneLen      = 32
)

// visitorID is the script's opaque visitor id: plain, since it reaches the field writer and logs.
var visitorID = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// phone is a phone number as people type one.
var phone = regexp.MustCompile(`^\+?[0-9 ().-]+$`)

// Event is what the script posts for one thing that happened to a popup. Events are counted
// as they come: the same visitor's repeated impressions count again (there is no
// deduplication by visitor; the script's frequency caps are what keeps them rare), and
// anyone who can send the allowed Origin header can post them, so the counts are a
// website's analytics, not a ledger.
type Event struct {
	PopupID string `json:"popup_id"`
	// Variant is the experiment variant the visitor saw; absent for a popup without one.
	Variant   *string   `json:"variant"`
	Type      EventType `json:"type"`
	VisitorID string    `json:"visitor_id"`
	// Fields are a conversion's form values by field name.
	Fields map[string]string `json:"fields"`
}

// Validate checks what needs no popup.
func (e *Event) Validate() error {
	var p httpapi.Problems
	p.Require("popup_id", e.PopupID)
	switch e.Type {
	case EventImpression, EventClose, EventConversion:
	case "":
		p.Add("type", "is required")
	default:
		p.Add("type", "must be one of impression, close, conversion")
	}
	switch {
	case e.VisitorID == "":
		p.Add("visitor_id", "is required")
	case len(e.VisitorID) > MaxVisitorIDLen || !visitorID.MatchString(e.VisitorID):
		p.Add("visitor_id", "must be 1 to %d characters A-Z, a-z, 0-9, _ . : -", MaxVisitorIDLen)
	}
	if e.Fields != nil && e.Type != EventConversion && e.Type != "" {
		p.Add("fields", "are taken only with a conversion")
	}
	if len(e.Fields) > MaxFields {
		p.Add("fields", "has %d values; a form has at most %d fields", len(e.Fields), MaxFields)
	}
	return p.Err()
}

// errOrigin is the answer to an Origin that is missing or not one of the bot's.
func errOrigin() error {
	return httpapi.E(httpapi.KindForbidden, "origin_not_allowed", "this origin may not post events to the bot's popups; add it to a popup's allowed_origins")
}

// AllowedOrigin reports whether header (a request's Origin) is one of the bot's allowed
// origins, the union over its popups, and returns it in canonical spelling.
func (s *Service) AllowedOrigin(ctx context.Context, bot, header string) (string, bool, error) {
	if header == "" || !ids.Valid("bot", bot) {
		return "", false, nil
	}
	origin, err := canonicalOrigin(header)
	if err != nil {
		return "", false, nil
	}
	page, err := s.store.Query(ctx, store.Query{PK: popupsPK(bot), Prefix: originPrefix(origin), Limit: 1})
	if err != nil {
		return "", false, err
	}
	return origin, len(page.Items) > 0, nil
}

// Origin is AllowedOrigin as the event route answers it: 404 for a bot without popups
// (or no bot), 403 origin_not_allowed for a missing or foreign origin.
func (s *Service) Origin(ctx context.Context, bot, header string) (string, error) {
	origin, ok, err := s.AllowedOrigin(ctx, bot, header)
	if err != nil || ok {
		return origin, err
	}
	if !ids.Valid("bot", bot) {
		return "", httpapi.NotFound("bot")
	}
	// Only the refusal pays for this read: an allowed origin proves the bot has popups.
	it, err := s.store.Get(ctx, countKey(bot))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", httpapi.NotFound("bot")
	case err != nil:
		return "", err
	case it.Count == 0:
		return "", httpapi.NotFound("bot")
	}
	return "", errOrigin()
}

// Ingest counts one event posted from origin (which Origin allowed): rate limited per bot
// and origin, for an active popup only. A conversion's fields are checked against the
// popup's form and handed to the field writer before the event is counted, so a failed
// write is a failed event the script may send again.
func (s *Service) Ingest(ctx context.Context, bot, origin string, e Event) error {
	if s.limiter != nil {
		if err := s.limiter.Allow(ctx, s.limit, bot+"#"+origin); err != nil {
			return err
		}
	}
	pop, err := s.load(ctx, bot, e.PopupID)
	if err != nil {
		return err
	}
	if pop.Status != StatusActive {
		return httpapi.NotFound("popup") // a paused popup is not on any page
	}
	var p httpapi.Problems
	variant := noVariant
	switch {
	case pop.Experiment == nil:
		if e.Variant != nil && *e.Variant != "" {
			p.Add("variant", "the popup runs no experiment; leave variant out")
		}
	case e.Variant == nil || *e.Variant == "":
		p.Add("variant", "is required: the popup runs an experiment")
	case !slices.ContainsFunc(pop.Experiment.Variants, func(v Variant) bool { return v.Key == *e.Variant }):
		p.Add("variant", "is not a variant of the popup's experiment")
	default:
		variant = *e.Variant
	}
	if e.Type == EventConversion {
		checkValues(&p, pop.Content.Fields, e.Fields)
	}
	if err := p.Err(); err != nil {
		return err
	}
	sub := ""
	if len(e.Fields) > 0 && s.writer != nil {
		if sub, err = s.writer.WriteFields(ctx, bot, e.VisitorID, e.Fields); err != nil {
			s.log.ErrorContext(ctx, "popup conversion fields not written", "bot_id", bot, "popup_id", pop.ID, "error", err)
			return fmt.Errorf("write the conversion's fields: %w", err)
		}
	}
	now := s.now().UTC()
	d := day(now)
	_, err = s.store.Add(ctx, statKey(bot, pop.ID, d.Format(dayLayout), variant, e.Type), 1, d.Add(StatsRetention))
	if err != nil {
		return fmt.Errorf("count popup event: %w", err)
	}
	s.record(ctx, bot, pop.ID, variant, sub, e, now)
	return nil
}

// eventNames are the event log's names of the public events.
var eventNames = map[EventType]string{
	EventImpression: eventlog.PopupShown, EventClose: eventlog.PopupClosed, EventConversion: eventlog.PopupSubmitted,
}

// record appends a public event to the bot's event log, as the visitor's web subscriber's
// when the visitor is one (a visitor who never submitted a form is not, and their events
// count in the log's daily counts but belong to no subscriber's funnel). Each request is
// one occurrence: a page that posts twice counts twice here as in the popup's stats.
func (s *Service) record(ctx context.Context, bot, popup, variant, sub string, e Event, at time.Time) {
	if s.events == nil {
		return
	}
	if sub == "" && s.writer != nil {
		var err error
		if sub, err = s.writer.Subscriber(ctx, bot, e.VisitorID); err != nil {
			s.log.WarnContext(ctx, "popup event: the visitor's subscriber could not be read", "bot_id", bot, "error", err)
		}
	}
	props := map[string]any{"popup_id": popup}
	if variant != noVariant {
		props["variant"] = variant
	}
	eventlog.Emit(ctx, s.events, s.log, ids.New("pev"), eventlog.Event{BotID: bot, SubscriberID: sub, Name: eventNames[e.Type],
		At: at, Channel: "web", Source: eventlog.SourcePopup, Properties: props})
}

// checkValues checks a conversion's form values: every one a field of the form, of the
// field's type, and every required field there.
func checkValues(p *httpapi.Problems, form []Field, values map[string]string) {
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	slices.Sort(names) // problems in a stable order
	for _, n := range names {
		fp := "fields." + n
		i := slices.IndexFunc(form, func(f Field) bool { return f.Name == n })
		if i < 0 {
			p.Add(fp, "is not a field of the popup's form")
			continue
		}
		v := values[n]
		if utf8.RuneCountInString(v) > MaxFieldValueLen {
			p.Add(fp, "is %d characters; at most %d", utf8.RuneCountInString(v), MaxFieldValueLen)
			continue
		}
		if !p.Text(fp, v, text.Line) {
			continue
		}
		switch form[i].Type {
		case FieldEmail:
			if a, err := mail.ParseAddress(v); err != nil || a.Name != "" || a.Address != v {
				p.Add(fp, "must be an email address")
			}
		case FieldPhone:
			if len(v) > maxPhoneLen || !phone.MatchString(v) || digits(v) < 3 {
				p.Add(fp, "must be a phone number (digits, spaces, + ( ) . -; at most %d characters)", maxPhoneLen)
			}
		case FieldNumber:
			if f, err := strconv.ParseFloat(v, 64); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				p.Add(fp, "must be a number")
			}
		case FieldCheckbox:
			if v != "true" && v != "false" {
				p.Add(fp, `must be "true" or "false"`)
			}
		}
	}
	for _, f := range form {
		if !f.Required {
			continue
		}
		v, ok := values[f.Name]
		switch {
		case !ok || strings.TrimSpace(v) == "":
			p.Add("fields."+f.Name, "is required by the popup's form")
		case f.Type == FieldCheckbox && v != "true":
			p.Add("fields."+f.Name, "is a required checkbox: it must be \"true\"")
		}
	}
}

func digits(s string) int {
	n := 0
	for _, r := range s {
		if r >= '0' && r <= '9' {
			n++
		}
	}
	return n
}

// publicPopup is what the script gets of a popup: what the browser needs to decide, show
// and report it, and nothing the owner keeps to themselves (name, status, origins, revision).
type publicPopup struct {
	ID        string          `json:"id"`
	Variants  []publicVariant `json:"variants"`
	Targeting publicTargeting `json:"targeting"`
	Frequency Frequency       `json:"frequency"`
	Schedule  *Schedule       `json:"schedule"`
}

// publicVariant is a variant's whole content; a popup without an experiment has one, with
// no key.
type publicVariant struct {
	Key     string  `json:"key"`
	Share   int     `json:"share"`
	Content Content `json:"content"`
}

type publicTargeting struct {
	URLRules        []publicRule `json:"url_rules"`
	ExcludeURLRules []publicRule `json:"exclude_url_rules"`
	Devices         []Device     `json:"devices"`
	Visitors        Visitors     `json:"visitors"`
	DelaySeconds    int          `json:"delay_seconds"`
	ScrollPercent   int          `json:"scroll_percent"`
	ExitIntent      bool         `json:"exit_intent"`
}

// publicRule carries a glob compiled, so that the browser matches exactly what was checked.
type publicRule struct {
	Match Match  `json:"match"`
	Value string `json:"value"`
	RE    string `json:"re,omitempty"`
}

// scriptData is the JSON the script embeds.
type scriptData struct {
	// TZ is the time zone of a schedule that names none (only those written before
	// schedules had one): UTC.
	TZ     string        `json:"tz"`
	Popups []publicPopup `json:"popups"`
}

func publicRules(rs []URLRule) []publicRule {
	out := make([]publicRule, 0, len(rs))
	for _, r := range rs {
		pr := publicRule{Match: r.Match, Value: r.Value}
		if r.Match == MatchGlob {
			re, err := globRegexp(r.Value)
			if err != nil {
				continue // never stored: create and update refuse it
			}
			pr.RE = re
		}
		out = append(out, pr)
	}
	return out
}

func override(c Content, o *ContentOverride) Content {
	if o == nil {
		return c
	}
	if o.Title != nil {
		c.Title = *o.Title
	}
	if o.Body != nil {
		c.Body = *o.Body
	}
	if o.ImageURL != nil {
		c.ImageURL = o.ImageURL
	}
	if o.ButtonText != nil {
		c.ButtonText = *o.ButtonText
	}
	if o.CloseText != nil {
		c.CloseText = o.CloseText
	}
	return c
}

func public(p Popup) publicPopup {
	t := p.Targeting
	out := publicPopup{ID: p.ID, Frequency: p.Frequency, Schedule: p.Schedule,
		Targeting: publicTargeting{URLRules: publicRules(t.URLRules), ExcludeURLRules: publicRules(t.ExcludeURLRules),
			Devices: t.Devices, Visitors: t.Visitors, DelaySeconds: t.DelaySeconds, ScrollPercent: t.ScrollPercent, ExitIntent: t.ExitIntent}}
	if p.Experiment == nil {
		out.Variants = []publicVariant{{Share: 100, Content: p.Content}}
		return out
	}
	for _, v := range p.Experiment.Variants {
		out.Variants = append(out.Variants, publicVariant{Key: v.Key, Share: v.Share, Content: override(p.Content, v.Content)})
	}
	return out
}

// Script returns the embeddable script of the bot's active popups (not those whose
// schedule has ended). A bot with none gets a script that does nothing.
func (s *Service) Script(ctx context.Context, bot string) ([]byte, error) {
	if !ids.Valid("bot", bot) {
		return nil, httpapi.NotFound("bot")
	}
	data := scriptData{TZ: "UTC", Popups: []publicPopup{}}
	now := s.now()
	q := store.Query{Index: store.GSI1, PK: byStatusPK(bot, StatusActive)}
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			p, err := store.Decode[Popup](it)
			if err != nil {
				return nil, err
			}
			if p.Schedule != nil && p.Schedule.EndsAt != nil {
				if end, err := time.Parse(time.RFC3339, *p.Schedule.EndsAt); err == nil && !end.After(now) {
					continue
				}
			}
			data.Popups = append(data.Popups, public(p))
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	return renderScript(data)
}
