package broadcasts

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// Audience types of a second-generation broadcast. Labels narrow only legacy reaction
// broadcasts (spec 4.6: "the only place where a broadcast can be narrowed by labels").
const (
	AudienceAll        = "all"
	AudienceSegment    = "segment"
	AudienceExperiment = "experiment_cohort"
)

// Limits.
const (
	// MaxBroadcasts is how many broadcasts that are not archived a bot may have.
	MaxBroadcasts = 1000
	// MaxNameLen bounds a broadcast's name, in characters.
	MaxNameLen = 200
	// MaxLabels bounds a legacy broadcast's labels.
	MaxLabels = 20
	maxIDLen  = 100
)

// ContentRef is what a broadcast sends: one message document for every channel, or one per
// channel type (Channels overrides DocumentID for its channel).
type ContentRef struct {
	DocumentID string            `json:"document_id,omitempty"`
	Channels   map[string]string `json:"channels,omitempty"`
}

// document is the document sent on channel k ("" when none).
func (c ContentRef) document(k channel.Kind) string {
	if d, ok := c.Channels[string(k)]; ok {
		return d
	}
	return c.DocumentID
}

// AudienceRef is who a broadcast goes to.
type AudienceRef struct {
	Type string `json:"type"`
	// SegmentID is the saved segment of a segment or experiment_cohort audience.
	SegmentID string `json:"segment_id,omitempty"`
}

// Template is an approved WhatsApp template, sent instead of the content to a WhatsApp
// recipient outside the 24-hour window.
type Template struct {
	Name     string `json:"name"`
	Language string `json:"language"`
}

// Broadcast is a second-generation broadcast.
type Broadcast struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"` // "broadcast"
	Name     string         `json:"name"`
	Content  ContentRef     `json:"content"`
	Audience AudienceRef    `json:"audience"`
	Channels []channel.Kind `json:"channels"`
	// WhatsAppTemplate is sent to WhatsApp recipients outside the 24-hour window; without
	// one they are failed with outside_window.
	WhatsAppTemplate *Template `json:"whatsapp_template"`
	Status           Status    `json:"status"`
	// StatusReason says why the send job paused or failed a broadcast by itself.
	StatusReason string `json:"status_reason,omitempty"`
	Revision     int64  `json:"revision"`
	Archived     bool   `json:"archived"`
	// ContentVersions are the published versions sent, per channel, frozen at schedule.
	ContentVersions map[string]int `json:"content_versions,omitempty"`
	SendAt          *time.Time     `json:"send_at"`
	ScheduledAt     *time.Time     `json:"scheduled_at"`
	StartedAt       *time.Time     `json:"started_at"`
	PausedAt        *time.Time     `json:"paused_at"`
	FinishedAt      *time.Time     `json:"finished_at"`
	ArchivedAt      *time.Time     `json:"archived_at"`
	CreatedAt       time.Time      `json:"created_at"`
	UpdatedAt       time.Time      `json:"updated_at"`
}

// record is a stored broadcast of either generation.
type record struct {
	Broadcast
	// Epoch numbers the send job's runs: schedule, resume and cancel start a new one.
	Epoch int64 `json:"epoch"`
	// Legacy broadcasts: the reaction, its label filter and paid flag.
	Legacy     bool     `json:"legacy,omitempty"`
	ReactionID string   `json:"reaction_id,omitempty"`
	Labels     []string `json:"labels,omitempty"`
	Paid       bool     `json:"paid,omitempty"`
	bot        string
}

func (r record) key() store.Key {
	if r.Legacy {
		return legacyKey(r.bot, r.ID)
	}
	return broadcastKey(r.bot, r.ID)
}

func (r record) item() (store.Item, error) {
	b, err := store.Encode(r)
	if err != nil {
		return store.Item{}, err
	}
	it := store.Item{Key: r.key(), Revision: r.Revision, Data: b}
	if !r.Legacy && !r.Archived {
		it.GSI1 = store.IndexKey{PK: livePK(r.bot), SK: r.ID}
	}
	return it, nil
}

func decodeRecord(bot string, it store.Item) (record, error) {
	r, err := store.Decode[record](it)
	r.bot, r.Revision = bot, it.Revision
	if r.Channels == nil {
		r.Channels = []channel.Kind{}
	}
	return r, err
}

// Definition is a create or PATCH body: the members a draft has.
type Definition struct {
	Name             *string         `json:"name"`
	Content          *ContentRef     `json:"content"`
	Audience         *AudienceRef    `json:"audience"`
	Channels         *[]channel.Kind `json:"channels"`
	WhatsAppTemplate *Template       `json:"whatsapp_template"`
}

func checkID(p *httpapi.Problems, field, id string) {
	switch {
	case id == "":
		p.Add(field, "must not be empty")
	case len(id) > maxIDLen:
		p.Add(field, "at most %d characters", maxIDLen)
	default:
		p.Text(field, id, text.Line)
	}
}

// check validates the members given; create requires name and channels.
func (d Definition) check(create bool) error {
	var p httpapi.Problems
	if d.Name != nil || create {
		switch {
		case d.Name == nil || strings.TrimSpace(*d.Name) == "":
			p.Add("name", "is required")
		case len([]rune(*d.Name)) > MaxNameLen:
			p.Add("name", "at most %d characters", MaxNameLen)
		default:
			p.Text("name", *d.Name, text.Name)
		}
	}
	if d.Channels != nil || create {
		switch {
		case d.Channels == nil || len(*d.Channels) == 0:
			p.Add("channels", "give one or more of telegram, whatsapp, vk")
		default:
			seen := map[channel.Kind]bool{}
			for i, k := range *d.Channels {
				f := fmt.Sprintf("channels[%d]", i)
				switch {
				case !slices.Contains(channel.Kinds(), k):
					p.Add(f, "must be telegram, whatsapp or vk")
				case seen[k]:
					p.Add(f, "is listed twice")
				}
				seen[k] = true
			}
		}
	}
	if c := d.Content; c != nil {
		if c.DocumentID != "" {
			checkID(&p, "content.document_id", c.DocumentID)
		}
		if len(c.Channels) > len(channel.Kinds()) {
			p.Add("content.channels", "at most one document per channel type")
		}
		for _, k := range slices.Sorted(maps.Keys(c.Channels)) {
			if !slices.Contains(channel.Kinds(), channel.Kind(k)) {
				p.Add("content.channels."+k, "is not a channel type: telegram, whatsapp or vk")
				continue
			}
			checkID(&p, "content.channels."+k, c.Channels[k])
		}
	}
	if a := d.Audience; a != nil {
		switch a.Type {
		case AudienceAll:
			if a.SegmentID != "" {
				p.Add("audience.segment_id", "only a segment or experiment_cohort audience names a segment")
			}
		case AudienceSegment, AudienceExperiment:
			checkID(&p, "audience.segment_id", a.SegmentID)
		default:
			p.Add("audience.type", "must be all, segment or experiment_cohort")
		}
	}
	if t := d.WhatsAppTemplate; t != nil {
		checkID(&p, "whatsapp_template.name", t.Name)
		checkID(&p, "whatsapp_template.language", t.Language)
	}
	return p.Err()
}

func (d Definition) apply(b *Broadcast) {
	if d.Name != nil {
		b.Name = *d.Name
	}
	if d.Content != nil {
		b.Content = ContentRef{DocumentID: d.Content.DocumentID, Channels: maps.Clone(d.Content.Channels)}
	}
	if d.Audience != nil {
		b.Audience = *d.Audience
	}
	if d.Channels != nil {
		b.Channels = slices.Clone(*d.Channels)
	}
	if d.WhatsAppTemplate != nil {
		t := *d.WhatsAppTemplate
		b.WhatsAppTemplate = &t
	}
}

// limitReached is the 409 of a bot at MaxBroadcasts.
func limitReached() error {
	return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a bot has at most %d broadcasts that are not archived; archive finished ones", MaxBroadcasts).
		With("limit", MaxBroadcasts)
}

// Create makes a draft broadcast.
func (s *Service) Create(ctx context.Context, bot string, d Definition) (Broadcast, error) {
	if err := d.check(true); err != nil {
		return Broadcast{}, err
	}
	now := stamp(s.d.Now())
	rec := record{Broadcast: Broadcast{ID: ids.At("bc", now), Type: "broadcast", Audience: AudienceRef{Type: AudienceAll},
		Status: Draft, Revision: 1, CreatedAt: now, UpdatedAt: now}, bot: bot}
	d.apply(&rec.Broadcast)
	if err := s.insert(ctx, rec); err != nil {
		return Broadcast{}, err
	}
	return rec.Broadcast, nil
}

// insert writes a new broadcast of either generation, counted toward MaxBroadcasts.
func (s *Service) insert(ctx context.Context, rec record, extra ...store.Write) error {
	it, err := rec.item()
	if err != nil {
		return err
	}
	err = store.Counted(ctx, s.d.Store, countKey(rec.bot), 1, func(c store.Counter) error {
		if c.Count >= MaxBroadcasts {
			return limitReached()
		}
		return s.d.Store.Transact(ctx, append([]store.Write{c.Write, store.PutOp(it, store.MustNotExist)}, extra...))
	})
	if err != nil {
		return fmt.Errorf("create broadcast: %w", err)
	}
	return nil
}

// load reads a second-generation broadcast (404 when it is none).
func (s *Service) load(ctx context.Context, bot, id string) (record, error) {
	return s.loadKey(ctx, bot, broadcastKey(bot, id))
}

func (s *Service) loadKey(ctx context.Context, bot string, k store.Key) (record, error) {
	it, err := s.d.Store.Get(ctx, k)
	if errors.Is(err, store.ErrNotFound) {
		return record{}, httpapi.NotFound("broadcast")
	}
	if err != nil {
		return record{}, err
	}
	return decodeRecord(bot, it)
}

// lookup finds a broadcast of either generation: the second generation first, then the
// legacy one (spec 4.6 rule 1).
func (s *Service) lookup(ctx context.Context, bot, id string) (record, error) {
	rec, err := s.load(ctx, bot, id)
	if httpapi.KindOf(err) != httpapi.KindNotFound {
		return rec, err
	}
	return s.loadKey(ctx, bot, legacyKey(bot, id))
}

// Get returns a second-generation broadcast.
func (s *Service) Get(ctx context.Context, bot, id string) (Broadcast, error) {
	rec, err := s.load(ctx, bot, id)
	return rec.Broadcast, err
}

// List returns a page of the bot's second-generation broadcasts, oldest first: those not
// archived, or every one with archived.
func (s *Service) List(ctx context.Context, bot string, archived bool, limit int, cursor string) ([]Broadcast, string, error) {
	q := store.Query{Index: store.GSI1, PK: livePK(bot), Limit: limit, Cursor: cursor}
	if archived {
		q = store.Query{PK: broadcastsPK(bot), Prefix: broadcastPrefix, Limit: limit, Cursor: cursor}
	}
	page, err := s.d.Store.Query(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]Broadcast, 0, len(page.Items))
	for _, it := range page.Items {
		r, err := decodeRecord(bot, it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, r.Broadcast)
	}
	return out, page.Next, nil
}

// Update changes a draft under expected: 409 stale_revision, 409 broadcast_not_editable
// once it is scheduled.
func (s *Service) Update(ctx context.Context, bot, id string, expected int64, d Definition) (Broadcast, error) {
	if err := d.check(false); err != nil {
		return Broadcast{}, err
	}
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Broadcast{}, err
	}
	if rec.Revision != expected {
		return Broadcast{}, httpapi.StaleRevision(rec.Revision)
	}
	if rec.Status != Draft || rec.Archived {
		return Broadcast{}, httpapi.Errorf(httpapi.KindConflict, "broadcast_not_editable", "only a draft changes; this broadcast is %s", rec.Status).
			With("state", rec.Status)
	}
	d.apply(&rec.Broadcast)
	if err := s.save(ctx, &rec, expected, nil, 0); err != nil {
		return Broadcast{}, err
	}
	return rec.Broadcast, nil
}

// save writes rec as the next revision after expected, with extra writes and the broadcast
// count moved by delta, in one transaction. Losing the race is 409 stale_revision.
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
			return s.stale(ctx, *rec)
		}
		return err
	}
	return store.Counted(ctx, s.d.Store, countKey(rec.bot), delta, func(c store.Counter) error {
		err := s.d.Store.Transact(ctx, append([]store.Write{c.Write, put}, extra...))
		if errors.As(err, &ce) && ce.Index == 1 {
			return s.stale(ctx, *rec)
		}
		return err
	})
}

func (s *Service) stale(ctx context.Context, rec record) error {
	cur, err := s.loadKey(ctx, rec.bot, rec.key())
	if err != nil {
		return err
	}
	return httpapi.StaleRevision(cur.Revision)
}

// putNew writes a new item.
func putNew(it store.Item) store.Write { return store.PutOp(it, store.MustNotExist) }
