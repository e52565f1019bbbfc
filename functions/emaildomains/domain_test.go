package emaildomains

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

func recordOf(t *testing.T, d Domain, purpose string) Record {
	t.Helper()
	for _, r := range d.Records {
		if r.Purpose == purpose {
			return r
		}
	}
	t.Fatalf("no %s record in %+v", purpose, d.Records)
	return Record{}
}

func TestAddDomainListsRecordsToPublish(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d, err := f.svc.Add(t.Context(), f.bot, NewDomain{Name: "Mail.Example.COM."})
	require.NoError(t, err)
	assert.True(t, ids.Valid("edom", d.ID))
	assert.Equal(t, "mail.example.com", d.Name, "lower case, no final dot")
	assert.Equal(t, StatusPending, d.Status)
	assert.Regexp(t, `^bp[a-z2-7]{8}$`, d.DKIMSelector)
	assert.Equal(t, int64(1), d.Revision)
	assert.Equal(t, t0, d.CreatedAt)
	assert.Nil(t, d.VerifiedAt)

	dkimRec, err := email.DNSRecord(testKey().Public())
	require.NoError(t, err)
	ten := 10
	want := []Record{
		{Type: "TXT", Name: d.DKIMSelector + "._domainkey.mail.example.com", Value: dkimRec, Purpose: PurposeDKIM, Required: true},
		{Type: "TXT", Name: "bounce.mail.example.com", Value: "v=spf1 include:amazonses.com ~all", Purpose: PurposeSPF, Required: true},
		{Type: "MX", Name: "bounce.mail.example.com", Value: "feedback-smtp.eu-west-1.amazonses.com", Priority: &ten, Purpose: PurposeReturnPath, Required: true},
		{Type: "TXT", Name: "_dmarc.mail.example.com", Value: "v=DMARC1; p=none; rua=mailto:dmarc-reports@mail.example.com", Purpose: PurposeDMARC},
		{Type: "CNAME", Name: "track.mail.example.com", Value: trackingHost, Purpose: PurposeTracking},
	}
	for i := range want {
		want[i].Status, want[i].Found = RecordUnchecked, []string{}
	}
	assert.Equal(t, want, d.Records)

	b, err := json.Marshal(d)
	require.NoError(t, err)
	for _, k := range keyTexts() {
		assert.NotContains(t, string(b), k)
	}
	assert.NotContains(t, string(b), "sealed_key")

	// Stored sealed: the item holds no key in the clear either.
	it, err := f.st.Get(t.Context(), domainKey(f.bot, d.ID))
	require.NoError(t, err)
	for _, k := range keyTexts() {
		assert.NotContains(t, string(it.Data), k)
	}

	_, err = f.svc.Add(t.Context(), f.bot, NewDomain{Name: "mail.example.com"})
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "name_taken", he.Code)
	assert.Equal(t, d.ID, he.Extensions["conflicting_id"])
}

func TestDomainNameRules(t *testing.T) {
	t.Parallel()
	ok := []string{"example.com", "mail.example.co.uk", "xn--80ak6aa92e.com", "a-b.example.org", "example.test"}
	for _, name := range ok {
		n := NewDomain{Name: name}
		assert.NoError(t, n.Validate(), name)
	}
	bad := map[string]string{
		"":                                      "is required",
		"com":                                   "fully qualified",
		"co.uk":                                 "public suffix",
		"github.io":                             "public suffix",
		"exa mple.com":                          "letters, digits and hyphens",
		"пример.рф":                             "punycode",
		"-a.example.com":                        "hyphen",
		"a..example.com":                        "1 to 63",
		"192.168.1.1":                           "IP address",
		"printer.local":                         "public internet",
		"example.com/path":                      "letters, digits and hyphens",
		"a_b.example.com":                       "letters, digits and hyphens",
		"x." + strings.Repeat("a", 64) + ".com": "1 to 63",
	}
	for name, msg := range bad {
		n := NewDomain{Name: name}
		err := n.Validate()
		require.Error(t, err, name)
		assert.Equal(t, []string{"name"}, httpapitest.InvalidFields(t, err), name)
		assert.Contains(t, httpapitest.AsError(t, err).Error(), msg, name)
	}
	long := NewDomain{Name: strings.Repeat("a.", 100) + "com"}
	assert.ErrorContains(t, long.Validate(), "at most 200")
}

func TestVerifyThenSign(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	d, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "example.com"})
	require.NoError(t, err)

	f.clock.Advance(time.Minute)
	got, err := f.svc.Verify(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, got.Status)
	assert.Equal(t, int64(2), got.Revision)
	require.NotNil(t, got.CheckedAt)
	assert.Equal(t, t0.Add(time.Minute), *got.CheckedAt)
	assert.Nil(t, got.VerifiedAt)
	for _, r := range got.Records {
		assert.Equal(t, RecordMissing, r.Status, r.Purpose)
		assert.Equal(t, []string{}, r.Found, r.Purpose)
	}
	assert.Empty(t, f.ids.registered, "nothing is registered before it verifies")
	_, err = f.svc.Signer(ctx, f.bot, "news@example.com")
	assert.ErrorIs(t, err, ErrNotVerified)

	f.dns.publish(d)
	f.clock.Advance(time.Minute)
	got, err = f.svc.Verify(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusVerified, got.Status)
	assert.Equal(t, int64(3), got.Revision)
	require.NotNil(t, got.VerifiedAt)
	assert.Equal(t, t0.Add(2*time.Minute), *got.VerifiedAt)
	for _, r := range got.Records {
		assert.Equal(t, RecordFound, r.Status, r.Purpose)
		assert.Equal(t, []string{r.Value}, r.Found, "%s: a long DKIM value is joined from its strings", r.Purpose)
	}

	// Registered with the provider once, with the domain's own key and selector.
	assert.Equal(t, map[string]string{"example.com": d.DKIMSelector}, f.ids.registered)
	block, _ := pem.Decode(f.ids.keys["example.com"])
	require.NotNil(t, block)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	assert.True(t, testKey().Equal(k))
	f.ids.registered = map[string]string{}
	got, err = f.svc.Verify(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusVerified, got.Status)
	assert.Equal(t, int64(4), got.Revision, "verify is repeatable and counts as a change")
	assert.Empty(t, f.ids.registered, "registered only the first time")

	s, err := f.svc.Signer(ctx, f.bot, "Shop News <News@Example.com>")
	require.NoError(t, err)
	assert.Equal(t, "example.com", s.Domain)
	assert.Equal(t, d.DKIMSelector, s.Selector)
	raw, err := email.Build(email.Message{From: mail.Address{Name: "Shop", Address: "news@example.com"},
		To: mail.Address{Address: "ada@example.org"}, Subject: "Привет", Text: "Hello"}, t0)
	require.NoError(t, err)
	signed, err := email.Sign(raw, *s)
	require.NoError(t, err)
	resolver := NewResolver(f.dns.addr)
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(signed), &dkim.VerifyOptions{
		LookupTXT: func(name string) ([]string, error) { return resolver.LookupTXT(context.Background(), name) },
	})
	require.NoError(t, err)
	require.Len(t, verifs, 1)
	assert.NoError(t, verifs[0].Err, "the signature verifies against the published record")
	assert.Equal(t, "example.com", verifs[0].Domain)

	for _, from := range []string{"news@other.example", "news@sub.example.com", "not an address"} {
		_, err = f.svc.Signer(ctx, f.bot, from)
		assert.ErrorIs(t, err, ErrNotVerified, from)
	}
	_, err = f.svc.Signer(ctx, ids.At("bot", t0), "news@example.com")
	assert.ErrorIs(t, err, ErrNotVerified, "another bot has no such domain")
}

func TestVerifyReportsWrongValues(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	d, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "example.com"})
	require.NoError(t, err)
	f.dns.publish(d)
	// DMARC and tracking are recommended: the domain verifies without them.
	f.dns.mu.Lock()
	delete(f.dns.txt, "_dmarc.example.com")
	delete(f.dns.cname, "track.example.com")
	f.dns.mu.Unlock()
	got, err := f.svc.Verify(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusVerified, got.Status)
	assert.Equal(t, RecordMissing, recordOf(t, got, PurposeDMARC).Status, "a name with no TXT is missing")
	assert.Equal(t, RecordMissing, recordOf(t, got, PurposeTracking).Status)

	spf := "v=spf1 include:_spf.google.com ~all"
	f.dns.setTXT("bounce.example.com", spf)
	f.dns.setTXT(d.DKIMSelector+"._domainkey.example.com", "v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA")
	f.dns.setTXT("_dmarc.example.com", "v=DMARC1; p=reject", "v=DMARC1; p=none")
	got, err = f.svc.Verify(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, got.Status, "a verified domain whose records break stops signing")
	s := recordOf(t, got, PurposeSPF)
	assert.Equal(t, RecordWrongValue, s.Status)
	assert.Equal(t, []string{spf}, s.Found)
	assert.Equal(t, RecordWrongValue, recordOf(t, got, PurposeDKIM).Status)
	assert.Equal(t, RecordWrongValue, recordOf(t, got, PurposeDMARC).Status, "two DMARC records void DMARC")
	assert.Equal(t, RecordFound, recordOf(t, got, PurposeReturnPath).Status)
	require.NotNil(t, got.VerifiedAt, "it did verify once")
	_, err = f.svc.Signer(ctx, f.bot, "news@example.com")
	assert.ErrorIs(t, err, ErrNotVerified)

	// SPF with the include among others, whitespace in a DKIM value: found.
	f.dns.setTXT("bounce.example.com", "v=spf1 ip4:192.0.2.1 +include:amazonses.com -all")
	dkimRec := recordOf(t, d, PurposeDKIM).Value
	f.dns.setTXT(d.DKIMSelector+"._domainkey.example.com", dkimRec[:80]+" "+dkimRec[80:])
	got, err = f.svc.Verify(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusVerified, got.Status)
	_, err = f.svc.Signer(ctx, f.bot, "news@example.com")
	assert.NoError(t, err)

	// A CNAME elsewhere.
	f.dns.mu.Lock()
	f.dns.cname["track.example.com"] = "elsewhere.example.net"
	f.dns.mu.Unlock()
	got, err = f.svc.Verify(ctx, f.bot, d.ID)
	require.NoError(t, err)
	tr := recordOf(t, got, PurposeTracking)
	assert.Equal(t, RecordWrongValue, tr.Status)
	assert.Equal(t, []string{"elsewhere.example.net"}, tr.Found)
}

func TestVerifyFailuresChangeNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	d, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "example.com"})
	require.NoError(t, err)
	f.dns.publish(d)

	f.dns.setFail(true)
	_, err = f.svc.Verify(ctx, f.bot, d.ID)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "dns_unavailable", he.Code)
	assert.Equal(t, 503, he.Status())
	f.dns.setFail(false)

	f.ids.err = errors.New("ses is down")
	_, err = f.svc.Verify(ctx, f.bot, d.ID)
	he = httpapitest.AsError(t, err)
	assert.Equal(t, "provider_unavailable", he.Code)
	_, err = f.st.Get(ctx, claimKey("example.com"))
	assert.ErrorIs(t, err, store.ErrNotFound, "the claim is released when registration fails")
	got, err := f.svc.Get(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(1), got.Revision)
	assert.Equal(t, StatusPending, got.Status)

	f.ids.err = nil
	got, err = f.svc.Verify(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusVerified, got.Status)
}

func TestDomainTakenAcrossBots(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	botB := ids.At("bot", t0)
	// Both add the name before either verifies: the first to verify holds it.
	a, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "example.com"})
	require.NoError(t, err)
	b, err := f.svc.Add(ctx, botB, NewDomain{Name: "example.com"})
	require.NoError(t, err)
	// The records differ only in their DKIM selector and key.
	f.dns.publish(a)
	bk := recordOf(t, b, PurposeDKIM)
	f.dns.setTXT(bk.Name, bk.Value)
	got, err := f.svc.Verify(ctx, f.bot, a.ID)
	require.NoError(t, err)
	require.Equal(t, StatusVerified, got.Status)
	_, err = f.svc.Verify(ctx, botB, b.ID)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "domain_taken", he.Code)
	assert.Equal(t, 409, he.Status())
	got, err = f.svc.Get(ctx, botB, b.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusPending, got.Status)

	_, err = f.svc.Add(ctx, ids.At("bot", t0), NewDomain{Name: "example.com"})
	assert.Equal(t, "domain_taken", httpapitest.AsError(t, err).Code, "a verified name cannot be added elsewhere")
	_, err = f.svc.Signer(ctx, botB, "news@example.com")
	assert.ErrorIs(t, err, ErrNotVerified)

	// Deleted by its holder, the name is free.
	require.NoError(t, f.svc.Delete(ctx, f.bot, a.ID, nil))
	assert.Equal(t, []string{"example.com"}, f.ids.deregistered)
	got, err = f.svc.Verify(ctx, botB, b.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusVerified, got.Status)
	c, _, ok, err := f.svc.readClaim(ctx, "example.com")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, claim{BotID: botB, DomainID: b.ID}, c)
}

func TestDeleteDomain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	d := f.verified(t, f.bot, "example.com")
	r, err := f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: d.ID, Match: "support", Action: &Action{Type: ActionStore}})
	require.NoError(t, err)

	err = f.svc.Delete(ctx, f.bot, d.ID, nil)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "domain_in_use", he.Code)
	assert.Equal(t, []string{r.ID}, he.Extensions["route_ids"])

	require.NoError(t, f.svc.DeleteRoute(ctx, f.bot, r.ID, nil))
	stale := int64(1)
	err = f.svc.Delete(ctx, f.bot, d.ID, &stale)
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)
	require.NoError(t, f.svc.Delete(ctx, f.bot, d.ID, &d.Revision))
	_, err = f.svc.Get(ctx, f.bot, d.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
	assert.Equal(t, []string{"example.com"}, f.ids.deregistered)
	for _, k := range []store.Key{claimKey("example.com"), nameKey(f.bot, "example.com"), domainRoutesKey(f.bot, d.ID)} {
		_, err = f.st.Get(ctx, k)
		assert.ErrorIs(t, err, store.ErrNotFound, k.PK+" "+k.SK)
	}
	cnt, err := f.st.Get(ctx, countKey(f.bot, "DOM"))
	require.NoError(t, err)
	assert.Zero(t, cnt.Count)

	// The name can be added again, with a new selector.
	again, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "example.com"})
	require.NoError(t, err)
	assert.NotEqual(t, d.DKIMSelector, again.DKIMSelector)

	// A deregistration failure is logged, not the caller's.
	f.ids.err = errors.New("ses is down")
	require.NoError(t, f.svc.Delete(ctx, f.bot, again.ID, nil), "never registered: no provider call")
	d2 := func() Domain { f.ids.err = nil; return f.verified(t, f.bot, "example.org") }()
	f.ids.err = errors.New("ses is down")
	require.NoError(t, f.svc.Delete(ctx, f.bot, d2.ID, nil))
	assert.Contains(t, f.logs.String(), "not deregistered")
}

func TestDomainLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	for i := range MaxDomains {
		_, err := f.svc.Add(ctx, f.bot, NewDomain{Name: fmt.Sprintf("d%d.example.com", i)})
		require.NoError(t, err)
	}
	_, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "one-more.example.com"})
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "limit_reached", he.Code)
	assert.Equal(t, MaxDomains, he.Extensions["limit"])

	page, next, err := f.svc.List(ctx, f.bot, 15, "")
	require.NoError(t, err)
	assert.Len(t, page, 15)
	rest, next, err := f.svc.List(ctx, f.bot, 15, next)
	require.NoError(t, err)
	assert.Len(t, rest, 5)
	assert.Empty(t, next)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	err := Config{Records: RecordValues{TrackingHost: "not a host", SPFInclude: "a:b"}}.Validate()
	require.Error(t, err)
	for _, want := range []string{"Store", "Sealer", "Log", "Now", "TrackingHost", "SPFInclude"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Regexp(t, regexp.MustCompile(`feedback-smtp\.us-east-1\.amazonses\.com`), RecordValues{}.withDefaults().MailFromMX)
}
