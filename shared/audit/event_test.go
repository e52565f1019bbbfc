package audit_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
)

func TestPublishScrubsCredentialShapedValues(t *testing.T) {
	t.Parallel()
	log, _, _ := newLog(t)
	tok := auth.NewToken(auth.KindPAT)
	e := event("acct_A", "bot_"+tok, t0) // a path segment the client chose
	e.RequestID = tok                    // an X-Request-Id the client chose
	require.NoError(t, log.Publish(t.Context(), e))

	got, _, err := log.List(t.Context(), "acct_A", "", 10, "")
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, audit.Redacted, got[0].RequestID)
	assert.Equal(t, audit.Redacted, got[0].BotID)
	assert.Equal(t, e.ID, got[0].ID)
	b, err := json.Marshal(got)
	require.NoError(t, err)
	assert.NotContains(t, string(b), tok)
}

func TestDecodeEventIsStrict(t *testing.T) {
	t.Parallel()
	want := event("acct_A", "bot_1", t0)
	good, err := json.Marshal(want)
	require.NoError(t, err)
	e, err := audit.DecodeEvent(good)
	require.NoError(t, err)
	assert.Equal(t, want, e)

	for name, bad := range map[string]string{
		"unknown field": strings.Replace(string(good), `"id"`, `"body":"x","id"`, 1),
		"trailing data": string(good) + `{}`,
		"wrong type":    strings.Replace(string(good), `"status":200`, `"status":"200"`, 1),
		"no account":    strings.Replace(string(good), `"account_id":"acct_A"`, `"account_id":""`, 1),
		"no time":       strings.Replace(string(good), t0.Format(time.RFC3339), "0001-01-01T00:00:00Z", 1),
	} {
		_, err := audit.DecodeEvent([]byte(bad))
		assert.Error(t, err, name)
	}
}
