package emailevents

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/sns"
	"github.com/botplatform/api/shared/sns/snstest"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// sesEventJSON is an SES event as event publishing writes it, for message id.
func sesEventJSON(t *testing.T, eventType, messageID string, detail map[string]any) string {
	t.Helper()
	e := map[string]any{
		"eventType": eventType,
		"mail": map[string]any{"timestamp": "2026-03-01T11:59:50.000Z", "source": "news@shop.example",
			"messageId": messageID, "destination": []string{"ada@example.com"}},
	}
	for k, v := range detail {
		e[k] = v
	}
	b, err := json.Marshal(e)
	require.NoError(t, err)
	return string(b)
}

func bounce(kind, address string) map[string]any {
	return map[string]any{"bounce": map[string]any{"bounceType": kind, "bounceSubType": "General",
		"bouncedRecipients": []map[string]any{{"emailAddress": address, "action": "failed", "status": "5.1.1"}},
		"timestamp":         "2026-03-01T11:59:57.000Z", "feedbackId": "0100-fb"}}
}

func complaint(address, feedback string) map[string]any {
	c := map[string]any{"complainedRecipients": []map[string]any{{"emailAddress": address}},
		"timestamp": "2026-03-01T11:59:57.000Z", "feedbackId": "0100-fb"}
	if feedback != "" {
		c["complaintFeedbackType"] = feedback
	}
	return map[string]any{"complaint": c}
}

// topic is the SNS topic of the SES events the tests' verifier accepts.
const topic = "arn:aws:sns:eu-west-1:123456789012:email-events"

// snsConfig is a configuration whose verifier trusts fake, as a deployment trusts AWS, and
// accepts topics.
func snsConfig(fake *snstest.Server, topics ...string) Config {
	return Config{SNS: sns.New(sns.Config{Topics: topics, HostPattern: snstest.HostPattern, Client: fake.Client(),
		Now: func() time.Time { return t0 }})}
}

// notification is an SNS notification of topic carrying message.
func notification(message string) map[string]string { return snstest.Notification(topic, message) }

func (s *server) postSNS(t *testing.T, body []byte) httpapitest.Reply {
	t.Helper()
	// SNS posts its JSON as text/plain.
	return s.DoAs(t, "", "POST", "/esp/ses/webhook", body, "Content-Type", "text/plain; charset=UTF-8",
		"X-Amz-Sns-Message-Type", "Notification")
}

func TestSESWebhook(t *testing.T) {
	t.Parallel()
	fake := snstest.NewServer(t, t0)
	s := newServer(t, snsConfig(fake, topic))
	at := time.Date(2026, 3, 1, 11, 59, 57, 0, time.UTC)
	post := func(message string) httpapitest.Reply {
		t.Helper()
		return s.postSNS(t, fake.Sign(t, notification(message), "1"))
	}
	bo := emaillinks.Ref{Bot: s.bot, Campaign: "ecmp_1", Recipient: "rcp_bo"}

	r := post(sesEventJSON(t, "Delivery", "ses-1", map[string]any{"delivery": map[string]any{"timestamp": "2026-03-01T11:59:57.000Z", "recipients": []string{"ada@example.com"}}}))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, true, r.JSON["ok"])

	r = post(sesEventJSON(t, "Bounce", "ses-2", bounce("Transient", "bo@example.com")))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Nil(t, s.suppression(t, "bo@example.com"), "a transient bounce is not suppressed")

	// The forwarding target's address bounced: the address sent to is what is suppressed.
	r = post(sesEventJSON(t, "Bounce", "ses-1", bounce("Permanent", "ada@forward.example")))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	sup := s.suppression(t, "ada@example.com")
	require.NotNil(t, sup)
	assert.Equal(t, ReasonBounced, sup.Reason)

	r = post(sesEventJSON(t, "Complaint", "ses-2", complaint("bo@example.com", "abuse")))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	require.NotNil(t, s.suppression(t, "bo@example.com"))
	assert.Equal(t, ReasonComplained, s.suppression(t, "bo@example.com").Reason)

	assert.Equal(t, []recorded{
		{s.ref, Event{Type: EventDelivered, At: at}},
		{bo, Event{Type: EventBounce, At: at, Address: "bo@example.com"}},
		{s.ref, Event{Type: EventBounce, Permanent: true, At: at, Address: "ada@forward.example"}},
		{bo, Event{Type: EventComplaint, At: at, Address: "bo@example.com"}},
	}, s.camps.all())

	// Acknowledged and dropped: a "not spam" report, SES's own opens, sends, a message no
	// campaign sent, the older notification format's delivery of an unknown message.
	for _, msg := range []string{
		sesEventJSON(t, "Complaint", "ses-1", complaint("ada@example.com", "not-spam")),
		sesEventJSON(t, "Open", "ses-1", map[string]any{"open": map[string]any{"timestamp": "2026-03-01T11:59:57.000Z"}}),
		sesEventJSON(t, "Send", "ses-1", nil),
		sesEventJSON(t, "Bounce", "ses-unknown", bounce("Permanent", "x@example.com")),
		`{"notificationType":"Delivery","mail":{"messageId":"ses-unknown"},"delivery":{}}`,
	} {
		r := post(msg)
		assert.Equal(t, http.StatusOK, r.Code, msg)
	}
	assert.Len(t, s.camps.all(), 4)
	assert.Nil(t, s.suppression(t, "x@example.com"))

	// The older identity notification format is read too.
	r = post(`{"notificationType":"Bounce","mail":{"messageId":"ses-2"},"bounce":{"bounceType":"Permanent","bouncedRecipients":[{"emailAddress":"bo@example.com"}]}}`)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	require.Len(t, s.camps.all(), 5)
	assert.Equal(t, Event{Type: EventBounce, Permanent: true, At: t0, Address: "bo@example.com"}, s.camps.all()[4].Ev, "no bounce time: ours")

	// Tampered, signed by another key, or with a foreign certificate: 401, nothing done.
	body := fake.Sign(t, notification(sesEventJSON(t, "Complaint", "ses-1", complaint("ada@example.com", "abuse"))), "2")
	tampered := strings.Replace(string(body), "ses-1", "ses-2", 1)
	require.NotEqual(t, string(body), tampered)
	r = s.postSNS(t, []byte(tampered))
	assert.Equal(t, http.StatusUnauthorized, r.Code)
	assert.Equal(t, "unauthentic_webhook", r.Problem())
	foreign := notification(sesEventJSON(t, "Complaint", "ses-1", complaint("ada@example.com", "abuse")))
	foreign["SigningCertURL"] = "https://sns.eu-west-1.amazonaws.com.evil.example/SimpleNotificationService-test.pem"
	r = s.postSNS(t, fake.Sign(t, foreign, "2"))
	assert.Equal(t, http.StatusUnauthorized, r.Code)
	assert.Len(t, s.camps.all(), 5)
	assert.Equal(t, ReasonBounced, s.suppression(t, "ada@example.com").Reason, "no complaint got through")
	assert.Contains(t, s.logs.String(), "email webhook delivery failed verification")

	// Malformed: 400.
	for _, bad := range [][]byte{[]byte("not json"), []byte(`{"Type":"Notification"}`), fake.Sign(t, notification("not json"), "2"), fake.Sign(t, notification(`{"mail":{}}`), "2")} {
		r = s.postSNS(t, bad)
		assert.Equal(t, http.StatusBadRequest, r.Code, string(bad))
		assert.Equal(t, "invalid_body", r.Problem())
	}

	// A failure of campaigns is a 500: SNS delivers again.
	s.camps.fail(errBoom)
	r = post(sesEventJSON(t, "Delivery", "ses-1", map[string]any{"delivery": map[string]any{}}))
	assert.Equal(t, http.StatusInternalServerError, r.Code)

	assert.Equal(t, http.StatusNotFound, s.DoAs(t, "", "POST", "/esp/sendgrid/webhook", []byte("{}")).Code)
	assert.NotContains(t, s.logs.String(), "example.com", "no address is logged")
}

func TestSNSSubscriptionConfirmation(t *testing.T) {
	t.Parallel()
	fake := snstest.NewServer(t, t0)
	s := newServer(t, snsConfig(fake, topic))
	conf := snstest.SubscriptionConfirmation

	r := s.postSNS(t, fake.Sign(t, conf(topic, fake.ConfirmURL("tok-1"), "tok-1"), "1"))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, []string{"tok-1"}, fake.Confirmed(), "confirmed by fetching the SubscribeURL")

	// Signed, but confirming elsewhere than SNS, or for a topic not configured: refused.
	_, port, _ := strings.Cut(strings.TrimPrefix(fake.URL(), "https://"), ":")
	r = s.postSNS(t, fake.Sign(t, conf(topic, "https://localhost:"+port+"/confirm?Token=tok-1", "tok-1"), "2"))
	assert.Equal(t, http.StatusUnauthorized, r.Code)
	r = s.postSNS(t, fake.Sign(t, conf("arn:aws:sns:eu-west-1:999999999999:theirs", fake.ConfirmURL("tok-1"), "tok-1"), "2"))
	assert.Equal(t, http.StatusUnauthorized, r.Code)
	r = s.postSNS(t, fake.Sign(t, func() map[string]string {
		m := notification(sesEventJSON(t, "Complaint", "ses-1", complaint("ada@example.com", "abuse")))
		m["TopicArn"] = "arn:aws:sns:eu-west-1:999999999999:theirs"
		return m
	}(), "2"))
	assert.Equal(t, http.StatusUnauthorized, r.Code, "a notification of another topic")
	assert.Equal(t, []string{"tok-1"}, fake.Confirmed())
	assert.Empty(t, s.camps.all())

	// A confirmation SNS's side refuses is a 503: SNS sends it again.
	r = s.postSNS(t, fake.Sign(t, conf(topic, fake.URL()+"/refuse", "tok-1"), "2"))
	assert.Equal(t, http.StatusServiceUnavailable, r.Code)

	unsub := conf(topic, fake.ConfirmURL("tok-1"), "tok-1")
	unsub["Type"] = sns.TypeUnsubscribeConfirmation
	r = s.postSNS(t, fake.Sign(t, unsub, "2"))
	assert.Equal(t, http.StatusOK, r.Code)
	assert.Equal(t, []string{"tok-1"}, fake.Confirmed(), "an unsubscribe confirmation is not confirmed")
}

// Without a topic list, SES deliveries fail closed: a message AWS signed for any topic is
// refused (401, logged as an error), and nothing is fetched or recorded.
func TestSESWebhookWithoutTopics(t *testing.T) {
	t.Parallel()
	fake := snstest.NewServer(t, t0)
	message := sesEventJSON(t, "Bounce", "ses-1", bounce("Permanent", "ada@example.com"))
	for name, cfg := range map[string]Config{"no verifier": {}, "no topics": snsConfig(fake)} {
		s := newServer(t, cfg)
		r := s.postSNS(t, fake.Sign(t, notification(message), "2"))
		assert.Equal(t, http.StatusUnauthorized, r.Code, name)
		assert.Equal(t, "unauthentic_webhook", r.Problem(), name)
		r = s.postSNS(t, fake.Sign(t, snstest.SubscriptionConfirmation(topic, fake.ConfirmURL("tok-1"), "tok-1"), "2"))
		assert.Equal(t, http.StatusUnauthorized, r.Code, name)
		assert.Empty(t, s.camps.all(), name)
		assert.Nil(t, s.suppression(t, "ada@example.com"), name)
		assert.Contains(t, s.logs.String(), "level=ERROR", name)
	}
	assert.Equal(t, 0, fake.Fetches())
	assert.Empty(t, fake.Confirmed())
}

// A certificate that cannot be fetched right now is a 503: SNS delivers again.
func TestSESWebhookCertificateUnavailable(t *testing.T) {
	t.Parallel()
	fake := snstest.NewServer(t, t0)
	s := newServer(t, snsConfig(fake, topic))
	body := fake.Sign(t, notification(sesEventJSON(t, "Bounce", "ses-1", bounce("Permanent", "ada@example.com"))), "2")
	fake.Close()
	r := s.postSNS(t, body)
	assert.Equal(t, http.StatusServiceUnavailable, r.Code)
	assert.Equal(t, "temporarily_unavailable", r.Problem())
	assert.Empty(t, s.camps.all())
}

const mailgunKey = "key-0123456789abcdef"

// mailgunBody is a Mailgun webhook delivery signed with key at ts.
func mailgunBody(t *testing.T, key string, ts time.Time, token string, event map[string]any) []byte {
	t.Helper()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(stamp + token))
	b, err := json.Marshal(map[string]any{
		"signature":  map[string]any{"timestamp": stamp, "token": token, "signature": hex.EncodeToString(mac.Sum(nil))},
		"event-data": event,
	})
	require.NoError(t, err)
	return b
}

func mailgunEventData(event, messageID string, extra map[string]any) map[string]any {
	e := map[string]any{"event": event, "timestamp": 1772366395.5, "id": "CPgfbmQMTCKtHW6uIWtuVe",
		"recipient": "ada@example.com", "message": map[string]any{"headers": map[string]any{"message-id": messageID}}}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

func TestMailgunWebhook(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{MailgunSigningKey: mailgunKey})
	post := func(body []byte) httpapitest.Reply {
		t.Helper()
		return s.DoAs(t, "", "POST", "/esp/mailgun/webhook", body, "Content-Type", "application/json")
	}
	at := time.Unix(1772366395, 0).UTC()

	r := post(mailgunBody(t, mailgunKey, t0, "tok1", mailgunEventData("delivered", "mg-1@mg.example", nil)))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	require.Equal(t, []recorded{{s.ref, Event{Type: EventDelivered, At: at}}}, s.camps.all())

	r = post(mailgunBody(t, mailgunKey, t0, "tok2", mailgunEventData("failed", "mg-1@mg.example", map[string]any{"severity": "temporary"})))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Nil(t, s.suppression(t, "ada@example.com"))
	r = post(mailgunBody(t, mailgunKey, t0.Add(-4*time.Minute), "tok3", mailgunEventData("failed", "mg-1@mg.example", map[string]any{"severity": "permanent"})))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	require.NotNil(t, s.suppression(t, "ada@example.com"))
	assert.Equal(t, ReasonBounced, s.suppression(t, "ada@example.com").Reason)
	r = post(mailgunBody(t, mailgunKey, t0, "tok4", mailgunEventData("complained", "mg-1@mg.example", nil)))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	sup := s.suppression(t, "ada@example.com")
	assert.Equal(t, ReasonComplained, sup.Reason, "a complaint upgrades the bounce")
	assert.Len(t, sup.History, 2)
	r = post(mailgunBody(t, mailgunKey, t0, "tok5", mailgunEventData("opened", "mg-1@mg.example", nil)))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	r = post(mailgunBody(t, mailgunKey, t0, "tok6", mailgunEventData("delivered", "unknown@mg.example", nil)))
	require.Equal(t, http.StatusOK, r.Code, "a message no campaign sent is acknowledged")
	assert.Equal(t, []recorded{
		{s.ref, Event{Type: EventDelivered, At: at}},
		{s.ref, Event{Type: EventBounce, At: at, Address: "ada@example.com"}},
		{s.ref, Event{Type: EventBounce, Permanent: true, At: at, Address: "ada@example.com"}},
		{s.ref, Event{Type: EventComplaint, At: at, Address: "ada@example.com"}},
	}, s.camps.all())

	refused := map[string][]byte{
		"replayed token":    mailgunBody(t, mailgunKey, t0, "tok1", mailgunEventData("complained", "mg-1@mg.example", nil)),
		"wrong key":         mailgunBody(t, "key-other", t0, "tok7", mailgunEventData("delivered", "mg-1@mg.example", nil)),
		"old timestamp":     mailgunBody(t, mailgunKey, t0.Add(-6*time.Minute), "tok8", mailgunEventData("delivered", "mg-1@mg.example", nil)),
		"future timestamp":  mailgunBody(t, mailgunKey, t0.Add(6*time.Minute), "tok9", mailgunEventData("delivered", "mg-1@mg.example", nil)),
		"no signature":      []byte(`{"event-data":{"event":"delivered"}}`),
		"token with a '#'":  mailgunBody(t, mailgunKey, t0, "tok#1", mailgunEventData("delivered", "mg-1@mg.example", nil)),
		"signature not hex": []byte(`{"signature":{"timestamp":"1772366400","token":"tokz","signature":"zz"},"event-data":{"event":"delivered"}}`),
	}
	// A body changed after signing passes the signature (Mailgun signs only the timestamp and
	// token), which is why the token may be used once and only for five minutes.
	for name, body := range refused {
		r := post(body)
		assert.Equal(t, http.StatusUnauthorized, r.Code, name)
		assert.Equal(t, "unauthentic_webhook", r.Problem(), name)
	}
	assert.Len(t, s.camps.all(), 4)

	r = post([]byte(`not json`))
	assert.Equal(t, http.StatusBadRequest, r.Code)

	// A failure is a 500, and the token is released: the retry passes.
	s.camps.fail(errBoom)
	body := mailgunBody(t, mailgunKey, t0, "tok10", mailgunEventData("delivered", "mg-1@mg.example", nil))
	assert.Equal(t, http.StatusInternalServerError, post(body).Code)
	s.camps.fail(nil)
	assert.Equal(t, http.StatusOK, post(body).Code)
	assert.Equal(t, http.StatusUnauthorized, post(body).Code, "once it succeeded, a replay")

	// The markers expire once their timestamp would be refused anyway.
	s.clock.Advance(MailgunMaxAge + 2*time.Minute)
	_, err := s.raw.Get(sqlitetest.Unrecorded(t.Context()), tokenKey("tok1"))
	assert.Error(t, err, "expired")
}

func TestMailgunWithoutKey(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	r := s.DoAs(t, "", "POST", "/esp/mailgun/webhook", mailgunBody(t, "", t0, "tok1", mailgunEventData("delivered", "mg-1@mg.example", nil)))
	assert.Equal(t, http.StatusUnauthorized, r.Code, "an empty key signs nothing")
	assert.Contains(t, s.logs.String(), "level=ERROR")
	assert.Empty(t, s.camps.all())
}

// FuzzWebhook feeds arbitrary bodies to both providers' handling and to the SES event
// reader behind the SNS signature: nothing panics, and nothing a sender controls becomes a
// 5xx.
func FuzzWebhook(f *testing.F) {
	f.Add([]byte(`{"Type":"Notification","Message":"{}","MessageId":"1","Timestamp":"t","TopicArn":"a","SignatureVersion":"2","Signature":"AA==","SigningCertURL":"https://sns.x.amazonaws.com/a.pem"}`))
	f.Add([]byte(`{"eventType":"Bounce","mail":{"messageId":"ses-1"},"bounce":{"bounceType":"Permanent","bouncedRecipients":[{"emailAddress":"a@b"}]}}`))
	f.Add([]byte(`{"eventType":"Complaint","mail":{"messageId":"ses-2"},"complaint":{"complainedRecipients":[]}}`))
	f.Add([]byte(`{"signature":{"timestamp":"1","token":"t","signature":"00"},"event-data":{"event":"failed","timestamp":1e300}}`))
	// The seed's topic is accepted; the host pattern matches no host, so nothing is fetched.
	fx := newFixture(f, Config{MailgunSigningKey: mailgunKey,
		SNS: sns.New(sns.Config{Topics: []string{"a"}, HostPattern: regexp.MustCompile(`^$`)})})
	ctx := sqlitetest.Unrecorded(context.Background())
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, err := range []error{fx.svc.SNSDelivery(ctx, body), fx.svc.MailgunDelivery(ctx, body), func() error {
			var e sesEvent
			if json.Unmarshal(body, &e) != nil {
				return nil
			}
			return fx.svc.sesEvent(ctx, e)
		}()} {
			if err != nil {
				assert.Less(t, httpapitest.AsError(t, err).Status(), 500, "%v", err)
			}
		}
	})
}
