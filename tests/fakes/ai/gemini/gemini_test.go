package gemini_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/tests/fakes/ai/gemini"
)

func TestChecks(t *testing.T) {
	t.Parallel()
	f := gemini.New(t)
	f.AddKey("AIza-good")
	const good = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":5}}`
	for name, tc := range map[string]struct {
		path, key, body string
		status          int
		want            string
	}{
		"ok":             {"gemini-2.0-flash:generateContent", "AIza-good", good, 200, `"finishReason":"STOP"`},
		"no key":         {"gemini-2.0-flash:generateContent", "", good, 403, "PERMISSION_DENIED"},
		"wrong key":      {"gemini-2.0-flash:generateContent", "AIza-bad", good, 400, "API_KEY_INVALID"},
		"unknown model":  {"gemini-9:generateContent", "AIza-good", good, 404, "models/gemini-9 is not found"},
		"unknown method": {"gemini-2.0-flash:explode", "AIza-good", good, 404, "NOT_FOUND"},
		"bad role":       {"gemini-2.0-flash:generateContent", "AIza-good", `{"contents":[{"role":"assistant","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":5}}`, 400, "valid role"},
		"no parts":       {"gemini-2.0-flash:generateContent", "AIza-good", `{"contents":[{"role":"user","parts":[]}],"generationConfig":{"maxOutputTokens":5}}`, 400, "must not be empty"},
		"no max":         {"gemini-2.0-flash:generateContent", "AIza-good", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, 400, "max_output_tokens"},
		"unknown name":   {"gemini-2.0-flash:generateContent", "AIza-good", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"bogus":1,"generationConfig":{"maxOutputTokens":5}}`, 400, "Cannot find field"},
		"stream array":   {"gemini-2.0-flash:streamGenerateContent", "AIza-good", good, 200, `"finishReason":"STOP"`},
		"stream sse":     {"gemini-2.0-flash:streamGenerateContent?alt=sse", "AIza-good", good, 200, "\r\n\r\ndata: "},
	} {
		req, err := http.NewRequest(http.MethodPost, f.URL()+"/v1beta/models/"+tc.path, bytes.NewBufferString(tc.body))
		require.NoError(t, err)
		if tc.key != "" {
			req.Header.Set("x-goog-api-key", tc.key)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assert.Equal(t, tc.status, res.StatusCode, name)
		assert.Contains(t, string(b), tc.want, name)
		if name == "stream array" {
			var chunks []map[string]any
			require.NoError(t, json.Unmarshal(b, &chunks))
			assert.Len(t, chunks, 2, "echo: hi, a word a chunk")
		}
	}
}
