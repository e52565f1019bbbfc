package emailcampaigns_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/content"
	contentwiring "github.com/botplatform/api/functions/content/wiring"
	"github.com/botplatform/api/functions/emailcampaigns"
	"github.com/botplatform/api/functions/emailcampaigns/wiring"
	"github.com/botplatform/api/functions/emaildomains"
	domainswiring "github.com/botplatform/api/functions/emaildomains/wiring"
	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	dnsfake "github.com/botplatform/api/tests/fakes/dns"
)

// The service as the emailcampaigns Lambda composes it (wiring.New over the sending-domains
// service): a test send opens the sending domain's sealed DKIM key (kms:Decrypt, the
// Lambda's one use of the secrets key; scheduling's domain check opens it too) and signs the
// message with it. The campaign's send job runs in the jobs Lambda.
func TestTestSendOpensTheSendingDomainsSealedDKIMKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dns := dnsfake.New(t)
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	sink := &email.Sink{Dir: t.TempDir()}
	env := familytest.Env(t, family.Deps{Secrets: key, Email: sink, LinkKey: []byte("0123456789abcdef0123456789abcdef"),
		PublicURL: "https://api.example.com", EmailSettings: family.EmailSettings{DNSServer: dns.Addr}})
	bot := ids.New("bot")

	// The emaildomains Lambda adds the sending domain (sealing its DKIM key) and verifies it
	// once its records are published; the content Lambda publishes the email.
	asDomains := sqlitetest.As(ctx, "emaildomains")
	domains := domainswiring.New(env)
	d, err := domains.Add(asDomains, bot, emaildomains.NewDomain{Name: "shop.example"})
	require.NoError(t, err)
	for _, rec := range d.Records {
		switch rec.Type {
		case "TXT":
			dns.TXT(rec.Name, rec.Value)
		case "MX":
			dns.MX(rec.Name, rec.Value, 10)
		case "CNAME":
			dns.CNAME(rec.Name, rec.Value)
		}
	}
	d, err = domains.Verify(asDomains, bot, d.ID)
	require.NoError(t, err)
	require.Equal(t, emaildomains.StatusVerified, d.Status)
	asContent := sqlitetest.As(ctx, "content")
	docs := contentwiring.New(env)
	doc, err := docs.Create(asContent, bot, content.NewDocument{Type: content.TypeEmail, Name: "March news",
		Draft: json.RawMessage(`{"subject":"March news","text":"Hello {{ subscriber.first_name }}","from":{"name":"Shop","address":"news@shop.example"}}`)})
	require.NoError(t, err)
	_, err = docs.Publish(asContent, bot, doc.ID, doc.Revision)
	require.NoError(t, err)

	svc, err := wiring.New(env)
	require.NoError(t, err)
	name := "March news"
	c, err := svc.Create(ctx, bot, emailcampaigns.Definition{Name: &name, ContentID: &doc.ID})
	require.NoError(t, err)
	res, err := svc.TestSend(ctx, bot, c.ID, []string{"ann@example.org"})
	require.NoError(t, err)
	require.Len(t, res.Sent, 1)
	assert.Equal(t, "ann@example.org", res.Sent[0].Address)

	// The message went out signed with the domain's key.
	files, err := sink.List()
	require.NoError(t, err)
	require.Len(t, files, 1)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.Contains(t, string(b), "DKIM-Signature:")
	assert.Contains(t, string(b), "d=shop.example")
	assert.Contains(t, string(b), "s="+d.DKIMSelector)
	assert.Contains(t, string(b), "[Test] March news")
}
