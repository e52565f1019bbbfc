package anthropic_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/tests/fakes/ai/anthropic"
)

func TestChecks(t *testing.T) {
	t.Parallel()
	f := anthropic.New(t)
	f.AddKey("k")
	good := `{"model":"claude-3-5-haiku-latest","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	for name, tc := range map[string]struct {
		key, version, body string
		status             int
		want               string
	}{
		"ok":            {"k", "2023-06-01", good, 200, `"stop_reason":"end_turn"`},
		"no key":        {"", "2023-06-01", good, 401, "authentication_error"},
		"wrong key":     {"x", "2023-06-01", good, 401, "invalid x-api-key"},
		"no version":    {"k", "", good, 400, "anthropic-version"},
		"unknown field": {"k", "2023-06-01", `{"model":"claude-3-5-haiku-latest","max_tokens":5,"foo":1,"messages":[{"role":"user","content":"hi"}]}`, 400, "foo: Extra inputs"},
		"no max_tokens": {"k", "2023-06-01", `{"model":"claude-3-5-haiku-latest","messages":[{"role":"user","content":"hi"}]}`, 400, "max_tokens: Field required"},
		"zero tokens":   {"k", "2023-06-01", `{"model":"claude-3-5-haiku-latest","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, 400, "greater than or equal to 1"},
		"two users":     {"k", "2023-06-01", `{"model":"claude-3-5-haiku-latest","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`, 400, "must alternate"},
		"system role":   {"k", "2023-06-01", `{"model":"claude-3-5-haiku-latest","max_tokens":5,"messages":[{"role":"system","content":"a"}]}`, 400, "Input should be 'user' or 'assistant'"},
		"empty":         {"k", "2023-06-01", `{"model":"claude-3-5-haiku-latest","max_tokens":5,"messages":[{"role":"user","content":""}]}`, 400, "non-empty"},
		"blocks":        {"k", "2023-06-01", `{"model":"claude-3-5-haiku-latest","max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, 200, `"input_tokens":2`},
		"unknown model": {"k", "2023-06-01", `{"model":"claude-9","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 404, "not_found_error"},
	} {
		req, err := http.NewRequest(http.MethodPost, f.URL()+"/v1/messages", bytes.NewBufferString(tc.body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if tc.key != "" {
			req.Header.Set("x-api-key", tc.key)
		}
		if tc.version != "" {
			req.Header.Set("anthropic-version", tc.version)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assert.Equal(t, tc.status, res.StatusCode, name)
		assert.Contains(t, string(b), tc.want, name)
	}
	assert.Equal(t, 12, f.Requests())
}
