// Package broadcasts serves the broadcast routes of both generations and runs their fan-out.
// A second-generation broadcast sends published content documents to an audience (every
// subscriber, a saved segment, an experiment's cohort) over the bot's channels; a legacy
// reaction broadcast sends a published reaction to the subscribers having some labels. Both
// go out through one fan-out: recipients planned into rows once, each row claimed before its
// message leaves and never claimed twice, paced per channel to the provider's rate, as a job
// on the work queue (fanout.go). Report counts move in the transactions that move the rows,
// so they always add up. docs/broadcasts.md describes the model.
package broadcasts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/store"
)

// Person is a subscriber as a broadcast sees it.
type Person struct {
	SubscriberID string
	Channel      channel.Kind
	ExternalID   string
	FirstName    string
	LastName     string
	Name         string
	Locale       string
	Timezone     string
	Labels       []string
	Fields       map[string]any
	// LastSeenAt is when the subscriber last wrote to the bot: WhatsApp's 24-hour window
	// opens then (nil: never).
	LastSeenAt *time.Time
}

// Content is the content family as broadcasts see it. Errors are *httpapi.Error answers: 404
// for a missing or archived document, 409 document_not_published, 422 for a document that
// cannot be sent on the channel (not a message, or over the channel's limits).
type Content interface {
	// Check returns the newest published version of a message document sendable on k.
	Check(ctx context.Context, bot, docID string, k channel.Kind) (version int, err error)
	// Render fills version of the document in for p on p's channel.
	Render(ctx context.Context, bot, docID string, version int, p Person) (channel.Message, error)
}

// Audience reads subscribers.
type Audience interface {
	// Page returns a page of the bot's subscribers: those having any of labelIDs, each
	// once, or every one when labelIDs is empty; and the cursor of the next page ("" at the
	// end). A page may be short, even empty, with a next cursor.
	Page(ctx context.Context, bot string, labelIDs []string, limit int, cursor string) ([]Person, string, error)
	// Person returns one subscriber as it is now, or a *httpapi.Error 404 once it is gone.
	Person(ctx context.Context, bot, id string) (Person, error)
	// Segment resolves a saved segment for use: 404 when missing, a 409 segment_stale error
	// (segments.ErrStale) when stale. kind is its source kind; experimentID the experiment
	// of an experiment cohort.
	Segment(ctx context.Context, bot, id string) (kind, experimentID string, members int64, err error)
	// Members pages a segment's member ids.
	Members(ctx context.Context, bot, segmentID, cursor string, limit int) ([]string, string, error)
	// ExperimentRunning reports whether an experiment is running (404 when it is missing).
	ExperimentRunning(ctx context.Context, bot, id string) (bool, error)
	// LabelsExist reports the label ids the bot does not have.
	MissingLabels(ctx context.Context, bot string, labelIDs []string) ([]string, error)
	// TesterLabel returns the id of the bot's label named TesterLabel ("" when it has none).
	TesterLabel(ctx context.Context, bot string) (string, error)
}

// Channels opens a bot's connected channel of a type.
type Channels interface {
	// Open returns the adapter and connection of the bot's channel of type k, or an error
	// matching ErrNoChannel when the bot has none.
	Open(ctx context.Context, bot string, k channel.Kind) (channel.Adapter, channel.Connection, error)
}

// ErrNoChannel is what Channels.Open returns for a channel type the bot has not connected.
var ErrNoChannel = errors.New("broadcasts: the bot has no channel of this type")

// Templates tells WhatsApp templates the provider approved.
type Templates interface {
	Approved(ctx context.Context, bot, name, language string) (bool, error)
}

// Reactions is what legacy broadcasts need of reactions.
type Reactions interface {
	// Published reports whether the reaction exists and has a published version (404 when
	// it does not exist).
	Published(ctx context.Context, bot, reactionID string) (bool, error)
	// Start stages the run of the reaction's published version for one subscriber: the
	// writes to commit with the recipient's row, and what delivers it afterwards. cause is
	// stable for the recipient, so a repeated start runs once.
	Start(bot string, p Person, reactionID, cause string) ([]store.Write, func(context.Context), error)
}

// Deps are the service's dependencies; New refuses to build without any but Templates,
// Reactions, Sleep, Log and Events.
type Deps struct {
	Store     store.Store
	Content   Content
	Audience  Audience
	Channels  Channels
	Templates Templates
	Reactions Reactions
	Outbox    outbox.Stager
	Limiter   *ratelimit.Limiter
	Now       func() time.Time
	// Sleep waits for d or until ctx ends (pacing, backoff); nil is a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	Log   *slog.Logger
	// Events receives broadcast_sent per message sent (nil: none).
	Events eventlog.Log
	// Links signs the tracked URLs of link buttons (nil: links are sent as they are).
	Links *emaillinks.Signer
}

// Default sending rates, in messages a second per bot and channel: Telegram's documented
// ~30 a second per bot; WhatsApp Cloud API's default throughput of 80 a second per number
// (the tier bounds unique recipients a day, the rate the messages a second); VK's 20 calls a
// second of a community token.
const (
	DefaultTelegramRate = 30
	DefaultWhatsAppRate = 80
	DefaultVKRate       = 20
	// MaxRate bounds a configured rate.
	MaxRate = 10_000
	// DefaultStepDuration is how long one step of the send job runs.
	DefaultStepDuration = 5 * time.Second
	// DefaultClaimGrace is how old a claim must be before its row counts as interrupted:
	// longer than a step can live (the jobs Lambda's timeout, 5 minutes).
	DefaultClaimGrace = 10 * time.Minute
	// DefaultMaxAudience bounds the recipients of one broadcast.
	DefaultMaxAudience = 1_000_000
	// DefaultWorkers is how many sends of one channel are in flight at once, at least (a
	// channel paced above 160 a second gets more: channelRun.workers).
	DefaultWorkers = 8
)

// Config tunes the service.
type Config struct {
	// Rates are the sending rates per channel type, in messages a second (defaults above).
	Rates map[channel.Kind]float64
	// StepDuration is how long one step of the send job runs.
	StepDuration time.Duration
	// ClaimGrace is how old a claim must be before its row counts as interrupted.
	ClaimGrace time.Duration
	// MaxAudience bounds one broadcast's recipients.
	MaxAudience int
	// Workers is how many sends of one channel are in flight at once (1..64).
	Workers int
	// PublicURL is where the tracked link buttons' clicks come back ("" sends links as
	// they are, and the report's clicked is null).
	PublicURL string
}

func (c *Config) setDefaults() {
	rates := map[channel.Kind]float64{channel.Telegram: DefaultTelegramRate, channel.WhatsApp: DefaultWhatsAppRate, channel.VK: DefaultVKRate}
	for k, v := range c.Rates {
		rates[k] = v
	}
	c.Rates = rates
	if c.StepDuration == 0 {
		c.StepDuration = DefaultStepDuration
	}
	if c.ClaimGrace == 0 {
		c.ClaimGrace = DefaultClaimGrace
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
	for k, r := range c.Rates {
		if r <= 0 || r > MaxRate {
			errs = append(errs, fmt.Errorf("rate of %s must be above 0 and at most %d messages a second", k, MaxRate))
		}
	}
	if c.StepDuration < 100*time.Millisecond || c.StepDuration > time.Minute {
		errs = append(errs, errors.New("step duration must be 100 ms to 1 min"))
	}
	if c.ClaimGrace < time.Second {
		errs = append(errs, errors.New("claim grace must be at least 1 s"))
	}
	if c.MaxAudience < 1 || c.MaxAudience > 10_000_000 {
		errs = append(errs, errors.New("max audience must be 1 to 10000000"))
	}
	if c.Workers < 1 || c.Workers > 64 {
		errs = append(errs, errors.New("workers must be 1 to 64"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("broadcasts config: %w", err)
	}
	return nil
}

// Service is the broadcasts of every bot and their sends.
type Service struct {
	d   Deps
	cfg Config
	// tiers caches each bot's WhatsApp messaging limit (tierLimit by bot id).
	tiers sync.Map
}

// New returns the service, or an error naming every missing dependency and bad setting.
func New(d Deps, cfg Config) (*Service, error) {
	cfg.setDefaults()
	var missing []string
	for _, dep := range []struct {
		name string
		nil  bool
	}{
		{"Store", d.Store == nil}, {"Content", d.Content == nil}, {"Audience", d.Audience == nil},
		{"Channels", d.Channels == nil}, {"Outbox", d.Outbox == nil}, {"Limiter", d.Limiter == nil}, {"Now", d.Now == nil},
	} {
		if dep.nil {
			missing = append(missing, dep.name)
		}
	}
	var errs []error
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("broadcasts: missing %s", strings.Join(missing, ", ")))
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

func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
