package emaillinks

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	s, err := New([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	r := Ref{Bot: "bot_1", Campaign: "ecmp_2", Recipient: "rcp_3", Link: 4}
	tok := s.Token(Click, r)
	got, err := s.Parse(Click, tok)
	require.NoError(t, err)
	assert.Equal(t, r, got)

	_, err = s.Parse(Open, tok)
	assert.ErrorIs(t, err, ErrInvalid, "a click token is no open token")
	other, err := New([]byte(strings.Repeat("x", 32)))
	require.NoError(t, err)
	_, err = other.Parse(Click, tok)
	assert.ErrorIs(t, err, ErrInvalid, "another key")
	for _, bad := range []string{"", "x", tok + "A", "A" + tok, strings.Repeat("a", MaxTokenLen+1), strings.Replace(tok, ".", "", 1)} {
		_, err = s.Parse(Click, bad)
		assert.ErrorIs(t, err, ErrInvalid, bad)
	}
	// Changing the link index in the payload breaks the signature.
	forged := Ref{Bot: "bot_1", Campaign: "ecmp_2", Recipient: "rcp_3", Link: 5}
	p, _, _ := strings.Cut(s.Token(Click, forged), ".")
	_, sig, _ := strings.Cut(tok, ".")
	_, err = s.Parse(Click, p+"."+sig)
	assert.ErrorIs(t, err, ErrInvalid)

	assert.True(t, strings.HasPrefix(s.OpenURL("https://api.example/", r), "https://api.example/e/t/o/"))
	assert.True(t, strings.HasSuffix(s.OpenURL("https://api.example", r), ".gif"))
	u := s.UnsubscribeURL("https://api.example", r)
	ur, err := s.Parse(Unsubscribe, strings.TrimPrefix(u, "https://api.example/u/"))
	require.NoError(t, err)
	assert.Equal(t, 0, ur.Link)
	_, err = New([]byte("short"))
	assert.Error(t, err)
}
