package content

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

func fields(t *testing.T, err error) []string {
	t.Helper()
	return httpapitest.InvalidFields(t, err)
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	d, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypeMessage, Name: "Welcome",
		Draft: raw(t, map[string]any{"text": "Hi {{ subscriber.first_name | default: \"there\" }}"})})
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Revision)
	assert.Nil(t, d.Published)

	d, err = f.svc.UpdateDraft(ctx, f.bot, d.ID, 1, nil, raw(t, map[string]any{"buttons": []any{map[string]any{"title": "Yes", "payload": "y"}}}))
	require.NoError(t, err)
	assert.Equal(t, int64(2), d.Revision)
	assert.JSONEq(t, `{"text":"Hi {{ subscriber.first_name | default: \"there\" }}","buttons":[{"title":"Yes","payload":"y"}]}`, string(d.Draft), "a partial draft keeps what it does not name")

	_, err = f.svc.Publish(ctx, f.bot, d.ID, 1)
	assert.Equal(t, httpapi.KindConflict, httpapi.KindOf(err), "stale revision")
	d, err = f.svc.Publish(ctx, f.bot, d.ID, 2)
	require.NoError(t, err)
	require.NotNil(t, d.Published)
	assert.Equal(t, 1, d.Published.Number)
	assert.Equal(t, int64(3), d.Revision)
	var logged []eventlog.Event
	require.NoError(t, f.events.Scan(ctx, eventlog.Query{BotID: f.bot, To: f.clock.Now().Add(time.Hour)}, func(e eventlog.Event) error {
		logged = append(logged, e)
		return nil
	}))
	require.Len(t, logged, 1, "the publish is in the event log, the refused one is not")
	assert.Equal(t, eventlog.ContentPublished, logged[0].Name)
	assert.Equal(t, map[string]any{"document_id": d.ID, "type": "message", "version": float64(1)}, logged[0].Properties)

	// Editing the draft leaves the published version as it was.
	_, err = f.svc.UpdateDraft(ctx, f.bot, d.ID, 3, nil, raw(t, map[string]any{"text": "changed"}))
	require.NoError(t, err)
	typ, v, err := f.svc.Published(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Equal(t, TypeMessage, typ)
	assert.Contains(t, string(v.Body), "subscriber.first_name")
	got, err := f.svc.Get(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.Contains(t, string(got.Draft), "changed")
	assert.Equal(t, 1, got.Published.Number)

	c, err := f.svc.Clone(ctx, f.bot, d.ID, nil)
	require.NoError(t, err)
	assert.Equal(t, "Welcome (copy)", c.Name)
	assert.Nil(t, c.Published, "a clone is unpublished")
	assert.JSONEq(t, string(got.Draft), string(c.Draft))

	a, err := f.svc.Archive(ctx, f.bot, d.ID, 4)
	require.NoError(t, err)
	assert.True(t, a.Archived)
	_, err = f.svc.UpdateDraft(ctx, f.bot, d.ID, 5, nil, raw(t, map[string]any{"text": "x"}))
	assert.Equal(t, "document_archived", httpapitest.AsError(t, err).Code)
	_, _, err = f.svc.Published(ctx, f.bot, d.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "an archived document is not sendable")

	live, _, err := f.svc.List(ctx, f.bot, Filter{}, 10, "")
	require.NoError(t, err)
	require.Len(t, live, 1)
	assert.Equal(t, c.ID, live[0].ID)
	assert.Nil(t, live[0].Draft, "lists carry summaries")
	archived, _, err := f.svc.List(ctx, f.bot, Filter{Archived: true, Type: TypeMessage}, 10, "")
	require.NoError(t, err)
	require.Len(t, archived, 1)
	assert.Equal(t, d.ID, archived[0].ID)
	assert.Equal(t, 1, archived[0].Published.Number)
	none, _, err := f.svc.List(ctx, f.bot, Filter{Type: TypeEmail}, 10, "")
	require.NoError(t, err)
	assert.Empty(t, none)
}

func TestCreateRefusesBadShapes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	_, err := f.svc.Create(ctx, f.bot, NewDocument{Type: "sms", Name: "x"})
	assert.Equal(t, []string{"type"}, fields(t, err))

	_, err = f.svc.Create(ctx, f.bot, NewDocument{Type: TypeMessage, Name: "x", Draft: raw(t, map[string]any{"text": "a", "colour": "red"})})
	assert.Equal(t, "unknown_field", httpapitest.AsError(t, err).Code, "bodies are strict by type")

	_, err = f.svc.Create(ctx, f.bot, NewDocument{Type: TypeEmail, Name: "", Draft: raw(t, map[string]any{
		"subject": strings.Repeat("s", 300), "from": map[string]any{"address": "not an address"}, "html": "<p>x</p>", "reply_to": "also bad"})})
	assert.ElementsMatch(t, []string{"name", "draft.subject", "draft.from.address", "draft.reply_to"}, fields(t, err), "every problem at once")

	_, err = f.svc.Create(ctx, f.bot, NewDocument{Type: TypePush, Name: "p", Draft: raw(t, map[string]any{
		"title": "t", "body": "b", "url": "javascript:alert(1)", "actions": []any{map[string]any{"title": "a", "url": "https://x.example"}, map[string]any{"title": "b", "url": "https://x.example"}, map[string]any{"title": "c", "url": "https://x.example"}}})})
	assert.ElementsMatch(t, []string{"draft.url", "draft.actions"}, fields(t, err))

	_, err = f.svc.Create(ctx, f.bot, NewDocument{Type: TypeMessage, Name: "m", Draft: raw(t, map[string]any{
		"text": "bad\x00text", "buttons": []any{map[string]any{"title": "both", "payload": "p", "url": "https://x.example"}}, "channels": map[string]any{"sms": map[string]any{}}})})
	assert.ElementsMatch(t, []string{"draft.text", "draft.buttons[0]", "draft.channels.sms"}, fields(t, err))
}

// Validate (and publish) list every problem: missing members, merge fields, channel limits.
func TestValidate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	buttons := []any{}
	for _, title := range []string{"One", "Two", "Three", "A title far too long for WhatsApp"} {
		buttons = append(buttons, map[string]any{"title": title, "payload": strings.ToLower(title[:3])})
	}
	d, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypeMessage, Name: "m", Draft: raw(t, map[string]any{
		"text": "Hi {{ subscriber.fields.tier }} {{ subscriber.first_name | shout }} {{ customer.id }}", "buttons": buttons})})
	require.NoError(t, err)
	_, err = f.svc.Validate(ctx, f.bot, d.ID)
	e := httpapitest.AsError(t, err)
	assert.Equal(t, httpapi.KindUnprocessable, e.Kind)
	assert.Equal(t, "content_invalid", e.Code)
	msgs := []string{}
	for _, p := range e.Extensions["errors"].([]httpapi.FieldError) {
		msgs = append(msgs, p.Field+": "+p.Message)
	}
	joined := strings.Join(msgs, "\n")
	assert.Contains(t, joined, `draft.text: unknown merge field subscriber.fields.tier: the bot has no custom field "tier"`)
	assert.Contains(t, joined, `unknown filter "shout"`)
	assert.Contains(t, joined, "unknown merge field customer.id")
	assert.Contains(t, joined, "draft (whatsapp).buttons: has 4 buttons; whatsapp shows at most 3")
	assert.Contains(t, joined, "draft (whatsapp).buttons[3].title: is 33 characters; whatsapp allows at most 20")
	assert.NotContains(t, joined, "telegram", "telegram takes all four")
	_, err = f.svc.Publish(ctx, f.bot, d.ID, 1)
	assert.Equal(t, "content_invalid", httpapitest.AsError(t, err).Code, "publish checks as validate does")

	// Per-channel overrides fix the channel's problems; known fields fix the rest.
	_, err = f.svc.UpdateDraft(ctx, f.bot, d.ID, 1, nil, raw(t, map[string]any{
		"text":     "Hi {{ subscriber.fields.plan }} {{ subscriber.first_name | upcase }}",
		"channels": map[string]any{"whatsapp": map[string]any{"buttons": buttons[:3]}}}))
	require.NoError(t, err)
	v, err := f.svc.Validate(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.True(t, v.Valid)
	assert.Equal(t, []string{"subscriber.fields.plan", "subscriber.first_name"}, v.MergeFields)
	assert.Equal(t, []string{"telegram", "whatsapp"}, v.Channels)

	em, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypeEmail, Name: "e"})
	require.NoError(t, err)
	_, err = f.svc.Validate(ctx, f.bot, em.ID)
	got := []string{}
	for _, p := range httpapitest.AsError(t, err).Extensions["errors"].([]httpapi.FieldError) {
		got = append(got, p.Field)
	}
	assert.ElementsMatch(t, []string{"draft.subject", "draft.from.address", "draft.html"}, got, "an empty email lacks subject, sender and body")
}

func TestPreview(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	d, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypeEmail, Name: "e", Draft: raw(t, map[string]any{
		"subject": "Hello {{ subscriber.first_name | default: \"friend\" }}",
		"html":    `<p onclick="steal()">Dear {{ subscriber.first_name }}, your plan: {{ subscriber.fields.plan }}</p><script>alert(1)</script><a href="javascript:x()">x</a>`,
		"from":    map[string]any{"name": "Acme", "address": "news@acme.example"}})})
	require.NoError(t, err)
	p, err := f.svc.Preview(ctx, f.bot, d.ID, PreviewRequest{Sample: &Sample{FirstName: "<b>Eve</b>", Fields: map[string]string{"plan": "Gold"}}})
	require.NoError(t, err)
	e := p.Rendered.Email
	require.NotNil(t, e)
	assert.Equal(t, "Hello <b>Eve</b>", e.Subject, "subjects are text: not escaped")
	assert.Contains(t, e.HTML, "Dear &lt;b&gt;Eve&lt;/b&gt;, your plan: Gold", "values are escaped in HTML")
	assert.NotContains(t, e.HTML, "<script")
	assert.NotContains(t, e.HTML, "onclick")
	assert.NotContains(t, e.HTML, "javascript:")
	assert.Contains(t, e.Text, "Dear <b>Eve</b>, your plan: Gold", "a text part is derived from the HTML")
	assert.Empty(t, p.Problems)

	p, err = f.svc.Preview(ctx, f.bot, d.ID, PreviewRequest{SubscriberID: ptr("sub_tg")})
	require.NoError(t, err)
	assert.Equal(t, "Hello Ada", p.Rendered.Email.Subject)

	_, err = f.svc.Preview(ctx, f.bot, d.ID, PreviewRequest{Version: ptr(1)})
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "no published version yet")
	_, err = f.svc.Preview(ctx, f.bot, d.ID, PreviewRequest{SubscriberID: ptr("sub_x"), Sample: &Sample{}})
	assert.Equal(t, []string{"sample"}, fields(t, err))
}

func TestTestSend(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	m, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypeMessage, Name: "m", Draft: raw(t, map[string]any{
		"text": "Hi {{ subscriber.first_name }}", "buttons": []any{map[string]any{"title": "Open", "url": "https://acme.example/{{ subscriber.id }}"}}})})
	require.NoError(t, err)
	res, err := f.svc.TestSend(ctx, f.bot, m.ID, "sub_tg")
	require.NoError(t, err)
	assert.Equal(t, "telegram", res.Via)
	require.Len(t, f.msgs.sent, 1)
	s := f.msgs.sent[0]
	assert.Equal(t, "777", s.To)
	assert.Equal(t, "Hi Ada", s.Msg.Text)
	assert.Equal(t, []channel.Button{{Title: "Open", URL: "https://acme.example/sub_tg"}}, s.Msg.Buttons)

	_, err = f.svc.TestSend(ctx, f.bot, m.ID, "sub_none")
	assert.Equal(t, "not_a_test_recipient", httpapitest.AsError(t, err).Code)
	_, err = f.svc.TestSend(ctx, f.bot, m.ID, "sub_missing")
	assert.Equal(t, "not_a_test_recipient", httpapitest.AsError(t, err).Code)

	em, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypeEmail, Name: "e", Draft: raw(t, map[string]any{
		"subject": "Ваш план: {{ subscriber.fields.plan }}", "text": "Hello {{ subscriber.first_name }}", "from": map[string]any{"name": "Acme", "address": "news@acme.example"}})})
	require.NoError(t, err)
	res, err = f.svc.TestSend(ctx, f.bot, em.ID, "sub_tg")
	require.NoError(t, err)
	assert.Equal(t, "email", res.Via)
	files, err := f.mail.List()
	require.NoError(t, err)
	require.Len(t, files, 1)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.Contains(t, string(b), "To: \"Ada Lovelace\" <ada@example.com>")
	assert.Contains(t, string(b), "Hello Ada")
	_, err = f.svc.TestSend(ctx, f.bot, em.ID, "sub_wa")
	assert.Equal(t, "not_a_test_recipient", httpapitest.AsError(t, err).Code, "an email test needs the subscriber's email field")

	p, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypePush, Name: "p", Draft: raw(t, map[string]any{"title": "t", "body": "b"})})
	require.NoError(t, err)
	_, err = f.svc.TestSend(ctx, f.bot, p.ID, "sub_tg")
	assert.Equal(t, "unsupported_document_type", httpapitest.AsError(t, err).Code)

	f.msgs.err = &channel.Error{Kind: channel.ErrBlocked, Provider: channel.Telegram}
	_, err = f.svc.TestSend(ctx, f.bot, m.ID, "sub_tg")
	e := httpapitest.AsError(t, err)
	assert.Equal(t, "test_send_refused", e.Code)
	assert.Contains(t, e.Detail, "blocked")
}

func TestTestSendRateLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	m, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypeMessage, Name: "m", Draft: raw(t, map[string]any{"text": "hi"})})
	require.NoError(t, err)
	for range TestSendLimit.Max {
		_, err := f.svc.TestSend(ctx, f.bot, m.ID, "sub_tg")
		require.NoError(t, err)
	}
	_, err = f.svc.TestSend(ctx, f.bot, m.ID, "sub_tg")
	e := httpapitest.AsError(t, err)
	assert.Equal(t, httpapi.KindTooManyRequests, e.Kind)
	assert.Len(t, f.msgs.sent, int(TestSendLimit.Max), "the refused send never reached the channel")
	f.clock.Advance(TestSendLimit.Window)
	_, err = f.svc.TestSend(ctx, f.bot, m.ID, "sub_tg")
	assert.NoError(t, err, "the next window allows sends again")
}

func TestTemplates(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	tpl, err := f.svc.CreateTemplate(ctx, f.bot, NewTemplate{Type: TypePush, Name: "Sale push", Body: raw(t, map[string]any{"title": "Sale", "body": "Up to 50% off"})})
	require.NoError(t, err)
	d, err := f.svc.Create(ctx, f.bot, NewDocument{TemplateID: &tpl.ID, Draft: raw(t, map[string]any{"body": "Up to 70% off"})})
	require.NoError(t, err)
	assert.Equal(t, TypePush, d.Type)
	assert.Equal(t, "Sale push", d.Name)
	assert.JSONEq(t, `{"title":"Sale","body":"Up to 70% off"}`, string(d.Draft))
	assert.Equal(t, &tpl.ID, d.TemplateID)

	_, err = f.svc.Create(ctx, f.bot, NewDocument{TemplateID: &tpl.ID, Type: TypeEmail, Name: "x"})
	assert.Equal(t, []string{"type"}, fields(t, err))
	_, err = f.svc.Create(ctx, f.bot, NewDocument{TemplateID: ptr("ctpl_missing"), Name: "x"})
	assert.Equal(t, []string{"template_id"}, fields(t, err))

	from, err := f.svc.CreateTemplate(ctx, f.bot, NewTemplate{Name: "From doc", FromDocument: &d.ID})
	require.NoError(t, err)
	assert.JSONEq(t, string(d.Draft), string(from.Body))

	list, _, err := f.svc.ListTemplates(ctx, f.bot, 10, "")
	require.NoError(t, err)
	assert.Len(t, list, 2)
	require.NoError(t, f.svc.DeleteTemplate(ctx, f.bot, tpl.ID))
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(f.svc.DeleteTemplate(ctx, f.bot, tpl.ID)))
	got, err := f.svc.Get(ctx, f.bot, d.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"title":"Sale","body":"Up to 70% off"}`, string(got.Draft), "documents keep their copy")
}

func ptr[T any](v T) *T { return &v }

var _ = json.Marshal

// A draft that fits every member's limit can still be too large to store once JSON escapes
// its quotes: it is refused naming the draft, not failed by the store.
func TestDraftTooLargeToStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	html := strings.Repeat(`"`, MaxHTMLBytes) // 200 KB of quotes: 400 KB as JSON
	_, err := f.svc.Create(t.Context(), f.bot, NewDocument{Type: TypeEmail, Name: "big", Draft: raw(t, map[string]any{"subject": "s", "html": html, "from": map[string]any{"address": "a@b.example"}})})
	assert.Equal(t, []string{"draft"}, fields(t, err))
	d, err := f.svc.Create(t.Context(), f.bot, NewDocument{Type: TypeEmail, Name: "ok", Draft: raw(t, map[string]any{"subject": "s", "html": strings.Repeat("<p>x</p>", MaxHTMLBytes/8), "from": map[string]any{"address": "a@b.example"}})})
	require.NoError(t, err, "200 KB of HTML is stored as it is: < and > are not escaped")
	_, err = f.svc.UpdateDraft(t.Context(), f.bot, d.ID, 1, nil, raw(t, map[string]any{"text": strings.Repeat(`\`, MaxTextBytes)}))
	assert.Equal(t, []string{"draft"}, fields(t, err))
}

// A process without a sender answers test sends with 503, and lists no test recipients.
func TestTestSendUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	svc := NewService(f.svc.store, f.svc.catalog, nil, f.clock.Now)
	d, err := svc.Create(t.Context(), f.bot, NewDocument{Type: TypeMessage, Name: "m", Draft: raw(t, map[string]any{"text": "hi"})})
	require.NoError(t, err)
	_, err = svc.TestSend(t.Context(), f.bot, d.ID, "sub_tg")
	e := httpapitest.AsError(t, err)
	assert.Equal(t, httpapi.KindUnavailable, e.Kind)
	assert.Equal(t, "test_send_unavailable", e.Code)
	list, _, err := svc.TestRecipients(t.Context(), f.bot, 10, "")
	require.NoError(t, err)
	assert.Empty(t, list)
}

func TestEmailVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	d, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypeEmail, Name: "e", Draft: raw(t, map[string]any{
		"subject": "Hi {{ subscriber.first_name | default: \"you\" }}", "html": `<p>{{ subscriber.fields.plan }}</p><a href="https://acme.example/x">x</a>`,
		"from": map[string]any{"address": "news@acme.example"}})})
	require.NoError(t, err)
	_, err = f.svc.EmailVersion(ctx, f.bot, d.ID, 0)
	assert.Equal(t, "document_not_published", httpapitest.AsError(t, err).Code)
	_, err = f.svc.Publish(ctx, f.bot, d.ID, 1)
	require.NoError(t, err)
	_, err = f.svc.UpdateDraft(ctx, f.bot, d.ID, 2, nil, raw(t, map[string]any{"subject": "changed"}))
	require.NoError(t, err)
	ev, err := f.svc.EmailVersion(ctx, f.bot, d.ID, 0)
	require.NoError(t, err)
	assert.Equal(t, 1, ev.Number)
	e := ev.Render(Recipient{FirstName: "Ann", Fields: map[string]any{"plan": "<Gold>"}})
	assert.Equal(t, "Hi Ann", e.Subject, "the published version, not the draft")
	assert.Contains(t, e.HTML, "&lt;Gold&gt;")
	assert.Contains(t, e.Text, "<Gold>")
	assert.Equal(t, "Hi you", ev.Render(Recipient{}).Subject)
	assert.Contains(t, ev.RawHTML(), "https://acme.example/x")
	_, err = f.svc.EmailVersion(ctx, f.bot, d.ID, 2)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))

	m, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypeMessage, Name: "m", Draft: raw(t, map[string]any{"text": "x"})})
	require.NoError(t, err)
	_, err = f.svc.EmailVersion(ctx, f.bot, m.ID, 0)
	assert.Equal(t, "unsupported_document_type", httpapitest.AsError(t, err).Code)
}

// {{ unsubscribe_url }} is a merge field of email documents only.
func TestUnsubscribeField(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	em, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypeEmail, Name: "e", Draft: raw(t, map[string]any{
		"subject": "s", "html": `<a href="{{ unsubscribe_url }}">Unsubscribe</a>`, "from": map[string]any{"address": "a@b.example"}})})
	require.NoError(t, err)
	_, err = f.svc.Validate(ctx, f.bot, em.ID)
	require.NoError(t, err)
	_, err = f.svc.Publish(ctx, f.bot, em.ID, 1)
	require.NoError(t, err)
	ev, err := f.svc.EmailVersion(ctx, f.bot, em.ID, 0)
	require.NoError(t, err)
	assert.Contains(t, ev.Render(Recipient{UnsubscribeURL: "https://api.example/u/tok"}).HTML, `href="https://api.example/u/tok"`)

	m, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypeMessage, Name: "m", Draft: raw(t, map[string]any{"text": "{{ unsubscribe_url }}"})})
	require.NoError(t, err)
	_, err = f.svc.Validate(ctx, f.bot, m.ID)
	assert.Equal(t, "content_invalid", httpapitest.AsError(t, err).Code, "a message has no unsubscribe link")
}

// The text part a campaign sends is the one a test send derives from each rendered HTML,
// though it is derived once per version.
func TestEmailVersionDerivedText(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	html := `<h1>Hello {{ subscriber.first_name | default: "friend" }} &amp; co</h1><p>Plan: <b>{{ subscriber.fields.plan }}</b><br>Bye</p><a href="{{ unsubscribe_url }}">Unsubscribe</a>`
	d, err := f.svc.Create(ctx, f.bot, NewDocument{Type: TypeEmail, Name: "e", Draft: raw(t, map[string]any{
		"subject": "s", "html": html, "from": map[string]any{"address": "a@b.example"}})})
	require.NoError(t, err)
	_, err = f.svc.Publish(ctx, f.bot, d.ID, 1)
	require.NoError(t, err)
	ev, err := f.svc.EmailVersion(ctx, f.bot, d.ID, 0)
	require.NoError(t, err)
	for _, r := range []Recipient{{FirstName: "Ann", Fields: map[string]any{"plan": "<Gold> & more"}}, {}} {
		got := ev.Render(r)
		assert.Equal(t, textOf(got.HTML), got.Text, "%+v", r)
	}
	assert.Contains(t, ev.Render(Recipient{FirstName: "Ann"}).Text, "Hello Ann & co")
}
