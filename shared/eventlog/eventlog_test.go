package eventlog_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
)

func TestCurrency(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]int{"USD": 2, "EUR": 2, "JPY": 0, "KWD": 3, "CLF": 4, "XCG": 2, "ZWG": 2, "SLE": 2} {
		exp, ok := eventlog.Currency(code)
		assert.True(t, ok, code)
		assert.Equal(t, want, exp, code)
	}
	for _, code := range []string{"usd", "US", "USDD", "XXX", "XAU", "XTS", "ANG", "HRK", "SLL", "ZWL", ""} {
		_, ok := eventlog.Currency(code)
		assert.False(t, ok, code)
	}
	assert.Len(t, eventlog.Currencies(), 165)
	for _, c := range eventlog.Currencies() {
		assert.Regexp(t, `^[A-Z]{3}$`, c)
	}
}

func TestReserved(t *testing.T) {
	t.Parallel()
	for _, n := range eventlog.ReservedNames() {
		assert.True(t, eventlog.Reserved(n), n)
		assert.NoError(t, eventlog.CheckName(n), n)
	}
	assert.True(t, eventlog.Reserved("platform.anything"))
	assert.False(t, eventlog.Reserved("purchase"))
	assert.False(t, eventlog.Reserved("platform"))
}

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	e := eventlog.Event{ID: "ev_1", BotID: "bot_1", Name: "x", At: time.Now(), Source: eventlog.SourceCustom,
		Revenue: &eventlog.Revenue{Minor: 1, Currency: "ABC"}}
	err := eventlog.Validate(e)
	var ie *eventlog.InvalidError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "revenue.currency", ie.Field)
	assert.ErrorIs(t, err, eventlog.ErrInvalid)
	e.Revenue.Currency = "USD"
	assert.NoError(t, eventlog.Validate(e))
}

// Emit derives the id from the cause, so a retried emitter appends one event; a failure is
// logged, not returned; a nil log records nothing.
func TestEmit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	m := eventlogtest.NewMemory()
	e := eventlog.Event{BotID: "bot_1", SubscriberID: "sub_1", Name: eventlog.EmailOpened, At: time.Now(), Source: eventlog.SourceEmail}
	eventlog.Emit(ctx, m, log, "email_opened:send_1", e)
	eventlog.Emit(ctx, m, log, "email_opened:send_1", e)
	eventlog.Emit(ctx, m, log, "email_opened:send_2", e)
	n := 0
	require.NoError(t, m.Scan(ctx, eventlog.Query{BotID: "bot_1", From: e.At.Add(-time.Minute), To: e.At.Add(time.Minute)}, func(got eventlog.Event) error {
		n++
		assert.Contains(t, []string{eventlog.CauseID("email_opened:send_1"), eventlog.CauseID("email_opened:send_2")}, got.ID)
		return nil
	}))
	assert.Equal(t, 2, n)
	assert.Empty(t, logged.String())

	e.Name = "Not A Name"
	eventlog.Emit(ctx, m, log, "x", e)
	assert.Contains(t, logged.String(), "event not recorded")
	eventlog.Emit(ctx, nil, log, "x", e) // no log: nothing happens
	assert.Len(t, eventlog.CauseID("x"), 25)
}

// AppendNew works with a Log that is no Reporter, one event at a time.
func TestAppendNewFallsBack(t *testing.T) {
	t.Parallel()
	l := onlyLog{eventlogtest.NewMemory()}
	e := eventlog.Event{ID: "a", BotID: "bot_1", Name: "x", At: time.Now(), Source: eventlog.SourceCustom}
	added, err := eventlog.AppendNew(context.Background(), l, e, e)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false}, added)
	e.Name = ""
	_, err = eventlog.AppendNew(context.Background(), l, e)
	assert.True(t, errors.Is(err, eventlog.ErrInvalid))
}

type onlyLog struct{ eventlog.Log }
