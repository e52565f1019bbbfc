package auth

import (
	"errors"
	"strings"
	"testing"
)

// FuzzAuthenticate feeds Authorization headers to the whole path a request's credentials
// take (BearerToken, ParseToken, the store lookup, the cache): it never panics, answers only
// the four credential errors for anything but a live token, and a token it accepts is one
// that was issued.
func FuzzAuthenticate(f *testing.F) {
	fx := newFixture(f)
	_, live := fx.pat(f)
	f.Add("Bearer " + live)
	f.Add("bearer   " + live + "  ")
	f.Add("Bearer " + strings.Replace(live, live[10:11], "0", 1))
	f.Add("Bearer " + NewToken(KindPAT)) // well-formed, never issued
	f.Add("Bearer " + NewToken(KindBot))
	f.Add("Bearer mbp_")
	f.Add("Basic dXNlcjpwYXNz")
	f.Add("Bearer\t" + live)
	f.Add("")
	f.Add("Bearer " + strings.Repeat("\xff", 44))
	f.Fuzz(func(t *testing.T, header string) {
		p, err := fx.svc.Authenticate(t.Context(), header)
		if err == nil {
			if p == nil || p.TokenID == "" || p.AccountID != fx.acct.ID {
				t.Fatalf("accepted %q as %+v", header, p)
			}
			tok, _ := BearerToken(header)
			if tok != live {
				t.Fatalf("accepted a token that was never issued: %q", header)
			}
			return
		}
		if !errors.Is(err, ErrMissingCredentials) && !errors.Is(err, ErrMalformedToken) &&
			!errors.Is(err, ErrUnknownToken) && !errors.Is(err, ErrExpiredToken) {
			t.Fatalf("%q: unexpected error %v", header, err)
		}
	})
}

// FuzzParseToken: ParseToken accepts only tokens of the documented shape whose checksum
// holds, and never panics.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{NewToken(KindPAT), NewToken(KindBot), "mbp_x", "", strings.Repeat("a", tokenLen)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		kind, ok := ParseToken(tok)
		if !ok {
			return
		}
		if len(tok) != tokenLen || (kind == KindPAT) != strings.HasPrefix(tok, PATPrefix) || (kind == KindBot) != strings.HasPrefix(tok, BotPrefix) {
			t.Fatalf("accepted %q as %s", tok, kind)
		}
		if checksum(tok[:4], []byte(tok[4:4+secretLen])) != tok[4+secretLen:] {
			t.Fatalf("accepted %q with a wrong checksum", tok)
		}
	})
}
