package reactions

import (
	"context"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/botplatform/api/shared/channel"
)

// Channels tells publishing which channels the bot has connected and what each can send
// (the channels family's capability matrix), so that it can warn about steps a connected
// channel would refuse at run time.
type Channels interface {
	Connected(ctx context.Context, bot string) ([]ConnectedChannel, error)
}

// ConnectedChannel is one channel of the bot, as publishing checks against it.
type ConnectedChannel struct {
	ID   string
	Name string
	// Capabilities are its type's: what messages it sends and their limits.
	Capabilities channel.Capabilities
}

// WithChannels makes publishing warn, per connected channel, about steps that channel
// cannot send as they are.
func (s *Service) WithChannels(c Channels) *Service {
	s.channels = c
	return s
}

// Warning is something publishing does not refuse but that will fail, or not work as
// written, at run time as things stand: a template not approved yet, or a step a connected
// channel cannot send. ChannelID and ChannelType name the channel when it is about one.
type Warning struct {
	Field       string       `json:"field"`
	Message     string       `json:"message"`
	ChannelID   string       `json:"channel_id,omitempty"`
	ChannelType channel.Kind `json:"channel_type,omitempty"`
}

// channelWarnings checks every message step of c against every connected channel.
func (s *Service) channelWarnings(ctx context.Context, bot string, c Content) ([]Warning, error) {
	if s.channels == nil {
		return nil, nil
	}
	chans, err := s.channels.Connected(ctx, bot)
	if err != nil {
		return nil, err
	}
	var out []Warning
	for _, ch := range chans {
		for i, st := range c.Steps {
			path := "steps[" + itoa(i) + "]"
			for _, w := range stepProblems(st, ch.Capabilities) {
				out = append(out, Warning{Field: path + w.field, ChannelID: ch.ID, ChannelType: ch.Capabilities.Kind,
					Message: fmt.Sprintf("the %s channel %q cannot send this step as it is: %s", ch.Capabilities.Kind, ch.Name, w.message)})
			}
		}
	}
	return out, nil
}

type stepProblem struct{ field, message string }

// stepProblems is what of step st a channel with capabilities c would refuse. Steps that
// the runtime adapts by design are not problems: send_template falls back to its text on a
// channel without templates, and quick replies become inline buttons where the channel has
// no keyboard of its own.
func stepProblems(st Step, c channel.Capabilities) []stepProblem {
	var out []stepProblem
	add := func(field, format string, args ...any) {
		out = append(out, stepProblem{field, fmt.Sprintf(format, args...)})
	}
	switch st.Type {
	case StepSendText:
		if c.MaxTextLength > 0 && utf8.RuneCountInString(st.Text) > c.MaxTextLength {
			add(".text", "a text has at most %d characters there", c.MaxTextLength)
		}
	case StepSendMedia:
		if !slices.ContainsFunc(c.Media, func(m channel.MediaLimit) bool { return string(m.Type) == st.MediaType }) {
			add(".media_type", "it sends no %s", st.MediaType)
		}
		if c.MaxCaptionLength > 0 && utf8.RuneCountInString(st.Caption) > c.MaxCaptionLength {
			add(".caption", "a caption has at most %d characters there", c.MaxCaptionLength)
		}
	case StepButtons:
		if !c.Sends(channel.MessageKindButtons) {
			add(".buttons", "it has no buttons")
			return out
		}
		b := c.Buttons
		if c.MaxTextLength > 0 && utf8.RuneCountInString(st.Text) > c.MaxTextLength {
			add(".text", "a text has at most %d characters there", c.MaxTextLength)
		}
		if b.Max > 0 && len(st.Buttons) > b.Max {
			add(".buttons", "a message has at most %d buttons there", b.Max)
		}
		links := 0
		for i, btn := range st.Buttons {
			if btn.URL != "" {
				links++
			}
			if b.MaxTitleLength > 0 && utf8.RuneCountInString(btn.Title) > b.MaxTitleLength {
				add(".buttons["+itoa(i)+"].title", "a button title has at most %d characters there", b.MaxTitleLength)
			}
		}
		switch {
		case links > 0 && !b.URLButtons:
			add(".buttons", "it has no link buttons")
		case links > 0 && b.URLButtonAlone && len(st.Buttons) > 1:
			add(".buttons", "a link button must be the message's only button there; put the link in a step of its own")
		}
	}
	return out
}
