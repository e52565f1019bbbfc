package whatsapp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	fake "github.com/botplatform/api/tests/fakes/whatsapp"
)

func body(text string, examples ...string) whatsapp.Component {
	c := whatsapp.Component{Type: "BODY", Text: text}
	if len(examples) > 0 {
		c.Example = &whatsapp.ComponentExample{BodyText: [][]string{examples}}
	}
	return c
}

// A PNG's signature and a few bytes: what the fake checks of an image.
var png = append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0}, 64)...)

func TestTemplateLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, f := newAdapter(t)
	c := conn(t, goodCreds())

	created, err := a.CreateTemplate(ctx, c, whatsapp.TemplateRequest{Name: "order_update", Language: "en_US", Category: whatsapp.CategoryUtility,
		Components: []whatsapp.Component{body("Hi {{1}}, order {{2}} ships today.", "Ann", "#42"), {Type: "FOOTER", Text: "Reply STOP to opt out"}}})
	require.NoError(t, err)
	assert.Equal(t, "PENDING", created.Status)
	assert.Regexp(t, `^[0-9]+$`, created.ID)

	_, err = a.CreateTemplate(ctx, c, whatsapp.TemplateRequest{Name: "order_update", Language: "en_US", Category: whatsapp.CategoryUtility,
		Components: []whatsapp.Component{body("Again")}})
	assert.ErrorIs(t, err, whatsapp.ErrTemplateExists)
	assert.ErrorIs(t, err, channel.ErrRejected)

	// A pending template cannot be edited; an approved one can, and goes back to review.
	edit := whatsapp.TemplateEdit{Components: []whatsapp.Component{body("Hello {{1}}, order {{2}} is on its way.", "Ann", "#42")}}
	err = a.EditTemplate(ctx, c, created.ID, edit)
	assert.ErrorIs(t, err, channel.ErrRejected)
	require.NoError(t, f.Approve("order_update", "en_US"))
	require.NoError(t, a.EditTemplate(ctx, c, created.ID, edit))
	got, _ := f.Template("order_update", "en_US")
	assert.Equal(t, "PENDING", got.Status)
	assert.Contains(t, string(got.Components), "is on its way")
	require.NoError(t, f.Approve("order_update", "en_US"))
	err = a.EditTemplate(ctx, c, created.ID, whatsapp.TemplateEdit{Category: whatsapp.CategoryMarketing, Components: edit.Components})
	assert.ErrorIs(t, err, channel.ErrRejected, "an approved template keeps its category")

	require.NoError(t, a.DeleteTemplate(ctx, c, created.ID, "order_update"))
	_, ok := f.Template("order_update", "en_US")
	assert.False(t, ok)
	err = a.DeleteTemplate(ctx, c, created.ID, "order_update")
	assert.ErrorIs(t, err, whatsapp.ErrNotFound)
	err = a.EditTemplate(ctx, c, created.ID, edit)
	assert.ErrorIs(t, err, whatsapp.ErrNotFound)
}

// The whole catalog comes back however small the provider's pages are.
func TestTemplatesFollowsPaging(t *testing.T) {
	t.Parallel()
	a, f := newAdapter(t)
	for i := range 7 {
		f.AddTemplate(fmt.Sprintf("t%d", i), "en", "UTILITY", "APPROVED", `[{"type":"BODY","text":"x"}]`)
	}
	all, err := a.Templates(context.Background(), conn(t, goodCreds()))
	require.NoError(t, err)
	require.Len(t, all, 7)
	for i, tpl := range all {
		assert.Equal(t, fmt.Sprintf("t%d", i), tpl.Name)
		assert.Equal(t, "APPROVED", tpl.Status)
		assert.JSONEq(t, `[{"type":"BODY","text":"x"}]`, string(tpl.Components))
	}
	assert.Equal(t, 4, f.TemplatePageRequests(), "pages of 2")

	f.Fail(1)
	_, err = a.Templates(context.Background(), conn(t, goodCreds()))
	assert.ErrorIs(t, err, channel.ErrUnavailable)
}

func TestUploadMedia(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, f := newAdapter(t)
	c := conn(t, goodCreds())

	h, err := a.UploadMedia(ctx, c, whatsapp.Upload{FileName: "header.png", MIMEType: "image/png", Length: int64(len(png)), Body: bytes.NewReader(png)})
	require.NoError(t, err)
	assert.NotEmpty(t, h)
	ups := f.Uploads()
	require.Len(t, ups, 1)
	assert.Equal(t, "image/png", ups[0].FileType)
	assert.Equal(t, int64(len(png)), ups[0].Length)
	assert.Equal(t, "header.png", ups[0].FileName)

	// The handle is what an IMAGE header's example takes.
	_, err = a.CreateTemplate(ctx, c, whatsapp.TemplateRequest{Name: "with_image", Language: "en", Category: whatsapp.CategoryMarketing,
		Components: []whatsapp.Component{{Type: "HEADER", Format: "IMAGE", Example: &whatsapp.ComponentExample{HeaderHandle: []string{h}}}, body("New in store")}})
	require.NoError(t, err)
	// ...and not a VIDEO header's.
	_, err = a.CreateTemplate(ctx, c, whatsapp.TemplateRequest{Name: "with_video", Language: "en", Category: whatsapp.CategoryMarketing,
		Components: []whatsapp.Component{{Type: "HEADER", Format: "VIDEO", Example: &whatsapp.ComponentExample{HeaderHandle: []string{h}}}, body("New in store")}})
	assert.ErrorIs(t, err, channel.ErrRejected)

	// The provider checks the bytes against the declared type, and the length.
	_, err = a.UploadMedia(ctx, c, whatsapp.Upload{MIMEType: "application/pdf", Length: int64(len(png)), Body: bytes.NewReader(png)})
	assert.ErrorIs(t, err, channel.ErrRejected)
	_, err = a.UploadMedia(ctx, c, whatsapp.Upload{MIMEType: "image/png", Length: int64(len(png)) + 10, Body: bytes.NewReader(png)})
	assert.Error(t, err, "fewer bytes than announced")

	// Types the Resumable Upload API does not take are refused before any call: an adapter
	// whose Graph API cannot be reached refuses them all the same (a call would fail as
	// unavailable instead).
	unreachable := whatsapp.New(whatsapp.Config{BaseURL: "http://127.0.0.1:1/" + fake.Version, AppID: fake.AppID})
	_, err = unreachable.UploadMedia(ctx, c, whatsapp.Upload{MIMEType: "image/gif", Length: 3, Body: strings.NewReader("GIF")})
	assert.ErrorIs(t, err, channel.ErrRejected)
	assert.NotErrorIs(t, err, channel.ErrUnavailable)

	noApp := whatsapp.New(whatsapp.Config{BaseURL: f.URL()})
	_, err = noApp.UploadMedia(ctx, c, whatsapp.Upload{MIMEType: "image/png", Length: int64(len(png)), Body: bytes.NewReader(png)})
	assert.ErrorIs(t, err, whatsapp.ErrNotConfigured)
	otherApp := whatsapp.New(whatsapp.Config{BaseURL: f.URL(), AppID: "42"})
	_, err = otherApp.UploadMedia(ctx, c, whatsapp.Upload{MIMEType: "image/png", Length: int64(len(png)), Body: bytes.NewReader(png)})
	assert.ErrorIs(t, err, whatsapp.ErrNotFound)
}

func TestValidateComponents(t *testing.T) {
	t.Parallel()
	decode := func(s string) []whatsapp.Component {
		var cs []whatsapp.Component
		require.NoError(t, json.Unmarshal([]byte(s), &cs))
		return cs
	}
	ok := []string{
		`[{"type":"BODY","text":"Hello"}]`,
		`[{"type":"HEADER","format":"TEXT","text":"Order {{1}}","example":{"header_text":["#42"]}},{"type":"BODY","text":"Hi {{1}} and {{2}}","example":{"body_text":[["a","b"]]}},{"type":"FOOTER","text":"Thanks"}]`,
		`[{"type":"HEADER","format":"IMAGE","example":{"header_handle":["4::aW1hZ2U=:x"]}},{"type":"BODY","text":"x"},{"type":"BUTTONS","buttons":[{"type":"QUICK_REPLY","text":"Stop"},{"type":"URL","text":"Track","url":"https://x.example/t/{{1}}","example":["https://x.example/t/42"]},{"type":"PHONE_NUMBER","text":"Call","phone_number":"+15550100199"},{"type":"COPY_CODE","example":["SAVE10"]}]}]`,
		`[{"type":"HEADER","format":"LOCATION"},{"type":"BODY","text":"Here"}]`,
	}
	for _, s := range ok {
		assert.Empty(t, whatsapp.ValidateComponents("components", decode(s)), s)
	}
	bad := map[string]string{
		`[]`:                             "components",
		`[{"type":"FOOTER","text":"x"}]`: "components",
		`[{"type":"BODY","text":"a"},{"type":"BODY","text":"b"}]`: "components[1].type",
		`[{"type":"BODY"}]`:                   "components[0].text",
		`[{"type":"BODY","text":"Hi {{1}}"}]`: "components[0].example.body_text",
		`[{"type":"BODY","text":"Hi {{2}}","example":{"body_text":[["a"]]}}]`:                                                             "components[0].text",
		`[{"type":"BODY","text":"Hi {{name}}","example":{"body_text":[["a"]]}}]`:                                                          "components[0].text",
		`[{"type":"BODY","text":"Hi","example":{"body_text":[["a"]]}}]`:                                                                   "components[0].example.body_text",
		`[{"type":"HEADER","format":"VIDEO"},{"type":"BODY","text":"x"}]`:                                                                 "components[0].example.header_handle",
		`[{"type":"HEADER","format":"GIF"},{"type":"BODY","text":"x"}]`:                                                                   "components[0].format",
		`[{"type":"HEADER","format":"TEXT","text":"{{1}} {{2}}"},{"type":"BODY","text":"x"}]`:                                             "components[0].text",
		`[{"type":"BODY","text":"x"},{"type":"FOOTER","text":"{{1}}"}]`:                                                                   "components[1].text",
		`[{"type":"BODY","text":"x"},{"type":"BUTTONS","buttons":[]}]`:                                                                    "components[1].buttons",
		`[{"type":"BODY","text":"x"},{"type":"BUTTONS","buttons":[{"type":"URL","text":"a","url":"ftp://x"}]}]`:                           "components[1].buttons[0].url",
		`[{"type":"BODY","text":"x"},{"type":"BUTTONS","buttons":[{"type":"URL","text":"a","url":"https://x/{{1}}/y","example":["u"]}]}]`: "components[1].buttons[0].url",
		`[{"type":"BODY","text":"x"},{"type":"BUTTONS","buttons":[{"type":"QUICK_REPLY","text":"` + strings.Repeat("q", 26) + `"}]}]`:     "components[1].buttons[0].text",
		`[{"type":"BODY","text":"x"},{"type":"BUTTONS","buttons":[{"type":"PHONE_NUMBER","text":"a","phone_number":"call me"}]}]`:         "components[1].buttons[0].phone_number",
		`[{"type":"BODY","text":"x"},{"type":"BUTTONS","buttons":[{"type":"OTP","text":"a"}]}]`:                                           "components[1].buttons[0].type",
		`[{"type":"BODY","text":"` + strings.Repeat("b", 1025) + `"}]`:                                                                    "components[0].text",
		`[{"type":"body","text":"x"}]`: "components[0].type",
	}
	for s, field := range bad {
		ps := whatsapp.ValidateComponents("components", decode(s))
		var fields []string
		for _, p := range ps {
			fields = append(fields, p.Field)
		}
		assert.Contains(t, fields, field, s)
	}
	assert.True(t, whatsapp.ValidName("order_update_2"))
	assert.False(t, whatsapp.ValidName("Order-Update"))
	assert.True(t, whatsapp.ValidLanguage("en_US"))
	assert.True(t, whatsapp.ValidLanguage("pt_BR"))
	assert.True(t, whatsapp.ValidLanguage("fil"))
	assert.False(t, whatsapp.ValidLanguage("english"))
}

// ParametersOf tells what a message of a template must give: the body's parameters, and
// the first part that needs another kind of parameter.
func TestParametersOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, components string
		want             whatsapp.SendParameters
	}{
		{"body only", `[{"type":"BODY","text":"Hi {{1}}, order {{2}} ships {{2}}."},{"type":"FOOTER","text":"Shop"}]`, whatsapp.SendParameters{Body: 2}},
		{"no variables", `[{"type":"HEADER","format":"TEXT","text":"News"},{"type":"BODY","text":"Hello"},
			{"type":"BUTTONS","buttons":[{"type":"QUICK_REPLY","text":"Stop"},{"type":"URL","text":"Shop","url":"https://x.example/"},{"type":"PHONE_NUMBER","text":"Call","phone_number":"+15550100"}]}]`,
			whatsapp.SendParameters{}},
		{"lower case, as some syncs report", `[{"type":"body","text":"{{1}}"}]`, whatsapp.SendParameters{Body: 1}},
		{"header variable", `[{"type":"HEADER","format":"TEXT","text":"Hi {{1}}"},{"type":"BODY","text":"{{1}}"}]`, whatsapp.SendParameters{Body: 1, Other: "the header's variable"}},
		{"media header", `[{"type":"HEADER","format":"IMAGE"},{"type":"BODY","text":"Sale"}]`, whatsapp.SendParameters{Other: "the image header"}},
		{"URL variable", `[{"type":"BODY","text":"x"},{"type":"BUTTONS","buttons":[{"type":"URL","text":"Track","url":"https://x.example/{{1}}"}]}]`,
			whatsapp.SendParameters{Other: "a URL button's variable"}},
		{"copy code", `[{"type":"BODY","text":"x"},{"type":"BUTTONS","buttons":[{"type":"COPY_CODE","example":["SAVE10"]}]}]`, whatsapp.SendParameters{Other: "a copy_code button"}},
		{"named variables", `[{"type":"BODY","text":"Hi {{first_name}}"}]`, whatsapp.SendParameters{Other: "named body variables ({{first_name}})"}},
		{"carousel", `[{"type":"BODY","text":"x"},{"type":"CAROUSEL","cards":[]}]`, whatsapp.SendParameters{Other: "its carousel component"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := whatsapp.ParametersOf(json.RawMessage(tc.components))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := whatsapp.ParametersOf(json.RawMessage(`{}`))
	assert.Error(t, err)
}
