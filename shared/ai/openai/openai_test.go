package openai_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/ai/openai"
	"github.com/botplatform/api/tests/fakes/ai/aitest"
	fake "github.com/botplatform/api/tests/fakes/ai/openai"
)

func newClient(t testing.TB, url string) *openai.Client {
	t.Helper()
	c, err := openai.New(openai.Config{BaseURL: url, AllowPrivate: true})
	require.NoError(t, err)
	return c
}

func TestSuite(t *testing.T) {
	t.Parallel()
	aitest.Run(t, aitest.Provider{
		Fake:        func(t testing.TB) aitest.Fake { return fake.New(t) },
		Client:      func(t testing.TB, url string) ai.Client { return newClient(t, url) },
		Model:       "gpt-4o-mini",
		Answered:    "gpt-4o-mini-2024-07-18",
		Temperature: 1.5,
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := openai.New(openai.Config{})
	require.NoError(t, err, "the default base URL")
	for _, bad := range []string{"http://api.openai.com", "ftp://x", "https://u:p@api.openai.com", "https://api.openai.com?x=1", "api.openai.com"} {
		_, err := openai.New(openai.Config{BaseURL: bad})
		assert.Error(t, err, bad)
	}
	_, err = openai.New(openai.Config{BaseURL: "http://127.0.0.1:1/", AllowPrivate: true})
	assert.NoError(t, err, "plain http for tests")
}

func TestProviderRefusals(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	f.AddKey(aitest.Key)
	c := newClient(t, f.URL())
	req := ai.Request{Model: "gpt-4o", MaxOutputTokens: 10, Messages: []ai.Message{{Role: ai.RoleUser, Content: "hi"}}}

	hot := 2.5
	req.Temperature = &hot
	var pe *ai.ProviderError
	_, err := c.Generate(t.Context(), aitest.Key, req)
	require.ErrorAs(t, err, &pe, "OpenAI's temperature is 0..2")
	assert.Equal(t, http.StatusBadRequest, pe.Status)
	assert.Equal(t, "decimal_out_of_range", pe.Code)
	assert.False(t, pe.Temporary)

	req.Temperature = nil
	resp, err := c.Generate(t.Context(), aitest.Key, req)
	require.NoError(t, err)
	assert.Equal(t, "gpt-4o-2024-08-06", resp.Model)
	assert.Contains(t, resp.ID, "chatcmpl-")

	f.FailNext(1, http.StatusUnauthorized)
	_, err = c.Generate(t.Context(), aitest.Key, req)
	assert.ErrorIs(t, err, ai.ErrUnauthorized, "a key OpenAI stopped taking")
}
