package openai_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/tests/fakes/ai/openai"
)

func TestChecks(t *testing.T) {
	t.Parallel()
	f := openai.New(t)
	f.AddKey("sk-good-key-123456")
	const good = `{"model":"gpt-4o-mini","max_completion_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	for name, tc := range map[string]struct {
		key, body string
		status    int
		want      string
	}{
		"ok":              {"sk-good-key-123456", good, 200, `"finish_reason":"stop"`},
		"wrong key":       {"sk-wrong-key-654321", good, 401, "sk-********4321"},
		"no key":          {"", good, 401, "didn't provide an API key"},
		"unknown param":   {"sk-good-key-123456", `{"model":"gpt-4o-mini","max_completion_tokens":5,"bogus":1,"messages":[{"role":"user","content":"hi"}]}`, 400, "Unrecognized request argument supplied: bogus"},
		"no max":          {"sk-good-key-123456", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, 400, "max_completion_tokens"},
		"bad role":        {"sk-good-key-123456", `{"model":"gpt-4o-mini","max_completion_tokens":5,"messages":[{"role":"bot","content":"hi"}]}`, 400, "invalid_value"},
		"options alone":   {"sk-good-key-123456", `{"model":"gpt-4o-mini","max_completion_tokens":5,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, 400, "only allowed when 'stream'"},
		"unknown model":   {"sk-good-key-123456", `{"model":"gpt-9","max_completion_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 404, "model_not_found"},
		"stream no usage": {"sk-good-key-123456", `{"model":"gpt-4o-mini","max_completion_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200, "data: [DONE]"},
	} {
		req, err := http.NewRequest(http.MethodPost, f.URL()+"/v1/chat/completions", bytes.NewBufferString(tc.body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assert.Equal(t, tc.status, res.StatusCode, name)
		assert.Contains(t, string(b), tc.want, name)
		if name == "stream no usage" {
			assert.NotContains(t, string(b), `"usage"`, "usage only with include_usage")
			assert.Equal(t, 3, strings.Count(string(b), `"content":"`), "a role chunk, then a word a chunk: echo: hi")
		}
	}
}
