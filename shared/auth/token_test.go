package auth

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewTokenShape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind   TokenKind
		prefix string
	}{
		{KindPAT, "mbp_"},
		{KindBot, "mbb_"},
		{KindInstallation, "mbi_"},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			t.Parallel()
			seen := map[string]bool{}
			for range 200 {
				tok := NewToken(tt.kind)
				require.Len(t, tok, 40)
				require.True(t, strings.HasPrefix(tok, tt.prefix), tok)
				for _, c := range tok[4:] {
					require.Contains(t, base62, string(c), "token %q has a non-base62 character", tok)
				}
				kind, ok := ParseToken(tok)
				require.True(t, ok, tok)
				require.Equal(t, tt.kind, kind)
				require.False(t, seen[tok], "duplicate token")
				seen[tok] = true
			}
		})
	}
}

// Every one-character change anywhere in a token, the prefix included, is caught offline.
func TestParseTokenRejectsEverySingleCharacterChange(t *testing.T) {
	t.Parallel()
	alphabet := base62 + "_"
	for _, kind := range []TokenKind{KindPAT, KindBot, KindInstallation} {
		for range 5 {
			tok := NewToken(kind)
			for i := range len(tok) {
				for _, c := range []byte(alphabet) {
					if c == tok[i] {
						continue
					}
					changed := tok[:i] + string(c) + tok[i+1:]
					_, ok := ParseToken(changed)
					require.False(t, ok, "%q (position %d changed) parsed", changed, i)
				}
			}
		}
	}
}

func TestParseTokenRejectsMalformed(t *testing.T) {
	t.Parallel()
	pat := NewToken(KindPAT)
	bot := NewToken(KindBot)
	tests := []struct {
		name string
		tok  string
	}{
		{"empty", ""},
		{"prefix only", "mbp_"},
		{"truncated", pat[:len(pat)-1]},
		{"extra character", pat + "A"},
		{"unknown prefix", "mbx_" + pat[4:]},
		{"GitHub prefix", "ghp_" + pat[4:]},
		{"PAT body under the bot prefix", "mbb_" + pat[4:]},
		{"bot body under the PAT prefix", "mbp_" + bot[4:]},
		{"non-base62 character", pat[:10] + "-" + pat[11:]},
		{"non-ASCII character", pat[:38] + "é"},
		{"space inside", pat[:10] + " " + pat[11:]},
		{"lower-cased", strings.ToLower(pat)},
		{"upper-cased prefix", strings.ToUpper(pat[:4]) + pat[4:]},
		{"swapped checksum halves", pat[:34] + pat[37:] + pat[34:37]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.tok == pat {
				t.Skip("mutation left the token unchanged")
			}
			_, ok := ParseToken(tt.tok)
			assert.False(t, ok)
		})
	}
}

func TestHashToken(t *testing.T) {
	t.Parallel()
	a, b := NewToken(KindPAT), NewToken(KindPAT)
	ha := HashToken(a)
	assert.Len(t, ha, 64, "hex SHA-256")
	assert.Equal(t, ha, HashToken(a), "deterministic")
	assert.NotEqual(t, ha, HashToken(b))
	assert.NotContains(t, ha, a[4:34], "the hash does not contain the secret")
	// Known vector: SHA-256("abc").
	assert.Equal(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", HashToken("abc"))
}

func TestMaskToken(t *testing.T) {
	t.Parallel()
	for _, kind := range []TokenKind{KindPAT, KindBot, KindInstallation} {
		for range 50 {
			tok := NewToken(kind)
			m := MaskToken(tok)
			// Only the prefix and the last four checksum characters show; the 30 secret
			// characters (tok[4:34]) are all behind the stars.
			require.Equal(t, tok[:4]+"********"+tok[36:], m)
			require.GreaterOrEqual(t, len(tok)-4, 4+secretLen, "the visible tail is checksum, not secret")
		}
	}
	assert.Equal(t, "****", MaskToken("short"))
	assert.Equal(t, "****", MaskToken(""))
}
