package subscribers

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/stats"
	"github.com/botplatform/api/shared/store"
)

func TestUpsertCreatesThenUpdates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	f.field(t, "plan", TypeString)
	score := f.field(t, "score", TypeNumber)
	vip := f.label(t, "VIP")
	seen := t0.Add(-time.Hour)

	sub, created, err := f.svc.Upsert(t.Context(), f.bot, ChannelTelegram, "358704112", Changes{
		FirstName: ptr(" Anna "), LastName: ptr("Schmidt"), Locale: ptr("pt-br"), Timezone: ptr("Europe/Berlin"),
		LastSeenAt: &seen, Fields: map[string]any{"plan": "pro", score.ID: 3}, AddLabels: []string{vip.ID},
	})
	require.NoError(t, err)
	assert.True(t, created)
	assert.True(t, strings.HasPrefix(sub.ID, "sub_"))
	assert.Equal(t, Subscriber{
		ID: sub.ID, Channel: "telegram", ExternalID: "358704112",
		FirstName: ptr("Anna"), LastName: ptr("Schmidt"), Name: ptr("Anna Schmidt"),
		Locale: ptr("pt-BR"), Timezone: ptr("Europe/Berlin"),
		Labels: []string{vip.ID}, Fields: map[string]any{"plan": "pro", "score": 3.0},
		CreatedAt: t0, UpdatedAt: t0, LastSeenAt: &seen, Revision: 1,
	}, sub)
	got, err := f.svc.Get(t.Context(), f.bot, sub.ID)
	require.NoError(t, err)
	assert.Equal(t, sub, got, "what the create answered is what is stored")

	// The same identity again: an update of the given members only.
	f.clock.Advance(time.Minute)
	earlier := seen.Add(-time.Hour)
	upd, created, err := f.svc.Upsert(t.Context(), f.bot, ChannelTelegram, "358704112", Changes{
		LastName: ptr(""), LastSeenAt: &earlier, Fields: map[string]any{"plan": nil},
	})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, sub.ID, upd.ID)
	assert.Equal(t, int64(2), upd.Revision)
	assert.Nil(t, upd.LastName, "\"\" clears")
	assert.Equal(t, ptr("Anna"), upd.Name)
	assert.Equal(t, &seen, upd.LastSeenAt, "last_seen_at never moves back")
	assert.Equal(t, map[string]any{"score": 3.0}, upd.Fields, "null clears, the rest is kept")
	assert.Equal(t, []string{vip.ID}, upd.Labels)
	assert.Equal(t, t0.Add(time.Minute), upd.UpdatedAt)
	assert.Equal(t, t0, upd.CreatedAt)

	// An upsert that changes nothing makes no revision.
	same, created, err := f.svc.Upsert(t.Context(), f.bot, ChannelTelegram, "358704112", Changes{FirstName: ptr("Anna"), LastSeenAt: &earlier})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, upd, same)

	// Another channel with the same external id is another person.
	other, created, err := f.svc.Upsert(t.Context(), f.bot, ChannelVK, "358704112", Changes{})
	require.NoError(t, err)
	assert.True(t, created)
	assert.NotEqual(t, sub.ID, other.ID)
	assert.Nil(t, other.Name)
	assert.Equal(t, []string{}, other.Labels)
	assert.Equal(t, map[string]any{}, other.Fields)

	byIdentity, err := f.svc.GetByIdentity(t.Context(), f.bot, ChannelTelegram, "358704112")
	require.NoError(t, err)
	assert.Equal(t, sub.ID, byIdentity.ID)
	_, err = f.svc.GetByIdentity(t.Context(), f.bot, ChannelWhatsApp, "358704112")
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)
	_, err = f.svc.GetByIdentity(t.Context(), f.bot, "fax", "1")
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)

	// Another bot has its own subscribers.
	_, err = f.svc.Get(t.Context(), "bot_00000000000000000000000000", sub.ID)
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)
}

func TestUpsertValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	f.field(t, "plan", TypeString)
	f.field(t, "score", TypeNumber)
	future := t0.Add(time.Hour)
	tests := []struct {
		name, channel, externalID string
		c                         Changes
		problems                  []string
	}{
		{"missing identity", "", "", Changes{}, []string{"channel", "external_id"}},
		{"unknown channel", "fax", "1", Changes{}, []string{"channel"}},
		{"external id with a space", "telegram", "1 2", Changes{}, []string{"external_id"}},
		{"external id too long", "telegram", strings.Repeat("9", MaxExternalIDLen+1), Changes{}, []string{"external_id"}},
		{"name too long", "telegram", "1", Changes{FirstName: ptr(strings.Repeat("a", MaxNameLen+1))}, []string{"first_name"}},
		{"bad locale", "telegram", "1", Changes{Locale: ptr("english")}, []string{"locale"}},
		{"bad zone", "telegram", "1", Changes{Timezone: ptr("Mars/Base")}, []string{"timezone"}},
		{"Local is no zone", "telegram", "1", Changes{Timezone: ptr("Local")}, []string{"timezone"}},
		{"seen in the future", "telegram", "1", Changes{LastSeenAt: &future}, []string{"last_seen_at"}},
		{"malformed label", "telegram", "1", Changes{AddLabels: []string{"vip"}}, []string{"labels[0]"}},
		{"unknown label", "telegram", "1", Changes{AddLabels: []string{"lbl_00000000000000000000000000"}}, []string{"labels[0]"}},
		{"unknown field", "telegram", "1", Changes{Fields: map[string]any{"nope": 1}}, []string{"fields.nope"}},
		{"bad field key", "telegram", "1", Changes{Fields: map[string]any{"Not A Key": 1}}, []string{"fields.Not A Key"}},
		{"wrong types, all reported", "telegram", "1", Changes{Fields: map[string]any{"plan": 1, "score": "1"}}, []string{"fields.plan", "fields.score"}},
	}
	for _, tt := range tests {
		_, _, err := f.svc.Upsert(t.Context(), f.bot, tt.channel, tt.externalID, tt.c)
		assert.Equal(t, tt.problems, httpapitest.InvalidFields(t, err), tt.name)
	}
	many := map[string]any{}
	for i := range MaxFieldsPerChange + 1 {
		many[fmt.Sprintf("f%d", i)] = "x"
	}
	_, _, err := f.svc.Upsert(t.Context(), f.bot, "telegram", "1", Changes{Fields: many})
	assert.Contains(t, httpapitest.InvalidFields(t, err), "fields")
	page, _, err := f.svc.List(t.Context(), f.bot, Filter{}, 50, "")
	require.NoError(t, err)
	assert.Empty(t, page, "no failed upsert created anything")
}

// However many import workers upsert the same identity at once, there is one subscriber
// and it was counted once.
func TestConcurrentUpsertsMakeOneSubscriber(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	const n = 12
	var wg sync.WaitGroup
	type result struct {
		id      string
		created bool
		err     error
	}
	results := make(chan result, n)
	for i := range n {
		wg.Go(func() {
			s, created, err := f.svc.Upsert(t.Context(), f.bot, ChannelWhatsApp, "15551234567", Changes{FirstName: ptr(fmt.Sprint("writer ", i))})
			results <- result{s.ID, created, err}
		})
	}
	wg.Wait()
	close(results)
	ids, creations := map[string]bool{}, 0
	for r := range results {
		require.NoError(t, r.err)
		ids[r.id] = true
		if r.created {
			creations++
		}
	}
	assert.Len(t, ids, 1)
	assert.Equal(t, 1, creations)
	series, err := stats.Query(t.Context(), f.store, f.bot, stats.Day, t0.Add(-time.Hour), t0.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, int64(1), series.Total[stats.NewSubscribers])
	assert.Equal(t, int64(1), series.Channels[ChannelWhatsApp][stats.NewSubscribers])
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	f.field(t, "plan", TypeString)
	f.field(t, "birthday", TypeDatetime)
	sub := f.subscriber(t, "1", "Anna", "Schmidt")

	tests := []struct {
		name     string
		id       string
		expected int64
		c        Changes
		code     string // "" succeeds
		revision int64
	}{
		{"nothing changes", sub.ID, 1, Changes{FirstName: ptr("Anna")}, "", 1},
		{"stale", sub.ID, 2, Changes{FirstName: ptr("Ann")}, "stale_revision", 0},
		{"invalid before stale", sub.ID, 2, Changes{Locale: ptr("x")}, "validation_failed", 0},
		{"unknown field before stale", sub.ID, 2, Changes{Fields: map[string]any{"nope": "x"}}, "validation_failed", 0},
		{"unknown subscriber", "sub_00000000000000000000000000", 1, Changes{}, "not_found", 0},
		{"malformed id", "nope", 1, Changes{}, "not_found", 0},
		{"set fields", sub.ID, 1, Changes{Fields: map[string]any{"plan": "pro", "birthday": "1990-05-17T00:00:00Z"}}, "", 2},
		{"rename", sub.ID, 2, Changes{FirstName: ptr("Ann"), Locale: ptr("de"), Timezone: ptr("Asia/Tokyo")}, "", 3},
	}
	for _, tt := range tests {
		got, err := f.svc.Update(t.Context(), f.bot, tt.id, tt.expected, tt.c)
		if tt.code != "" {
			require.Error(t, err, tt.name)
			assert.Equal(t, tt.code, httpapitest.AsError(t, err).Code, tt.name)
			continue
		}
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.revision, got.Revision, tt.name)
	}
	got, err := f.svc.Get(t.Context(), f.bot, sub.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"plan": "pro", "birthday": "1990-05-17T00:00:00Z"}, got.Fields)
	assert.Equal(t, ptr("Ann Schmidt"), got.Name)
	assert.Equal(t, ptr("Asia/Tokyo"), got.Timezone)
	_, err = f.svc.Update(t.Context(), f.bot, sub.ID, 1, Changes{FirstName: ptr("Late")})
	assert.Equal(t, int64(3), httpapitest.AsError(t, err).Extensions["current_revision"])
}

// Of two writers at the same revision exactly one wins: the revision check is the write's
// condition, not a read before it.
func TestConcurrentUpdatesOneWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	sub := f.subscriber(t, "1", "Anna", "Schmidt")
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := f.svc.Update(t.Context(), f.bot, sub.ID, 1, Changes{FirstName: ptr(fmt.Sprint("writer ", i))})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	won, stale := 0, 0
	for err := range errs {
		if err == nil {
			won++
		} else if httpapitest.AsError(t, err).Code == "stale_revision" {
			stale++
		}
	}
	assert.Equal(t, 1, won)
	assert.Equal(t, n-1, stale)
}

func TestLabelsOnASubscriber(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	a, b := f.label(t, "A"), f.label(t, "B")
	sub := f.subscriber(t, "1", "Anna", "Schmidt")

	s, err := f.svc.AddLabel(t.Context(), f.bot, sub.ID, b.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{b.ID}, s.Labels)
	assert.Equal(t, int64(2), s.Revision, "a label is a change")
	s, err = f.svc.AddLabel(t.Context(), f.bot, sub.ID, a.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{a.ID, b.ID}, s.Labels, "sorted, oldest label first")
	again, err := f.svc.AddLabel(t.Context(), f.bot, sub.ID, a.ID)
	require.NoError(t, err)
	assert.Equal(t, s, again, "adding a label twice changes nothing")
	assert.Equal(t, []string{sub.ID}, f.partition(t, memberPartition(f.bot, a.ID)))

	s, err = f.svc.RemoveLabel(t.Context(), f.bot, sub.ID, a.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{b.ID}, s.Labels)
	assert.Equal(t, int64(4), s.Revision)
	again, err = f.svc.RemoveLabel(t.Context(), f.bot, sub.ID, a.ID)
	require.NoError(t, err)
	assert.Equal(t, s, again, "removing a label it lacks changes nothing")
	assert.Empty(t, f.partition(t, memberPartition(f.bot, a.ID)))

	_, err = f.svc.AddLabel(t.Context(), f.bot, sub.ID, "lbl_00000000000000000000000000")
	assert.Equal(t, []string{"label_id"}, httpapitest.InvalidFields(t, err))
	_, err = f.svc.AddLabel(t.Context(), f.bot, sub.ID, "vip")
	assert.Equal(t, []string{"label_id"}, httpapitest.InvalidFields(t, err))
	_, err = f.svc.AddLabel(t.Context(), f.bot, "sub_00000000000000000000000000", a.ID)
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)
	_, err = f.svc.RemoveLabel(t.Context(), f.bot, sub.ID, "vip")
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)
}

func TestLabelsPerSubscriberLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	sub := f.subscriber(t, "1", "Anna", "Schmidt")
	var labels []string
	for i := range MaxLabelsPerSubscriber + 1 {
		labels = append(labels, f.label(t, fmt.Sprint("L", i)).ID)
	}
	for _, l := range labels[:MaxLabelsPerSubscriber] {
		_, err := f.svc.AddLabel(t.Context(), f.bot, sub.ID, l)
		require.NoError(t, err)
	}
	_, err := f.svc.AddLabel(t.Context(), f.bot, sub.ID, labels[MaxLabelsPerSubscriber])
	assert.True(t, errors.Is(err, ErrLimitReached))
	_, err = f.svc.AddLabel(t.Context(), f.bot, sub.ID, labels[0])
	assert.NoError(t, err, "a label it has is still fine")
	// An upsert can add at most MaxLabelsPerChange at once.
	_, _, err = f.svc.Upsert(t.Context(), f.bot, ChannelTelegram, "2", Changes{AddLabels: labels[:MaxLabelsPerChange+1]})
	assert.Equal(t, []string{"labels"}, httpapitest.InvalidFields(t, err))
	s, created, err := f.svc.Upsert(t.Context(), f.bot, ChannelTelegram, "2", Changes{AddLabels: labels[:MaxLabelsPerChange]})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Len(t, s.Labels, MaxLabelsPerChange)
	// Deleting the most-labelled subscriber is still one transaction.
	require.NoError(t, f.svc.Delete(t.Context(), f.bot, sub.ID, nil))
}

// Erasing a subscriber removes everything about the person and every index entry that led
// to them, keeps the anonymous counters, and frees the identity for a new subscriber.
func TestDeleteErasesPersonalData(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	f.field(t, "email", TypeString)
	l := f.label(t, "VIP")
	sub, _, err := f.svc.Upsert(t.Context(), f.bot, ChannelTelegram, "358704112", Changes{
		FirstName: ptr("Anna Maria"), LastName: ptr("Schmidt"), Fields: map[string]any{"email": "anna@example.com"}, AddLabels: []string{l.ID},
	})
	require.NoError(t, err)
	other := f.subscriber(t, "2", "Anna", "Other")

	err = f.svc.Delete(t.Context(), f.bot, sub.ID, ptr(int64(2)))
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)
	require.NoError(t, f.svc.Delete(t.Context(), f.bot, sub.ID, ptr(int64(1))))

	_, err = f.svc.Get(t.Context(), f.bot, sub.ID)
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)
	assert.Equal(t, "not_found", httpapitest.AsError(t, f.svc.Delete(t.Context(), f.bot, sub.ID, nil)).Code)
	assert.Empty(t, f.partition(t, memberPartition(f.bot, l.ID)))
	assert.Equal(t, []string{"telegram#2"}, f.partition(t, botPrefix(f.bot)+"#IDENT"))
	for _, sk := range f.partition(t, namePartition(f.bot)) {
		assert.True(t, strings.HasSuffix(sk, other.ID), "only the other subscriber is searchable: %s", sk)
	}
	// What remains is anonymous.
	tomb, err := f.store.Get(t.Context(), tombstoneKey(f.bot, sub.ID))
	require.NoError(t, err)
	for _, personal := range []string{"Anna", "Schmidt", "358704112", "example.com", l.ID} {
		assert.NotContains(t, string(tomb.Data), personal)
	}
	assert.Contains(t, string(tomb.Data), `"channel":"telegram"`)

	// The counters still count them, and the same identity later is a new subscriber.
	again, created, err := f.svc.Upsert(t.Context(), f.bot, ChannelTelegram, "358704112", Changes{})
	require.NoError(t, err)
	assert.True(t, created)
	assert.NotEqual(t, sub.ID, again.ID)
	assert.Nil(t, again.FirstName, "nothing of the erased subscriber comes back")
	assert.Empty(t, again.Fields)
	series, err := stats.Query(t.Context(), f.store, f.bot, stats.Day, t0.Add(-time.Hour), t0.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, int64(3), series.Total[stats.NewSubscribers])
}

// UpsertWith commits the caller's writes in the upsert's own transaction, on a create, a
// change and a change of nothing; a failed condition of the caller's writes names its
// index among them and commits nothing, the subscriber included.
func TestUpsertWithCommitsTheCallersWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	ctx := t.Context()
	claim := func(sk string) store.Write {
		return store.PutOp(store.Item{Key: store.Key{PK: "CLAIM", SK: sk}, Revision: 1}, store.MustNotExist)
	}
	var saw []Subscriber
	with := func(sk string) With {
		return func(sub Subscriber, created bool) ([]store.Write, error) {
			saw = append(saw, sub)
			return []store.Write{claim(sk)}, nil
		}
	}
	seen := t0.Add(-time.Hour)
	sub, created, err := f.svc.UpsertWith(ctx, f.bot, ChannelTelegram, "7", Changes{FirstName: ptr("Ann"), LastSeenAt: &seen}, with("1"))
	require.NoError(t, err)
	assert.True(t, created)
	require.Len(t, saw, 1)
	assert.Equal(t, sub, saw[0], "with sees the subscriber as the upsert leaves it")
	later := seen.Add(time.Minute)
	_, created, err = f.svc.UpsertWith(ctx, f.bot, ChannelTelegram, "7", Changes{LastSeenAt: &later}, with("2"))
	require.NoError(t, err)
	assert.False(t, created)
	_, _, err = f.svc.UpsertWith(ctx, f.bot, ChannelTelegram, "7", Changes{LastSeenAt: &later}, with("3"))
	require.NoError(t, err, "a change of nothing commits the caller's writes alone")
	for _, sk := range []string{"1", "2", "3"} {
		_, err := f.store.Get(ctx, store.Key{PK: "CLAIM", SK: sk})
		assert.NoError(t, err, sk)
	}

	// The caller's second write fails its condition: nothing is committed.
	_, _, err = f.svc.UpsertWith(ctx, f.bot, ChannelTelegram, "8", Changes{FirstName: ptr("Bo")},
		func(Subscriber, bool) ([]store.Write, error) { return []store.Write{claim("4"), claim("1")}, nil })
	var ce *store.ConditionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 1, ce.Index)
	_, err = f.store.Get(ctx, store.Key{PK: "CLAIM", SK: "4"})
	assert.ErrorIs(t, err, store.ErrNotFound)
	list, _, err := f.svc.List(ctx, f.bot, Filter{}, 10, "")
	require.NoError(t, err)
	assert.Len(t, list, 1, "Bo was not created")
}
