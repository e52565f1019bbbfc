package ai

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	aiapi "github.com/botplatform/api/shared/ai"
)

// The ledger holds every managed generation of every account, by day, provider and model,
// and no account's own-key generation; reconciling it with an invoice reports each row as a
// match, a mismatch, unbilled or unmetered.
func TestReconcile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, key := range []string{"a", "b", "c"} {
		res := f.respond(t, key, body("fast", "hello")) // gemini: 5 in, 3 out, 5*100+3*400 nanos
		require.Equal(t, http.StatusOK, res.Code, res.Body)
	}
	res := f.respond(t, "c", body("fast", "hello")) // a replay meters nothing
	require.Equal(t, "true", res.Header.Get("Idempotent-Replayed"))
	_, err := f.setKey(t, f.Account.ID, aiapi.Gemini, "own-key")
	require.NoError(t, err)
	res = f.respond(t, "own", body("fast", "hello"))
	require.Equal(t, "byok", res.JSON["billing"], res.Body)
	f.clock.Advance(24 * time.Hour)
	require.NoError(t, f.svc.DeleteKey(t.Context(), f.Account.ID, aiapi.Gemini))
	res = f.respond(t, "q", body("quality", "hi there")) // anthropic
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	model := res.JSON["model"].(string)

	day1, day2 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	ledger, err := f.svc.Ledger(t.Context(), day1, day2)
	require.NoError(t, err)
	require.Len(t, ledger, 2)
	assert.Equal(t, LedgerRow{Date: "2026-11-20", Provider: "gemini", Model: ledger[0].Model, Requests: 3, InputTokens: 15, OutputTokens: 9,
		Cost: costOf(5100)}, ledger[0], "three managed requests; the replay and the own-key one are not the platform's")
	assert.Equal(t, "anthropic", ledger[1].Provider)

	invoice, err := ReadInvoice(strings.NewReader("date,provider,model,input_tokens,output_tokens,cost_usd\n" +
		"2026-11-20,gemini," + ledger[0].Model + ",15,9,0.0000051\n" +
		"2026-11-21,anthropic," + model + ",7,3,0.05\n" +
		"2026-11-21,openai,gpt-4o-mini,100,10,0.001\n" +
		"2026-12-01,openai,gpt-4o-mini,1,1,0\n"))
	require.NoError(t, err)
	rec, err := f.svc.Reconcile(t.Context(), day1, day2, invoice)
	require.NoError(t, err)
	require.Len(t, rec.Rows, 3, "the line outside the range is left out")
	assert.Equal(t, ReconcileMatch, rec.Rows[0].Status)
	assert.Equal(t, ReconcileMismatch, rec.Rows[1].Status, "tokens and cost differ")
	assert.Equal(t, int64(7)-ledger[1].InputTokens, rec.Rows[1].InputDelta)
	assert.Equal(t, int64(50_000_000)-ledger[1].Cost.Nanos, rec.Rows[1].CostDeltaNanos)
	assert.Equal(t, ReconcileUnmetered, rec.Rows[2].Status)
	assert.Equal(t, 2, rec.Differences)

	rec, err = f.svc.Reconcile(t.Context(), day1, day2, nil)
	require.NoError(t, err)
	assert.Equal(t, ReconcileUnbilled, rec.Rows[0].Status)

	_, err = f.svc.Ledger(t.Context(), day1, day1.AddDate(0, 0, MaxUsageDays))
	assert.ErrorContains(t, err, "at most 366")
}

func TestReadInvoiceRefusesBadLines(t *testing.T) {
	t.Parallel()
	_, err := ReadInvoice(strings.NewReader("date,provider,model\n"))
	assert.Error(t, err)
	_, err = ReadInvoice(strings.NewReader("date,provider,model,input_tokens,output_tokens,cost_usd\n" +
		"20-11-2026,bard,,x,1,1e3\n2026-11-20,openai,m,1,1,0.0000000001\n"))
	require.Error(t, err)
	for _, want := range []string{"line 2: date", "line 2: provider", "line 2: model", "line 2: token", "line 2: cost_usd", "line 3: cost_usd"} {
		assert.Contains(t, err.Error(), want)
	}
	n, ok := dollarsToNanos("12.345678901")
	assert.True(t, ok)
	assert.Equal(t, int64(12_345_678_901), n)
}
