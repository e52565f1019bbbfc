// Package emailcampaigns serves the email campaign routes and runs their sends: a campaign
// sends the newest published version of an email content document to the subscribers of
// its audience who have an address, consent and no suppression, each exactly once at most,
// paced to the provider's rate, as a job on the work queue. Its report counts are kept in
// the same transactions as the recipient rows they count, so they always add up.
package emailcampaigns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// Content is the content family as campaigns see it.
type Content interface {
	// Published returns the number of the newest published version of an email document:
	// a *httpapi.Error 404 for a missing (or archived) one, 409 document_not_published for
	// one never published (and, the adapter decides, 422 for a document that is no email).
	Published(ctx context.Context, bot, docID string) (version int, err error)
	// Render fills in version of the document for r.
	Render(ctx context.Context, bot, docID string, version int, r Person) (Rendered, error)
}

// Rendered is an email document filled in for one person.
type Rendered struct {
	Subject   string
	Preheader string
	HTML      string
	Text      string
	From      mail.Address
	ReplyTo   string
}

// Audience reads the subscribers a campaign goes to.
type Audience interface {
	// Page returns a page of the bot's subscribers having any of labelIDs (every
	// subscriber when labelIDs is empty), each once, and the cursor of the next page (""
	// at the end). A page may be short, even empty, with a next cursor.
	Page(ctx context.Context, bot string, labelIDs []string, limit int, cursor string) ([]Person, string, error)
	// People returns a reader of the bot's subscribers, which a send step takes once: it
	// may read what all subscribers share (the field catalog) once, when it is made, so a
	// field created or deleted after that shows as it was then for the step's few seconds.
	People(ctx context.Context, bot string) (People, error)
}

// People reads a bot's subscribers by id.
type People interface {
	// Get returns the subscribers among subscriberIDs as they are now, by id; one that is
	// gone is absent. The send reads its recipients again right before sending them, a few
	// at a time (as many as it has messages in flight), so that one deleted or withdrawn
	// meanwhile gets nothing.
	Get(ctx context.Context, subscriberIDs []string) (map[string]Person, error)
}

// Person is a subscriber as a campaign sees it: its address (custom field email), its
// consent (custom field email_consent is true) and what merge fields read.
type Person struct {
	SubscriberID string
	Email        string
	Consent      bool
	FirstName    string
	LastName     string
	Name         string
	Locale       string
	Timezone     string
	Fields       map[string]any
	// Labels are the subscriber's label ids, read again at the send: one who no longer has
	// any of the audience's labels is skipped (left_audience).
	Labels []string
	// UnsubscribeURL is the person's unsubscribe link in this campaign, for the content's
	// {{ unsubscribe_url }} (set by the send; "" elsewhere).
	UnsubscribeURL string
}

// ErrNotVerified is wrapped by the Domains error for a From address whose domain is not a
// verified sending domain of the bot (the wiring maps emaildomains.ErrNotVerified to it).
var ErrNotVerified = errors.New("emailcampaigns: the sending domain is not verified")

// Domains finds a bot's verified sending domains.
type Domains interface {
	// Signer returns the DKIM signer of the verified domain of from, or an error wrapping
	// ErrNotVerified.
	Signer(ctx context.Context, bot, from string) (*email.Signer, error)
}

// Suppressions is the bot-wide suppression list.
type Suppressions interface {
	// Suppressed returns, of at most MaxSuppressionBatch addresses, the lower-cased ones
	// suppressed with their reason: "unsubscribed", "bounced" or "complained".
	Suppressed(ctx context.Context, bot string, addresses []string) (map[string]string, error)
}

// MaxSuppressionBatch is the most addresses one Suppressed call takes.
const MaxSuppressionBatch = 100

// Mailer sends one message signed with a bot's DKIM key (SigningMailer makes one of an
// email.Sender).
type Mailer interface {
	Send(ctx context.Context, m email.Message, dkim *email.Signer) (email.Receipt, error)
}

// Deps are the service's dependencies; New refuses to build without any but Sleep and Log.
type Deps struct {
	Store        store.Store
	Content      Content
	Audience     Audience
	Domains      Domains
	Suppressions Suppressions
	Mail         Mailer
	Links        *emaillinks.Signer
	// Outbox stages a campaign job's start in the very transaction that schedules, resumes
	// or cancels it.
	Outbox  outbox.Stager
	Limiter *ratelimit.Limiter
	Now     func() time.Time
	// Sleep waits for d or until ctx ends (pacing); nil is a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Log receives what the send job does not return as an error (nil: discarded).
	Log *slog.Logger
	// Events receives email_sent and the recipients' events (opened, clicked, ...); nil
	// records none.
	Events eventlog.Log
	// Quota, when set, is the provider's maximum sending rate (on AWS, the SES account's):
	// asked once, by the first send step, when Config.Rate is not set. It replaces the
	// default rate; one it cannot give leaves the default, logged as a warning.
	Quota func(ctx context.Context) (float64, error)
}

// MaxRate is the highest sending rate a deployment may configure, in messages a second.
const MaxRate = 10_000

// Defaults of Config.
const (
	// DefaultRate is SES's default sending quota: 14 messages a second.
	DefaultRate = 14
	// DefaultStepDuration is how long one step of the send job sends: far inside a Lambda's
	// timeout, short enough that a pause takes effect within seconds.
	DefaultStepDuration = 5 * time.Second
	// DefaultWorkers is how many messages a send step has in flight at once: enough to
	// render and sign the next messages while others are on the wire, few enough to be
	// gentle with the provider's connections.
	DefaultWorkers = 8
	// MaxWorkers bounds Config.Workers.
	MaxWorkers = 64
	// DefaultMaxAudience bounds the subscribers a campaign (and its consent preview) walks:
	// a preview reads them all within one request, at about 200 pages of 500.
	DefaultMaxAudience = 100_000
)

// Config tunes the service.
type Config struct {
	// Rate is the provider's sending rate, in messages a second (default DefaultRate; the
	// local process, sending to a sink, may use 100).
	Rate float64
	// PublicURL is the deployment's public base URL, where the open pixel, tracked links and
	// unsubscribe pages are served.
	PublicURL string
	// StepDuration is how long one step of the send job sends (default DefaultStepDuration).
	StepDuration time.Duration
	// MaxAudience is the most subscribers a campaign goes to (default DefaultMaxAudience).
	MaxAudience int
	// Workers is how many messages a send step has in flight at once, 1 to MaxWorkers
	// (default DefaultWorkers). The pacing holds whatever it is: a message leaves no
	// sooner than its slot.
	Workers int
	// UnsubscribeMailto, when set, is the address of a mailbox that unsubscribes whoever
	// writes to it; List-Unsubscribe then names it beside the one-click URL.
	UnsubscribeMailto string
}

func (c *Config) setDefaults() {
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.StepDuration == 0 {
		c.StepDuration = DefaultStepDuration
	}
	if c.MaxAudience == 0 {
		c.MaxAudience = DefaultMaxAudience
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.Rate <= 0 || c.Rate > MaxRate {
		errs = append(errs, errors.New("rate must be above 0 and at most 10000 messages a second"))
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, errors.New("public URL must be an absolute http(s) URL"))
	}
	if c.StepDuration < time.Second || c.StepDuration > time.Minute {
		errs = append(errs, errors.New("step duration must be 1 s to 1 min"))
	}
	if c.MaxAudience < 1 || c.MaxAudience > 1_000_000 {
		errs = append(errs, errors.New("max audience must be 1 to 1000000"))
	}
	if c.Workers < 1 || c.Workers > MaxWorkers {
		errs = append(errs, fmt.Errorf("workers must be 1 to %d", MaxWorkers))
	}
	if c.UnsubscribeMailto != "" {
		if a, err := mail.ParseAddress(c.UnsubscribeMailto); err != nil || a.Address != c.UnsubscribeMailto {
			errs = append(errs, errors.New("unsubscribe mailto must be a bare address"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("emailcampaigns config: %w", err)
	}
	return nil
}

// Service is the email campaigns of every bot and their sends.
type Service struct {
	d   Deps
	cfg Config
	// rate is the sending rate: Config.Rate, or the Quota the first send step asked
	// (sendRate); rateOnce guards the asking.
	rateOnce sync.Once
	rate     float64
}

// New returns the service, or an error naming every missing dependency and bad setting.
func New(d Deps, cfg Config) (*Service, error) {
	if cfg.Rate != 0 {
		d.Quota = nil // a configured rate wins: nothing to ask
	}
	cfg.setDefaults()
	var missing []string
	for _, dep := range []struct {
		name string
		nil  bool
	}{
		{"Store", d.Store == nil}, {"Content", d.Content == nil}, {"Audience", d.Audience == nil},
		{"Domains", d.Domains == nil}, {"Suppressions", d.Suppressions == nil}, {"Mail", d.Mail == nil},
		{"Links", d.Links == nil}, {"Outbox", d.Outbox == nil}, {"Limiter", d.Limiter == nil}, {"Now", d.Now == nil},
	} {
		if dep.nil {
			missing = append(missing, dep.name)
		}
	}
	var errs []error
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("emailcampaigns: missing %s", strings.Join(missing, ", ")))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if d.Sleep == nil {
		d.Sleep = sleep
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{d: d, cfg: cfg}, nil
}

// sendRate is the rate the sends pace to: Config.Rate, or what Deps.Quota answers when it is
// first needed (min MaxRate), read once per service, so that a process that never sends
// never asks.
func (s *Service) sendRate(ctx context.Context) float64 {
	s.rateOnce.Do(func() {
		s.rate = s.cfg.Rate
		if s.d.Quota == nil {
			return
		}
		r, err := s.d.Quota(ctx)
		if err == nil && !(r > 0) {
			err = errors.New("no positive rate")
		}
		if err != nil {
			s.d.Log.WarnContext(ctx, "email campaigns: the provider's sending rate could not be read; campaigns send at the default rate",
				"rate", s.rate, "error", err)
			return
		}
		s.rate = min(r, MaxRate)
		s.d.Log.InfoContext(ctx, "email campaigns send at the provider's maximum rate", "rate", s.rate)
	})
	return s.rate
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Limits.
const (
	// MaxCampaigns is how many campaigns that are not archived a bot may have.
	MaxCampaigns = 1000
	// MaxNameLen bounds a campaign's name, in characters.
	MaxNameLen = 200
	// MaxLabels bounds the labels of an audience.
	MaxLabels = 20
	// maxIDLen bounds an id a client gives (content, label).
	maxIDLen = 100
)

// Segment is who a campaign goes to: the subscribers having any of LabelIDs, or every
// subscriber of the bot when it has none.
type Segment struct {
	LabelIDs []string `json:"label_ids"`
}

// Campaign is an email campaign.
type Campaign struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	ContentID string `json:"content_id"`
	// ContentVersion is the published version the campaign sends, frozen when it is
	// scheduled (null before).
	ContentVersion *int    `json:"content_version"`
	Audience       Segment `json:"audience"`
	State          State   `json:"state"`
	Revision       int64   `json:"revision"`
	// SendAt is when the send starts (set when scheduled).
	SendAt      *time.Time `json:"send_at"`
	ScheduledAt *time.Time `json:"scheduled_at"`
	StartedAt   *time.Time `json:"started_at"`
	PausedAt    *time.Time `json:"paused_at"`
	// PauseReason says why the send job paused a campaign by itself ("" when a user did):
	// domain_not_verified or content_unavailable. Fix it and resume.
	PauseReason string `json:"pause_reason,omitempty"`
	// FinishedAt is when the campaign was sent or canceled.
	FinishedAt *time.Time `json:"finished_at"`
	ArchivedAt *time.Time `json:"archived_at"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	// Counts are the recipient counts (GET of one campaign only; lists leave them out).
	Counts *Counts `json:"counts,omitempty"`
}

// record is a stored campaign.
type record struct {
	Campaign
	// Epoch numbers the send job's runs: schedule, resume and cancel start a new one, and a
	// step of an older run stops at once (send.go).
	Epoch int64 `json:"epoch"`
	bot   string
}

func (r record) item() (store.Item, error) {
	r.Counts = nil // read from the counters, never stored
	b, err := store.Encode(r)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{
		Key:      campaignKey(r.bot, r.ID),
		GSI1:     store.IndexKey{PK: byStatePK(r.bot, r.State), SK: r.ID},
		Revision: r.Revision,
		Data:     b,
	}, nil
}

func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func ptr[T any](v T) *T { return &v }

// Definition is a create or update request: the members a draft campaign has.
type Definition struct {
	Name      *string  `json:"name"`
	ContentID *string  `json:"content_id"`
	Audience  *Segment `json:"audience"`
}

// check validates the members given; create requires name and content_id.
func (d Definition) check(create bool) error {
	var p httpapi.Problems
	if d.Name != nil || create {
		checkName(&p, d.Name)
	}
	if d.ContentID != nil || create {
		switch {
		case d.ContentID == nil || *d.ContentID == "":
			p.Add("content_id", "is required: the id of an email content document")
		case len(*d.ContentID) > maxIDLen:
			p.Add("content_id", "at most %d characters", maxIDLen)
		default:
			p.Text("content_id", *d.ContentID, text.Line)
		}
	}
	if d.Audience != nil {
		if len(d.Audience.LabelIDs) > MaxLabels {
			p.Add("audience.label_ids", "at most %d labels", MaxLabels)
		}
		seen := map[string]bool{}
		for i, l := range d.Audience.LabelIDs {
			f := fmt.Sprintf("audience.label_ids[%d]", i)
			switch {
			case l == "":
				p.Add(f, "must not be empty")
			case len(l) > maxIDLen:
				p.Add(f, "at most %d characters", maxIDLen)
			case seen[l]:
				p.Add(f, "is listed twice")
			default:
				p.Text(f, l, text.Line)
			}
			seen[l] = true
		}
	}
	return p.Err()
}

func checkName(p *httpapi.Problems, name *string) {
	switch {
	case name == nil || strings.TrimSpace(*name) == "":
		p.Add("name", "is required")
	case len([]rune(*name)) > MaxNameLen:
		p.Add("name", "at most %d characters", MaxNameLen)
	default:
		p.Text("name", *name, text.Name)
	}
}

// Create makes a draft campaign.
func (s *Service) Create(ctx context.Context, bot string, d Definition) (Campaign, error) {
	if err := d.check(true); err != nil {
		return Campaign{}, err
	}
	seg := Segment{LabelIDs: []string{}}
	if d.Audience != nil && d.Audience.LabelIDs != nil {
		seg.LabelIDs = slices.Clone(d.Audience.LabelIDs)
	}
	now := stamp(s.d.Now())
	rec := record{Campaign: Campaign{ID: ids.At("ecmp", now), Name: *d.Name, ContentID: *d.ContentID, Audience: seg,
		State: Draft, Revision: 1, CreatedAt: now, UpdatedAt: now}, bot: bot}
	it, err := rec.item()
	if err != nil {
		return Campaign{}, err
	}
	err = store.Counted(ctx, s.d.Store, countKey(bot), 1, func(c store.Counter) error {
		if c.Count >= MaxCampaigns {
			return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a bot has at most %d email campaigns that are not archived; archive finished ones", MaxCampaigns).
				With("limit", MaxCampaigns)
		}
		return s.d.Store.Transact(ctx, []store.Write{c.Write, store.PutOp(it, store.MustNotExist)})
	})
	if err != nil {
		return Campaign{}, fmt.Errorf("create campaign: %w", err)
	}
	return rec.Campaign, nil
}

// load reads a stored campaign.
func (s *Service) load(ctx context.Context, bot, id string) (record, error) {
	if !ids.Valid("ecmp", id) {
		return record{}, httpapi.NotFound("email campaign")
	}
	it, err := s.d.Store.Get(ctx, campaignKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, httpapi.NotFound("email campaign")
	}
	if err != nil {
		return record{}, err
	}
	rec, err := store.Decode[record](it)
	rec.bot = bot
	rec.Revision = it.Revision
	return rec, err
}

// Get returns a campaign with its counts.
func (s *Service) Get(ctx context.Context, bot, id string) (Campaign, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Campaign{}, err
	}
	counts, err := s.counts(ctx, bot, id)
	if err != nil {
		return Campaign{}, err
	}
	c := rec.Campaign
	c.Counts = &counts
	return c, nil
}

// List returns a page of the bot's campaigns, oldest first, all states or one.
func (s *Service) List(ctx context.Context, bot string, state State, limit int, cursor string) ([]Campaign, string, error) {
	q := store.Query{PK: campaignsPK(bot), Prefix: campaignPrefix, Limit: limit, Cursor: cursor}
	if state != "" {
		q = store.Query{Index: store.GSI1, PK: byStatePK(bot, state), Limit: limit, Cursor: cursor}
	}
	page, err := s.d.Store.Query(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]Campaign, 0, len(page.Items))
	for _, it := range page.Items {
		rec, err := store.Decode[record](it)
		if err != nil {
			return nil, "", err
		}
		rec.Revision = it.Revision
		out = append(out, rec.Campaign)
	}
	return out, page.Next, nil
}

// Update changes a draft's name, content or audience under expected_revision. A campaign
// that is no longer a draft does not change: 409 campaign_not_editable.
func (s *Service) Update(ctx context.Context, bot, id string, expected int64, d Definition) (Campaign, error) {
	if err := d.check(false); err != nil {
		return Campaign{}, err
	}
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Campaign{}, err
	}
	if rec.Revision != expected {
		return Campaign{}, httpapi.StaleRevision(rec.Revision)
	}
	if rec.State != Draft {
		return Campaign{}, httpapi.Errorf(httpapi.KindConflict, "campaign_not_editable", "a %s campaign no longer changes; clone it to make a new draft", rec.State).
			With("state", rec.State)
	}
	if d.Name != nil {
		rec.Name = *d.Name
	}
	if d.ContentID != nil {
		rec.ContentID = *d.ContentID
	}
	if d.Audience != nil {
		rec.Audience = Segment{LabelIDs: slices.Clone(d.Audience.LabelIDs)}
		if rec.Audience.LabelIDs == nil {
			rec.Audience.LabelIDs = []string{}
		}
	}
	if err := s.save(ctx, &rec, expected, nil, 0); err != nil {
		return Campaign{}, err
	}
	return rec.Campaign, nil
}

// save writes rec, changed, as the next revision after expected, with extra writes and the
// campaign count moved by delta (archive) in the same transaction. Losing the race for
// the revision is 409 stale_revision with the revision that won.
func (s *Service) save(ctx context.Context, rec *record, expected int64, extra []store.Write, delta int64) error {
	rec.Revision = expected + 1
	rec.UpdatedAt = stamp(s.d.Now())
	it, err := rec.item()
	if err != nil {
		return err
	}
	put := store.PutOp(it, store.RevisionIs(expected))
	var ce *store.ConditionError
	if delta == 0 {
		err = s.d.Store.Transact(ctx, append([]store.Write{put}, extra...))
		if errors.As(err, &ce) && ce.Index == 0 {
			return s.stale(ctx, rec.bot, rec.ID)
		}
		return err
	}
	return store.Counted(ctx, s.d.Store, countKey(rec.bot), delta, func(c store.Counter) error {
		err := s.d.Store.Transact(ctx, append([]store.Write{c.Write, put}, extra...))
		if errors.As(err, &ce) && ce.Index == 1 {
			return s.stale(ctx, rec.bot, rec.ID)
		}
		return err
	})
}

// stale is the 409 for a write that lost a race: with the revision that won.
func (s *Service) stale(ctx context.Context, bot, id string) error {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return err
	}
	return httpapi.StaleRevision(rec.Revision)
}

// Clone makes a new draft with a campaign's content and audience, named "<name> (copy)"
// unless a name is given.
func (s *Service) Clone(ctx context.Context, bot, id string, name *string) (Campaign, error) {
	src, err := s.load(ctx, bot, id)
	if err != nil {
		return Campaign{}, err
	}
	n := src.Name + " (copy)"
	if r := []rune(n); len(r) > MaxNameLen {
		n = string(r[:MaxNameLen])
	}
	if name != nil {
		n = *name
	}
	return s.Create(ctx, bot, Definition{Name: &n, ContentID: &src.ContentID, Audience: &Segment{LabelIDs: src.Audience.LabelIDs}})
}
