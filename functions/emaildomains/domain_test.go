package emaildomains

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
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
	// The records proved the name the bot's: the claim stays the domain's (releasing it
	// would need a deregistration first), so no other bot takes the name, and the next
	// verify registers again.
	c, _, ok, err := f.svc.readClaim(ctx, "example.com")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, claim{BotID: f.bot, DomainID: d.ID}, c)
	_, err = f.svc.Add(ctx, ids.At("bot", t0), NewDomain{Name: "example.com"})
	assert.Equal(t, "domain_taken", httpapitest.AsError(t, err).Code)
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

	// Deleted by its holder, the name is held until the provider let it go, then free.
	require.NoError(t, f.svc.Delete(ctx, f.bot, a.ID, nil))
	assert.Empty(t, f.ids.deregistered, "not before the release job")
	_, err = f.svc.Verify(ctx, botB, b.ID)
	he = httpapitest.AsError(t, err)
	assert.Equal(t, "domain_releasing", he.Code)
	assert.Equal(t, 409, he.Status())
	released, err := f.releases(t)
	require.NoError(t, err)
	assert.Equal(t, []string{"example.com"}, released)
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
	for _, k := range []store.Key{nameKey(f.bot, "example.com"), domainRoutesKey(f.bot, d.ID)} {
		_, err = f.st.Get(ctx, k)
		assert.ErrorIs(t, err, store.ErrNotFound, k.PK+" "+k.SK)
	}
	cnt, err := f.st.Get(ctx, countKey(f.bot, "DOM"))
	require.NoError(t, err)
	assert.Zero(t, cnt.Count)
	// The claim is held, releasing, until its job has deregistered the name.
	c, _, ok, err := f.svc.readClaim(ctx, "example.com")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, claim{BotID: f.bot, DomainID: d.ID, Releasing: true}, c)
	assert.Empty(t, f.ids.deregistered)

	// The name can be added again, with a new selector, but not verified before the release.
	again, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "example.com"})
	require.NoError(t, err)
	assert.NotEqual(t, d.DKIMSelector, again.DKIMSelector)
	f.dns.publish(again)
	_, err = f.svc.Verify(ctx, f.bot, again.ID)
	assert.Equal(t, "domain_releasing", httpapitest.AsError(t, err).Code)
	otherBot := ids.At("bot", t0)
	other, err := f.svc.Add(ctx, otherBot, NewDomain{Name: "example.com"})
	require.NoError(t, err, "another bot may add a name being released, to verify it once it is free")
	f.dns.publish(other)
	_, err = f.svc.Verify(ctx, otherBot, other.ID)
	assert.Equal(t, "domain_releasing", httpapitest.AsError(t, err).Code)

	// A provider failure fails the job, which the queue retries; the claim stays meanwhile.
	f.ids.err = errors.New("ses is down")
	_, err = f.releases(t)
	require.ErrorContains(t, err, "ses is down")
	_, _, ok, err = f.svc.readClaim(ctx, "example.com")
	require.NoError(t, err)
	assert.True(t, ok, "no other bot can register the name while the identity is there")
	f.ids.err = nil
	released, err := f.releases(t)
	require.NoError(t, err)
	assert.Equal(t, []string{"example.com"}, released)
	assert.Equal(t, []string{"example.com", "example.com"}, f.ids.deregistered, "tried, then done")
	_, err = f.st.Get(ctx, claimKey("example.com"))
	assert.ErrorIs(t, err, store.ErrNotFound)
	// A job the queue delivers again finds nothing left to do.
	before := len(f.ids.deregistered)
	_, done, err := f.svc.ReleaseStep(ctx, []byte(`{"name":"example.com","bot_id":"`+f.bot+`","domain_id":"`+d.ID+`"}`), "")
	require.NoError(t, err)
	assert.True(t, done)
	assert.Len(t, f.ids.deregistered, before)

	// Now the name verifies again, and deleting a domain that never claimed its name
	// releases nothing.
	got, err := f.svc.Verify(ctx, f.bot, again.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusVerified, got.Status)
	pending, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "pending.example"})
	require.NoError(t, err)
	require.NoError(t, f.svc.Delete(ctx, f.bot, pending.ID, nil))
	assert.Empty(t, f.queue.Sent())
}

// Without a provider (the local process) a deleted domain's claim goes in its deletion's
// transaction: there is no identity to deregister first.
func TestDeleteDomainWithoutAProvider(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.Identities, c.Outbox = nil, nil })
	ctx := t.Context()
	d := f.verified(t, f.bot, "example.com")
	require.NoError(t, f.svc.Delete(ctx, f.bot, d.ID, nil))
	_, err := f.st.Get(ctx, claimKey("example.com"))
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.Empty(t, f.queue.Sent())
	d = f.verified(t, ids.At("bot", t0), "example.com")
	assert.Equal(t, StatusVerified, d.Status)
}

// A provider needs the outbox the release jobs go through.
func TestIdentitiesNeedAnOutbox(t *testing.T) {
	t.Parallel()
	cfg := Config{Store: sqlitetest.Open(t), Sealer: secretstest.Wrap(nil, kms.PurposeSecrets), Identities: &fakeIdentities{},
		Log: slog.New(slog.DiscardHandler), Now: time.Now}
	_, err := New(cfg)
	assert.ErrorContains(t, err, "Outbox is required")
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

// A domain deleted while its verify registers it with the provider leaves no identity
// behind: whichever of the two gives the claim up, its release job deregisters the name after
// the registration, and only then frees it.
func TestDeletedWhileVerifying(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// del deletes the domain while its verify registers it.
		del func(t *testing.T, f *fixture, d Domain)
	}{
		{"the deletion sees the claim", func(t *testing.T, f *fixture, d Domain) {
			require.NoError(t, f.svc.Delete(t.Context(), f.bot, d.ID, nil))
		}},
		{"the deletion read no claim yet", func(t *testing.T, f *fixture, d Domain) {
			// As a deletion that read the claim before the verify wrote it commits: the
			// domain goes, the claim is left to the verify.
			require.NoError(t, f.st.Delete(t.Context(), domainKey(f.bot, d.ID), store.Always))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := t.Context()
			d, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "example.com"})
			require.NoError(t, err)
			f.dns.publish(d)
			f.ids.registering = func() { tc.del(t, f, d) }
			_, err = f.svc.Verify(ctx, f.bot, d.ID)
			assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
			f.ids.registering = nil
			require.Contains(t, f.ids.registered, "example.com", "registered after the deletion")

			c, _, ok, err := f.svc.readClaim(ctx, "example.com")
			require.NoError(t, err)
			require.True(t, ok, "the claim is held until the name is deregistered")
			assert.True(t, c.Releasing)
			released, err := f.releases(t)
			require.NoError(t, err)
			assert.Equal(t, []string{"example.com"}, released, "one release job")
			assert.Equal(t, []string{"example.com"}, f.ids.deregistered)
			_, err = f.st.Get(ctx, claimKey("example.com"))
			assert.ErrorIs(t, err, store.ErrNotFound)
		})
	}
}

// A deployment that receives mail lists the optional inbound MX at the domain itself: verify
// reports it like any record, but the domain verifies without it (a domain may send only).
func TestInboundMXIsOptional(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.Records.InboundMX = "Inbound-SMTP.eu-west-1.amazonaws.com." })
	ctx := t.Context()
	d, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "mail.example.com"})
	require.NoError(t, err)
	var inbound Record
	sendOnly := d
	sendOnly.Records = nil
	for _, r := range d.Records {
		if r.Purpose == PurposeInbound {
			inbound = r
			continue
		}
		sendOnly.Records = append(sendOnly.Records, r)
	}
	require.Equal(t, "MX", inbound.Type)
	assert.Equal(t, "mail.example.com", inbound.Name)
	assert.Equal(t, "inbound-smtp.eu-west-1.amazonaws.com", inbound.Value, "lower-cased, without the final dot")
	assert.False(t, inbound.Required)

	f.dns.publish(sendOnly)
	d, err = f.svc.Verify(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusVerified, d.Status, "verified without the inbound MX")
	status := func(d Domain) RecordStatus {
		for _, r := range d.Records {
			if r.Purpose == PurposeInbound {
				return r.Status
			}
		}
		return ""
	}
	assert.Equal(t, RecordMissing, status(d))

	f.dns.publish(d)
	d, err = f.svc.Verify(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, RecordFound, status(d))

	assert.Error(t, Config{Records: RecordValues{InboundMX: "not a host"}}.Validate())
}

// A verified domain checked more than ReverifyAfter ago is verified again by the next
// signer: records removed since fail it (and the signer with it); a DNS outage meanwhile
// leaves it signing, checked again at the next signer; within the day nothing is looked up.
func TestSignerVerifiesAgainAfterADay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	d := f.verified(t, f.bot, "mail.example.com")
	from := "news@mail.example.com"

	f.dns.setFail(true) // a lookup now would fail: none is made within the day
	f.clock.Advance(ReverifyAfter - time.Minute)
	_, err := f.svc.Signer(ctx, f.bot, from)
	require.NoError(t, err)

	f.clock.Advance(2 * time.Minute) // past the day, DNS down: still signs
	_, err = f.svc.Signer(ctx, f.bot, from)
	require.NoError(t, err)
	assert.Contains(t, f.logs.String(), "not verified again for now")
	got, err := f.svc.Get(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusVerified, got.Status)

	// DNS back, the DKIM record gone: the domain fails, and signing with it stops.
	f.dns.setFail(false)
	var dkim string
	for _, r := range d.Records {
		if r.Purpose == PurposeDKIM {
			dkim = r.Name
		}
	}
	f.dns.setTXT(dkim)
	_, err = f.svc.Signer(ctx, f.bot, from)
	require.ErrorIs(t, err, ErrNotVerified)
	got, err = f.svc.Get(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, got.Status)
	require.NotNil(t, got.CheckedAt)
	assert.Equal(t, f.clock.Now().UTC().Truncate(time.Second), got.CheckedAt.UTC().Truncate(time.Second))
}
