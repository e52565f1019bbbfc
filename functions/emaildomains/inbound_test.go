package emaildomains

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/botplatform/api/functions/emaildomains/internal/mimemail/mimemailtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/sns"
	"github.com/botplatform/api/shared/sns/snstest"
)

const localInbound = "/esp/local/inbound"

// testTopic is the SNS topic of the receipt rule the SES tests' verifier accepts.
const testTopic = "arn:aws:sns:eu-west-1:123456789012:inbound-mail"

// snsVerifier trusts fake, as a deployment trusts AWS, and accepts topics.
func snsVerifier(fake *snstest.Server, topics ...string) *sns.Verifier {
	return sns.New(sns.Config{Topics: topics, HostPattern: snstest.HostPattern, Client: fake.Client(),
		Now: func() time.Time { return t0 }})
}

// receipt is an SNS notification of testTopic carrying message, whose SNS id is id.
func receipt(id, message string) map[string]string {
	m := snstest.Notification(testTopic, message)
	m["MessageId"] = id
	return m
}

// inboundSetup is a bot with a verified example.com and three routes: support@ forwards,
// orders+*@ runs a reaction, news@ stores. Other addresses match no route.
type inboundSetup struct {
	f        *fixture
	s        *httpapitest.Server
	domain   Domain
	support  InboundRoute
	orders   InboundRoute
	reaction string
}

func newInbound(t *testing.T, opts ...func(*Config)) *inboundSetup {
	t.Helper()
	f, s := newServer(t, opts...)
	in := &inboundSetup{f: f, s: s, reaction: ids.At("rct", t0)}
	in.domain = f.verified(t, f.bot, "example.com")
	var err error
	ctx := t.Context()
	in.support, err = f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: in.domain.ID, Match: "support", Action: &Action{Type: ActionForward, To: "team@example.net"}})
	require.NoError(t, err)
	in.orders, err = f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: in.domain.ID, Match: "orders+*", Action: &Action{Type: ActionReaction, ReactionID: in.reaction}})
	require.NoError(t, err)
	_, err = f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: in.domain.ID, Match: "news", Action: &Action{Type: ActionStore}})
	require.NoError(t, err)
	return in
}

func (in *inboundSetup) postJSON(t *testing.T, body any) httpapitest.Reply {
	t.Helper()
	return in.s.DoAs(t, "", "POST", localInbound, body, InboundSecretHeader, testSecret)
}

func (in *inboundSetup) messages(t *testing.T) []map[string]any {
	t.Helper()
	r := in.s.Do(t, "GET", "/api/bots/"+in.f.bot+"/email/inbound-messages", nil)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	var out []map[string]any
	for _, m := range r.JSON["data"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestLocalInboundJSONStoresAndForwards(t *testing.T) {
	t.Parallel()
	in := newInbound(t)
	raw := mimemailtest.SampleMail("Support <Support@Example.com>", "m1@sender.example")
	r := in.postJSON(t, map[string]any{"raw": b64(raw)})
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, map[string]any{"stored": 1.0, "duplicates": 0.0, "dropped": 0.0, "ignored_recipients": 1.0}, r.JSON,
		"bo@elsewhere.example (Cc) is at no domain of the deployment")
	require.Len(t, in.f.acts.forwards, 1)
	assert.True(t, strings.HasPrefix(in.f.acts.forwards[0], in.f.bot+"/team@example.net/eim_"))
	assert.Equal(t, raw, in.f.acts.last.Raw, "a forward gets the original, attachments included")

	list := in.messages(t)
	require.Len(t, list, 1)
	sum := list[0]
	assert.NotContains(t, sum, "text", "lists carry no bodies")
	assert.Equal(t, "Заказ №42 — вопрос", sum["subject"])
	assert.Equal(t, in.support.ID, sum["route_id"])
	assert.Equal(t, true, sum["matched"])
	assert.Equal(t, []any{"Support@example.com"}, sum["recipients"])

	r = in.s.Do(t, "GET", "/api/bots/"+in.f.bot+"/email/inbound-messages/"+sum["id"].(string), nil)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	m := r.JSON
	assert.Equal(t, "Привет, мир with a soft break", m["text"])
	assert.Equal(t, "<p>Привет, <b>мир</b></p>", m["html"])
	assert.Equal(t, "m1@sender.example", m["message_id"])
	assert.Equal(t, "local", m["provider"])
	assert.Equal(t, map[string]any{"name": "Ада", "address": "ada@sender.example"}, m["from"])
	assert.EqualValues(t, len(raw), m["size"])
	assert.Equal(t, "2026-03-31T12:00:00Z", m["expires_at"])
	atts := m["attachments"].([]any)
	require.Len(t, atts, 2)
	assert.Equal(t, map[string]any{"filename": "отчет.pdf", "content_type": "application/pdf", "size": 400.0, "inline": false}, atts[0])
	action := m["action"].(map[string]any)
	assert.Equal(t, "forward", action["type"])
	assert.Equal(t, "done", action["status"])
	assert.NotContains(t, r.Body, "JVBERi", "attachment content is not stored")

	// The provider delivers again: nothing new is stored, nothing runs again.
	r = in.postJSON(t, map[string]any{"raw": b64(raw)})
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, 1.0, r.JSON["duplicates"])
	assert.Equal(t, 0.0, r.JSON["stored"])
	assert.Len(t, in.f.acts.forwards, 1)
	assert.Len(t, in.messages(t), 1)

	r = in.s.Do(t, "GET", "/api/bots/"+in.f.bot+"/email/inbound-messages/eim_nope", nil)
	assert.Equal(t, http.StatusNotFound, r.Code)
	r = in.s.Do(t, "GET", "/api/bots/"+ids.At("bot", t0)+"/email/inbound-messages", nil)
	assert.Equal(t, http.StatusNotFound, r.Code)
}

func TestLocalInboundRawRunsReaction(t *testing.T) {
	t.Parallel()
	in := newInbound(t)
	raw := mimemailtest.SampleMail("orders+42@example.com", "m2@sender.example")
	r := in.s.DoAs(t, "", "POST", localInbound, raw, "Content-Type", "message/rfc822", InboundSecretHeader, testSecret)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, 1.0, r.JSON["stored"])
	assert.Equal(t, []string{in.f.bot + "/" + in.reaction + "/ada@sender.example"}, in.f.acts.reactions)
	list := in.messages(t)
	require.Len(t, list, 1)
	assert.Equal(t, in.orders.ID, list[0]["route_id"])
	assert.Equal(t, "Заказ №42 — вопрос", list[0]["subject"])
	action := list[0]["action"].(map[string]any)
	assert.Equal(t, "done", action["status"])
	assert.Equal(t, "sub_of_ada@sender.example", action["subscriber_id"], "the subscriber it runs for")
	assert.NotContains(t, action, "detail")

	// An action with nothing to do (a reaction not published) is skipped, saying why; one
	// that fails is failed, naming no subscriber.
	in.f.acts.mu.Lock()
	in.f.acts.err = &SkipError{Reason: "reaction rct_x has no published version: nothing ran"}
	in.f.acts.mu.Unlock()
	in.f.clock.Advance(1e9)
	r = in.s.DoAs(t, "", "POST", localInbound, mimemailtest.SampleMail("orders+43@example.com", "m2b@sender.example"),
		"Content-Type", "message/rfc822", InboundSecretHeader, testSecret)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	in.f.acts.mu.Lock()
	in.f.acts.err = errors.New("the queue is down")
	in.f.acts.mu.Unlock()
	in.f.clock.Advance(1e9)
	r = in.s.DoAs(t, "", "POST", localInbound, mimemailtest.SampleMail("orders+44@example.com", "m2c@sender.example"),
		"Content-Type", "message/rfc822", InboundSecretHeader, testSecret)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	list = in.messages(t)
	require.Len(t, list, 3)
	failed, skipped := list[0]["action"].(map[string]any), list[1]["action"].(map[string]any)
	assert.Equal(t, map[string]any{"type": "reaction", "status": "skipped", "detail": "reaction rct_x has no published version: nothing ran",
		"at": skipped["at"]}, skipped)
	assert.Equal(t, map[string]any{"type": "reaction", "status": "failed", "detail": "the reaction action failed", "at": failed["at"]}, failed)
}

func TestLocalInboundUnmatchedAndEnvelope(t *testing.T) {
	t.Parallel()
	in := newInbound(t)
	// No route for hello@: stored, flagged, no action.
	r := in.postJSON(t, map[string]any{"raw": b64(mimemailtest.SampleMail("hello@example.com", "m3@sender.example"))})
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, 1.0, r.JSON["stored"])
	list := in.messages(t)
	require.Len(t, list, 1)
	assert.Equal(t, false, list[0]["matched"])
	assert.Nil(t, list[0]["route_id"])
	assert.Nil(t, list[0]["action"])
	assert.Empty(t, in.f.acts.forwards)

	// Envelope recipients win over the headers (a Bcc), and the store route records done.
	in.f.clock.Advance(1e9)
	r = in.postJSON(t, map[string]any{"raw": b64(mimemailtest.SampleMail("someone@elsewhere.example", "m4@sender.example")),
		"recipients": []string{"news@example.com"}})
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, 1.0, r.JSON["stored"])
	list = in.messages(t)
	require.Len(t, list, 2)
	assert.Equal(t, []any{"news@example.com"}, list[0]["recipients"], "newest first")
	assert.Equal(t, "done", list[0]["action"].(map[string]any)["status"])

	// Mail for no verified domain is stored nowhere.
	r = in.postJSON(t, map[string]any{"raw": b64(mimemailtest.SampleMail("x@unclaimed.example", "m5@sender.example"))})
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, map[string]any{"stored": 0.0, "duplicates": 0.0, "dropped": 0.0, "ignored_recipients": 2.0}, r.JSON)
}

func TestLocalInboundRefusals(t *testing.T) {
	t.Parallel()
	in := newInbound(t)
	raw := mimemailtest.SampleMail("support@example.com", "m6@sender.example")
	body := map[string]any{"raw": b64(raw)}

	r := in.s.DoAs(t, "", "POST", localInbound, body)
	assert.Equal(t, http.StatusUnauthorized, r.Code)
	assert.Equal(t, "unauthentic_webhook", r.Problem())
	r = in.s.DoAs(t, "", "POST", localInbound, body, InboundSecretHeader, testSecret+"x")
	assert.Equal(t, http.StatusUnauthorized, r.Code)
	assert.NotContains(t, in.f.logs.String(), testSecret, "the secret presented is not logged")
	r = in.s.DoAs(t, "", "POST", "/esp/mailgun/inbound", body, InboundSecretHeader, testSecret)
	assert.Equal(t, http.StatusNotFound, r.Code)
	r = in.s.DoAs(t, "", "POST", localInbound, raw, "Content-Type", "text/plain", InboundSecretHeader, testSecret)
	assert.Equal(t, http.StatusUnsupportedMediaType, r.Code)
	r = in.postJSON(t, map[string]any{"raw": "%%%"})
	assert.Equal(t, "validation_failed", r.Problem())
	r = in.postJSON(t, map[string]any{"raw": b64(raw), "envelope": "x"})
	assert.Equal(t, "unknown_field", r.Problem())
	r = in.postJSON(t, map[string]any{"raw": b64([]byte("no header at all"))})
	assert.Equal(t, http.StatusUnprocessableEntity, r.Code)
	assert.Equal(t, "invalid_message", r.Problem())

	// Over the limit: refused before anything is parsed, in both forms.
	big := append(append([]byte{}, raw...), strings.Repeat("x", MaxRawBytes)...)
	r = in.s.DoAs(t, "", "POST", localInbound, big, "Content-Type", "message/rfc822", InboundSecretHeader, testSecret)
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.Code)
	assert.Equal(t, "message_too_large", r.Problem())
	r = in.postJSON(t, map[string]any{"raw": b64(big)})
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.Code)
	assert.Equal(t, "message_too_large", r.Problem())
	// Exactly at the limit is taken.
	atLimit := append(append([]byte{}, raw[:len(raw)-len("--outer--\r\n")]...), "--outer--\r\n"...)
	atLimit = append(atLimit, strings.Repeat("y", MaxRawBytes-len(atLimit))...)
	require.Len(t, atLimit, MaxRawBytes)
	r = in.postJSON(t, map[string]any{"raw": b64(atLimit)})
	assert.Equal(t, http.StatusOK, r.Code, r.Problem())
	assert.Empty(t, in.f.acts.forwards[1:], "only the message at the limit was forwarded")

	// Without a configured secret nothing is taken, whatever is presented.
	_, open := newServer(t, func(c *Config) { c.InboundSecret = "" })
	r = open.DoAs(t, "", "POST", localInbound, body, InboundSecretHeader, "")
	assert.Equal(t, http.StatusForbidden, r.Code)
	assert.Equal(t, "inbound_not_configured", r.Problem())
	r = open.DoAs(t, "", "POST", "/esp/ses/inbound", "{}")
	assert.Equal(t, "inbound_not_configured", r.Problem())
}

func TestInboundActionOutcomes(t *testing.T) {
	t.Parallel()
	in := newInbound(t)
	in.f.acts.err = assert.AnError
	r := in.postJSON(t, map[string]any{"raw": b64(mimemailtest.SampleMail("support@example.com", "m7@sender.example"))})
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, 1.0, r.JSON["stored"], "a failed action does not fail the delivery")
	list := in.messages(t)
	require.Len(t, list, 1)
	assert.Equal(t, map[string]any{"type": "forward", "status": "failed", "detail": "the forward action failed", "at": "2026-03-01T12:00:00Z"}, list[0]["action"])
	assert.NotContains(t, list[0]["action"].(map[string]any)["detail"], assert.AnError.Error(), "internal causes are only logged")
	assert.Contains(t, in.f.logs.String(), "inbound route action failed")

	// A forward to a domain that receives through the platform could loop: skipped.
	in.f.acts.err = nil
	in.f.verified(t, ids.At("bot", t0), "example.net")
	in.f.clock.Advance(1e9)
	r = in.postJSON(t, map[string]any{"raw": b64(mimemailtest.SampleMail("support@example.com", "m7b@sender.example"))})
	require.Equal(t, 1.0, r.JSON["stored"], r.Body)
	list = in.messages(t)
	require.Len(t, list, 2)
	assert.Equal(t, "skipped", list[0]["action"].(map[string]any)["status"])
	assert.Contains(t, list[0]["action"].(map[string]any)["detail"], "could loop")
	assert.Len(t, in.f.acts.forwards, 1)

	// Without Actions, forward and reaction are skipped.
	noActs := newInbound(t, func(c *Config) { c.Actions = nil })
	r = noActs.postJSON(t, map[string]any{"raw": b64(mimemailtest.SampleMail("orders+1@example.com", "m8@sender.example"))})
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	list = noActs.messages(t)
	require.Len(t, list, 1)
	assert.Equal(t, "skipped", list[0]["action"].(map[string]any)["status"])
}

func TestInboundDailyLimit(t *testing.T) {
	t.Parallel()
	in := newInbound(t, func(c *Config) { c.MaxInboundPerDay = 2 })
	for i, want := range []string{"stored", "stored", "dropped"} {
		r := in.postJSON(t, map[string]any{"raw": b64(mimemailtest.SampleMail("news@example.com", "d"+string(rune('a'+i))+"@sender.example"))})
		require.Equal(t, http.StatusOK, r.Code, r.Body)
		assert.Equal(t, 1.0, r.JSON[want], i)
	}
	assert.Len(t, in.messages(t), 2)
	// A new day, new room.
	in.f.clock.Advance(24 * 3600e9)
	r := in.postJSON(t, map[string]any{"raw": b64(mimemailtest.SampleMail("news@example.com", "next-day@sender.example"))})
	assert.Equal(t, 1.0, r.JSON["stored"])
}

// sesReceipt is an SES receipt notification (SNS action, BASE64 encoding) for raw.
func sesReceipt(t *testing.T, id string, recipients []string, spam, virus, dmarc string, raw []byte) string {
	t.Helper()
	return receiptOf(t, id, recipients, spam, virus, dmarc,
		map[string]string{"type": "SNS", "topicArn": testTopic, "encoding": "BASE64"}, b64(raw))
}

// receiptOf is an SES receipt notification with its verdicts, its action and, for an SNS
// action, the message's content ("" for none).
func receiptOf(t *testing.T, id string, recipients []string, spam, virus, dmarc string, action map[string]string, content string) string {
	t.Helper()
	n := map[string]any{
		"notificationType": "Received",
		"mail":             map[string]any{"messageId": id, "source": "ada@sender.example", "destination": recipients},
		"receipt": map[string]any{
			"recipients":   recipients,
			"spamVerdict":  map[string]string{"status": spam},
			"virusVerdict": map[string]string{"status": virus},
			"spfVerdict":   map[string]string{"status": "PASS"},
			"dkimVerdict":  map[string]string{"status": "PASS"},
			"dmarcVerdict": map[string]string{"status": dmarc},
			"action":       action,
		},
	}
	if content != "" {
		n["content"] = content
	}
	b, err := json.Marshal(n)
	require.NoError(t, err)
	return string(b)
}

func TestSESInbound(t *testing.T) {
	t.Parallel()
	fake := snstest.NewServer(t, t0)
	in := newInbound(t, func(c *Config) { c.SNS = snsVerifier(fake, testTopic) })
	post := func(body []byte) httpapitest.Reply {
		return in.s.DoAs(t, "", "POST", "/esp/ses/inbound", body, "Content-Type", "text/plain; charset=UTF-8", "X-Amz-Sns-Message-Type", "Notification")
	}

	r := post(fake.Sign(t, snstest.SubscriptionConfirmation(testTopic, fake.ConfirmURL("t"), "t"), "1"))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, true, r.JSON["confirmed"])
	assert.Equal(t, []string{"t"}, fake.Confirmed())

	raw := mimemailtest.SampleMail("someone@elsewhere.example", "ses1@sender.example")
	note := fake.Sign(t, receipt("sns-1", sesReceipt(t, "ses-msg-1", []string{"support@example.com"}, "PASS", "PASS", "PASS", raw)), "2")
	r = post(note)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, 1.0, r.JSON["stored"])
	list := in.messages(t)
	require.Len(t, list, 1)
	assert.Equal(t, "ses", list[0]["provider"])
	assert.Equal(t, "ses-msg-1", list[0]["provider_message_id"])
	assert.Equal(t, []any{"support@example.com"}, list[0]["recipients"], "SES's recipients, not the To header")
	assert.Equal(t, map[string]any{"spam": "PASS", "virus": "PASS", "spf": "PASS", "dkim": "PASS", "dmarc": "PASS"}, list[0]["verdicts"])
	assert.Len(t, in.f.acts.forwards, 1)

	r = post(note)
	assert.Equal(t, 1.0, r.JSON["duplicates"], "SNS redelivers the same notification")

	tampered := strings.Replace(string(note), "ses-msg-1", "ses-msg-2", 1)
	r = post([]byte(tampered))
	assert.Equal(t, http.StatusUnauthorized, r.Code)
	assert.Equal(t, "unauthentic_webhook", r.Problem())

	// Spam is stored but not acted on; a reaction does not run for a sender failing DMARC;
	// a virus is dropped.
	r = post(fake.Sign(t, receipt("sns-2", sesReceipt(t, "ses-msg-2", []string{"support@example.com"}, "FAIL", "PASS", "PASS", raw)), "2"))
	assert.Equal(t, 1.0, r.JSON["stored"])
	r = post(fake.Sign(t, receipt("sns-3", sesReceipt(t, "ses-msg-3", []string{"orders+9@example.com"}, "PASS", "PASS", "FAIL", raw)), "2"))
	assert.Equal(t, 1.0, r.JSON["stored"])
	r = post(fake.Sign(t, receipt("sns-4", sesReceipt(t, "ses-msg-4", []string{"support@example.com"}, "PASS", "FAIL", "PASS", raw)), "2"))
	assert.Equal(t, 1.0, r.JSON["dropped"])
	assert.Len(t, in.f.acts.forwards, 1)
	assert.Empty(t, in.f.acts.reactions)
	list = in.messages(t)
	require.Len(t, list, 3)
	details := map[string]string{}
	for _, m := range list {
		a := m["action"].(map[string]any)
		detail, _ := a["detail"].(string)
		details[m["provider_message_id"].(string)] = a["status"].(string) + ": " + detail
	}
	assert.Contains(t, details["ses-msg-2"], "skipped: the provider judged the message to be spam")
	assert.Contains(t, details["ses-msg-3"], "skipped: the sender's address failed DMARC")

	// A notification that is no receipt, or one without content, stores nothing.
	r = post(fake.Sign(t, receipt("sns-5", `{"notificationType":"Bounce"}`), "2"))
	assert.Equal(t, http.StatusOK, r.Code)
	assert.Equal(t, 0.0, r.JSON["stored"])
	require.Len(t, in.messages(t), 3)
	assert.Equal(t, 1, fake.Fetches(), "the certificate is fetched once")
}

func TestSESInboundRefusals(t *testing.T) {
	t.Parallel()
	fake := snstest.NewServer(t, t0)
	in := newInbound(t, func(c *Config) { c.SNS = snsVerifier(fake, testTopic) })
	post := func(s *httpapitest.Server, body []byte) httpapitest.Reply {
		return s.DoAs(t, "", "POST", "/esp/ses/inbound", body, "Content-Type", "text/plain; charset=UTF-8")
	}
	raw := mimemailtest.SampleMail("someone@elsewhere.example", "ses1@sender.example")
	mail := sesReceipt(t, "ses-msg-1", []string{"support@example.com"}, "PASS", "PASS", "PASS", raw)

	// A topic not accepted, a certificate from elsewhere, a forged body: 401, nothing fetched.
	other := snstest.Notification("arn:aws:sns:eu-west-1:999999999999:attacker", mail)
	foreign := receipt("sns-1", mail)
	foreign["SigningCertURL"] = "https://sns.eu-west-1.amazonaws.com.evil.example/SimpleNotificationService-test.pem"
	for name, body := range map[string][]byte{
		"another topic":   fake.Sign(t, other, "2"),
		"a foreign cert":  fake.Sign(t, foreign, "2"),
		"not SNS":         []byte(`{"Type":"Notification"}`),
		"an unknown type": fake.Sign(t, map[string]string{"Type": "Surprise", "MessageId": "1", "TopicArn": testTopic, "Timestamp": "t"}, "2"),
	} {
		r := post(in.s, body)
		assert.Equal(t, http.StatusUnauthorized, r.Code, name)
		assert.Equal(t, "unauthentic_webhook", r.Problem(), name)
	}
	assert.Equal(t, 0, fake.Fetches())

	// A confirmation elsewhere than SNS: 401; one SNS refuses: 503, SNS sends it again.
	r := post(in.s, fake.Sign(t, snstest.SubscriptionConfirmation(testTopic, "https://localhost/confirm?Token=t", "t"), "2"))
	assert.Equal(t, http.StatusUnauthorized, r.Code)
	r = post(in.s, fake.Sign(t, snstest.SubscriptionConfirmation(testTopic, fake.URL()+"/refuse", "t"), "2"))
	assert.Equal(t, http.StatusServiceUnavailable, r.Code)
	assert.Equal(t, "provider_unavailable", r.Problem())
	assert.Empty(t, fake.Confirmed())

	// An empty topic list fails closed: even a good message is refused, as not configured.
	_, closed := newServer(t, func(c *Config) { c.SNS = snsVerifier(fake) })
	r = post(closed, fake.Sign(t, receipt("sns-2", mail), "2"))
	assert.Equal(t, http.StatusForbidden, r.Code)
	assert.Equal(t, "inbound_not_configured", r.Problem())

	// A certificate that cannot be fetched right now: 503, so that SNS delivers again.
	gone := snstest.NewServer(t, t0)
	_, unreachable := newServer(t, func(c *Config) { c.SNS = snsVerifier(gone, testTopic) })
	body := gone.Sign(t, receipt("sns-3", mail), "2")
	gone.Close()
	r = post(unreachable, body)
	assert.Equal(t, http.StatusServiceUnavailable, r.Code)
	assert.Equal(t, "provider_unavailable", r.Problem())
	assert.Empty(t, in.messages(t), "nothing was stored")
}

func TestFitBoundsBodies(t *testing.T) {
	t.Parallel()
	m := InboundMessage{MessageSummary: MessageSummary{ID: "eim_x"}, Text: strings.Repeat("т", MaxTextBytes), HTML: strings.Repeat("\x01", 100<<10)}
	b, m, err := fit(m)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), 390<<10-itemSlack)
	assert.True(t, m.TextTruncated, "cut to MaxTextBytes")
	assert.Equal(t, MaxTextBytes, len(m.Text))
	assert.True(t, m.HTMLTruncated, "control characters take six bytes each in JSON: cut further")
	assert.Less(t, len(m.HTML), 100<<10)
}

// Mail to a deleted domain whose claim is still being released (its name deregistered from
// the provider) is stored nowhere: the claim routes nothing.
func TestInboundIgnoresAReleasingClaim(t *testing.T) {
	t.Parallel()
	in := newInbound(t)
	f := in.f
	ctx := t.Context()
	routes, _, err := f.svc.ListRoutes(ctx, f.bot, 100, "")
	require.NoError(t, err)
	for _, r := range routes {
		require.NoError(t, f.svc.DeleteRoute(ctx, f.bot, r.ID, nil))
	}
	require.NoError(t, f.svc.Delete(ctx, f.bot, in.domain.ID, nil))
	c, _, ok, err := f.svc.readClaim(ctx, "example.com")
	require.NoError(t, err)
	require.True(t, ok && c.Releasing, "the claim is being released")

	r := in.postJSON(t, map[string]any{"raw": b64(mimemailtest.SampleMail("news@example.com", "m9@sender.example"))})
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, map[string]any{"stored": 0.0, "duplicates": 0.0, "dropped": 0.0, "ignored_recipients": 2.0}, r.JSON)
	assert.Empty(t, in.messages(t))
}
