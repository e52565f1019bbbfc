package reactions

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/botplatform/api/shared/channel"
)

func TestStepProblems(t *testing.T) {
	t.Parallel()
	caps := channel.Capabilities{Kind: channel.WhatsApp, MessageKinds: []string{channel.MessageKindText, channel.MessageKindButtons},
		Media: []channel.MediaLimit{{Type: channel.Image}}, MaxTextLength: 10, MaxCaptionLength: 5,
		Buttons: channel.ButtonLimits{Max: 2, MaxTitleLength: 4, URLButtons: true, URLButtonAlone: true}}
	noButtons := caps
	noButtons.MessageKinds = []string{channel.MessageKindText}
	noLinks := caps
	noLinks.Buttons.URLButtons, noLinks.Buttons.URLButtonAlone = false, false
	reply := Button{Title: "ok", Payload: "p"}
	link := Button{Title: "go", URL: "https://x.example"}
	tests := []struct {
		name   string
		step   Step
		caps   channel.Capabilities
		fields []string
	}{
		{"text fits", Step{Type: StepSendText, Text: "hi"}, caps, nil},
		{"text too long", Step{Type: StepSendText, Text: strings.Repeat("x", 11)}, caps, []string{".text"}},
		{"media type not sent", Step{Type: StepSendMedia, MediaType: "video"}, caps, []string{".media_type"}},
		{"caption too long", Step{Type: StepSendMedia, MediaType: "image", Caption: "123456"}, caps, []string{".caption"}},
		{"no buttons there", Step{Type: StepButtons, Text: "x", Buttons: []Button{reply}}, noButtons, []string{".buttons"}},
		{"too many", Step{Type: StepButtons, Text: "x", Buttons: []Button{reply, reply, reply}}, caps, []string{".buttons"}},
		{"title too long", Step{Type: StepButtons, Text: "x", Buttons: []Button{{Title: "longer", Payload: "p"}}}, caps, []string{".buttons[0].title"}},
		{"link with a reply", Step{Type: StepButtons, Text: "x", Buttons: []Button{link, reply}}, caps, []string{".buttons"}},
		{"link alone", Step{Type: StepButtons, Text: "x", Buttons: []Button{link}}, caps, nil},
		{"no links there", Step{Type: StepButtons, Text: "x", Buttons: []Button{link}}, noLinks, []string{".buttons"}},
		{"templates fall back by design", Step{Type: StepSendTemplate, TemplateName: "t"}, noButtons, nil},
		{"quick replies become inline by design", Step{Type: StepButtons, Text: "x", Style: StyleQuickReplies, Buttons: []Button{reply}}, caps, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, p := range stepProblems(tt.step, tt.caps) {
			got = append(got, p.field)
			assert.NotEmpty(t, p.message)
		}
		assert.Equal(t, tt.fields, got, tt.name)
	}
}
