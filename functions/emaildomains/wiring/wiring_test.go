package wiring

import (
	"bytes"
	"encoding/json"
	"net/mail"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/emaildomains"
	"github.com/botplatform/api/functions/reactions"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

type reactionSetup struct {
	env  *family.Env
	q    *queuetest.Sender
	acts *actions
	subs *subscribers.Service
	bot  string
	rct  string
}

func newReactionSetup(t *testing.T) *reactionSetup {
	t.Helper()
	q := &queuetest.Sender{}
	env := familytest.Env(t, family.Deps{Queue: q})
	rx := reactions.NewService(env.Store, reactionswiring.Vocabulary(env), env.Now, env.Log)
	bot := ids.New("bot")
	var c reactions.Content
	require.NoError(t, json.Unmarshal([]byte(`{"name":"Mail","trigger":{"type":"keyword","keywords":["mail"]},"steps":[{"id":"e","type":"end"}]}`), &c))
	setup := sqlitetest.Unrecorded(t.Context()) // the reactions Lambda's work
	r, err := rx.Create(setup, bot, c)
	require.NoError(t, err)
	_, err = rx.Publish(setup, bot, r.ID, 1)
	require.NoError(t, err)
	return &reactionSetup{env: env, q: q, acts: newActions(env), subs: subscribers.NewService(env.Store, env.Now, nil), bot: bot, rct: r.ID}
}

// run runs the reaction action for a message from addr and returns the runtime message it
// sent (the outbox delivers at once with a queue).
func (s *reactionSetup) run(t *testing.T, addr, messageID string) (string, queue.Message) {
	t.Helper()
	sub, err := s.acts.RunReaction(t.Context(), s.bot, s.rct, mail.Address{Name: "Ann", Address: addr},
		emaildomains.InboundMessage{MessageSummary: emaildomains.MessageSummary{ID: messageID}})
	require.NoError(t, err)
	sent := s.q.Take()
	require.Len(t, sent, 1)
	return sub, sent[0]
}

func body(t *testing.T, m queue.Message) map[string]any {
	t.Helper()
	var b map[string]any
	require.NoError(t, json.Unmarshal(m.Body, &b))
	return b
}

// The reaction runs for the bot's subscriber with the sender's address in its email field,
// whatever the address's letter case: the runtime's message names it, the reaction and the
// inbound message as cause, with the subscriber's own channel type.
func TestReactionForAKnownSender(t *testing.T) {
	t.Parallel()
	s := newReactionSetup(t)
	ctx := sqlitetest.Unrecorded(t.Context()) // the subscribers Lambda's work
	_, err := s.subs.CreateField(ctx, s.bot, subscribers.FieldSpec{Name: "email", Type: subscribers.TypeString})
	require.NoError(t, err)
	ann, _, err := s.subs.Upsert(ctx, s.bot, subscribers.ChannelTelegram, "42", subscribers.Changes{Fields: map[string]any{"email": "ann@example.org"}})
	require.NoError(t, err)

	sub, m := s.run(t, "Ann@Example.ORG", "eim_1")
	assert.Equal(t, ann.ID, sub)
	assert.Equal(t, runtime.TriggerMessage, m.Type)
	want, err := runtime.RunReactionMessage(s.bot, ann.ID, "telegram", s.rct, runtime.TriggerInboundEmail, "eim_1")
	require.NoError(t, err)
	assert.JSONEq(t, string(want.Body), string(m.Body))
	b := body(t, m)
	assert.Equal(t, "inbound_email:eim_1", b["cause"])
	assert.NotContains(t, string(m.Body), "ann@example.org", "the message names the subscriber, not the address")

	list, _, err := s.subs.List(ctx, s.bot, subscribers.Filter{}, 10, "")
	require.NoError(t, err)
	assert.Len(t, list, 1, "no subscriber created")
}

// An unknown sender becomes a subscriber of the email channel type, known by the address
// (lower case), with it in the email field when the bot has one; the next message of the
// same sender finds that subscriber, by the field or, without it, by the identity.
func TestReactionCreatesTheSender(t *testing.T) {
	t.Parallel()
	ctx := sqlitetest.Unrecorded(t.Context()) // reads for the checks, and the setup
	for _, withField := range []bool{true, false} {
		s := newReactionSetup(t)
		if withField {
			_, err := s.subs.CreateField(ctx, s.bot, subscribers.FieldSpec{Name: "email", Type: subscribers.TypeString})
			require.NoError(t, err)
		}
		sub, m := s.run(t, "Bo@Example.org", "eim_1")
		got, err := s.subs.Get(ctx, s.bot, sub)
		require.NoError(t, err)
		assert.Equal(t, "email", got.Channel)
		assert.Equal(t, "bo@example.org", got.ExternalID)
		assert.NotNil(t, got.LastSeenAt)
		assert.Nil(t, got.FirstName, "the display name is not taken")
		if withField {
			assert.Equal(t, map[string]any{"email": "bo@example.org"}, got.Fields)
		} else {
			assert.Empty(t, got.Fields)
		}
		assert.Equal(t, "email", body(t, m)["kind"])

		again, m2 := s.run(t, "bo@example.org", "eim_2")
		assert.Equal(t, sub, again, "withField=%v", withField)
		assert.Equal(t, "inbound_email:eim_2", body(t, m2)["cause"])
		list, _, err := s.subs.List(ctx, s.bot, subscribers.Filter{}, 10, "")
		require.NoError(t, err)
		assert.Len(t, list, 1)
	}
}

// Nothing is created or sent for a reaction that is not published, nor for an address that
// cannot identify a subscriber: the action is skipped, saying why.
func TestReactionSkipped(t *testing.T) {
	t.Parallel()
	s := newReactionSetup(t)
	ctx := t.Context()
	msg := emaildomains.InboundMessage{MessageSummary: emaildomains.MessageSummary{ID: "eim_1"}}
	var skip *emaildomains.SkipError
	_, err := s.acts.RunReaction(ctx, s.bot, ids.New("rct"), mail.Address{Address: "ann@example.org"}, msg)
	require.ErrorAs(t, err, &skip)
	assert.Contains(t, skip.Reason, "has no published version")

	long := strings.Repeat("a", 130) + "@example.org"
	_, err = s.acts.RunReaction(ctx, s.bot, s.rct, mail.Address{Address: long}, msg)
	require.ErrorAs(t, err, &skip)
	assert.Contains(t, skip.Reason, "cannot identify a new one")
	_, err = s.acts.RunReaction(ctx, s.bot, s.rct, mail.Address{Address: "ann@exämple.org"}, msg)
	require.ErrorAs(t, err, &skip)

	assert.Empty(t, s.q.Take())
	list, _, err := s.subs.List(ctx, s.bot, subscribers.Filter{}, 10, "")
	require.NoError(t, err)
	assert.Empty(t, list)
}

// On AWS the records follow the region SES sends from: the return-path MX is SES's feedback
// host of that region, and a deployment that receives mail (an inbound bucket) lists the
// optional MX of SES's inbound host there; locally neither region nor inbound MX applies.
func TestRecordsFollowTheSESRegion(t *testing.T) {
	t.Parallel()
	records := func(t *testing.T, env *family.Env) map[string]emaildomains.Record {
		t.Helper()
		d, err := New(env).Add(sqlitetest.Unrecorded(t.Context()), ids.New("bot"), emaildomains.NewDomain{Name: "mail.example.com"})
		require.NoError(t, err)
		out := map[string]emaildomains.Record{}
		for _, r := range d.Records {
			out[r.Purpose] = r
		}
		return out
	}
	sealer := secretstest.New("", 7)
	env := familytest.Env(t, family.Deps{Secrets: sealer})
	env.EmailSettings.SES = sesv2.New(sesv2.Options{Region: "eu-west-1"})
	env.EmailSettings.InboundBucket, env.EmailSettings.AWS = "inbound-bucket", &aws.Config{Region: "eu-west-1"}
	got := records(t, env)
	assert.Equal(t, "feedback-smtp.eu-west-1.amazonses.com", got[emaildomains.PurposeReturnPath].Value)
	in, ok := got[emaildomains.PurposeInbound]
	require.True(t, ok, "a deployment that receives mail lists its MX")
	assert.Equal(t, "MX", in.Type)
	assert.Equal(t, "mail.example.com", in.Name)
	assert.Equal(t, "inbound-smtp.eu-west-1.amazonaws.com", in.Value)
	assert.False(t, in.Required, "a domain may send without receiving")

	local := records(t, familytest.Env(t, family.Deps{Secrets: sealer}))
	assert.Equal(t, "feedback-smtp.us-east-1.amazonses.com", local[emaildomains.PurposeReturnPath].Value)
	_, ok = local[emaildomains.PurposeInbound]
	assert.False(t, ok, "no inbound MX without an inbound bucket")
}

// A forward carries the original as an attachment; one too large to attach with it (here
// 8-bit, so base64 would grow it past email.MaxMessageSize) goes without, saying so.
func TestForwardAttachesTheOriginalWhenItFits(t *testing.T) {
	t.Parallel()
	sink := &email.Sink{Dir: t.TempDir()}
	env := familytest.Env(t, family.Deps{Email: sink})
	acts := newActions(env)
	in := func(raw []byte) emaildomains.InboundMessage {
		return emaildomains.InboundMessage{MessageSummary: emaildomains.MessageSummary{
			From: &emaildomains.Address{Name: "Ada", Address: "ada@example.org"}, Subject: "Order",
			Recipients: []string{"support@mail.example.com"}}, Text: "Where is it?", Raw: raw}
	}
	last := func(t *testing.T) string {
		t.Helper()
		paths, err := sink.List()
		require.NoError(t, err)
		require.NotEmpty(t, paths)
		b, err := os.ReadFile(paths[len(paths)-1])
		require.NoError(t, err)
		return string(b)
	}
	small := []byte("From: ada@example.org\r\nSubject: Order\r\n\r\nWhere is it?\r\n")
	require.NoError(t, acts.Forward(t.Context(), ids.New("bot"), "team@example.net", in(small)))
	got := last(t)
	assert.Contains(t, got, "Content-Type: message/rfc822")
	assert.Contains(t, got, string(small))

	big := append([]byte("From: ada@example.org\r\nSubject: Order\r\n\r\n"), bytes.Repeat([]byte("Grüße\r\n"), (8<<20)/8)...)
	require.NoError(t, acts.Forward(t.Context(), ids.New("bot"), "team@example.net", in(big)))
	got = last(t)
	assert.NotContains(t, got, "multipart/mixed")
	assert.Contains(t, got, "too large to attach")
}
