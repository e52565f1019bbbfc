package wiring

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/infra/access/accesstest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// The subscriber writes a form's answers make run in the popups Lambda (infra/access).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "popups")) }

func TestWriteFields(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := sqlitetest.Open(t, sqlite.WithClock(clock))
	subs := subscribers.NewService(st, clock, nil)
	bot := ids.At("bot", now)
	setup := sqlitetest.Unrecorded(t.Context())
	for _, spec := range []subscribers.FieldSpec{{Name: "email", Type: subscribers.TypeString}, {Name: "age", Type: subscribers.TypeNumber}, {Name: "consent", Type: subscribers.TypeBoolean}} {
		_, err := subs.CreateField(setup, bot, spec)
		require.NoError(t, err)
	}
	w := Writer{Subs: subs, Now: clock}
	ctx := t.Context()

	names, err := Fields{subs}.FieldNames(ctx, bot)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"email", "age", "consent"}, names)

	none, err := w.Subscriber(ctx, bot, "v_abc123")
	require.NoError(t, err)
	assert.Empty(t, none, "no subscriber before the first answer")
	id, err := w.WriteFields(ctx, bot, "v_abc123", map[string]string{"email": "ann@example.com", "age": "41", "consent": "true", "gone": "x"})
	require.NoError(t, err)
	s, err := subs.GetByIdentity(ctx, bot, subscribers.ChannelWeb, "v_abc123")
	require.NoError(t, err)
	assert.Equal(t, s.ID, id)
	found, err := w.Subscriber(ctx, bot, "v_abc123")
	require.NoError(t, err)
	assert.Equal(t, s.ID, found)
	assert.Equal(t, map[string]any{"email": "ann@example.com", "age": float64(41), "consent": true}, s.Fields, "typed; a deleted field is skipped")

	// A second answer updates the same subscriber.
	again, err := w.WriteFields(ctx, bot, "v_abc123", map[string]string{"age": "42"})
	require.NoError(t, err)
	assert.Equal(t, id, again)
	s, err = subs.GetByIdentity(ctx, bot, subscribers.ChannelWeb, "v_abc123")
	require.NoError(t, err)
	assert.Equal(t, float64(42), s.Fields["age"])
	assert.Equal(t, "ann@example.com", s.Fields["email"])

	_, err = w.WriteFields(ctx, bot, "v_abc123", map[string]string{"age": "old"})
	assert.Equal(t, httpapi.KindInvalid, httpapi.KindOf(err))
}
