package reactions

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/text"
)

// StepType names what a step does; docs/reactions.md gives each one's exact semantics.
type StepType string

// The step types. send_template sends a WhatsApp message template, the only message
// WhatsApp delivers outside its 24-hour window.
const (
	StepSendText     StepType = "send_text"
	StepSendMedia    StepType = "send_media"
	StepSendTemplate StepType = "send_template"
	StepButtons      StepType = "buttons"
	StepSetField     StepType = "set_field"
	StepClearField   StepType = "clear_field"
	StepAddLabel     StepType = "add_label"
	StepRemoveLabel  StepType = "remove_label"
	StepCondition    StepType = "condition"
	StepWait         StepType = "wait"
	StepGoto         StepType = "goto"
	StepEnd          StepType = "end"
)

// StepTypes lists every step type, in documentation order.
func StepTypes() []StepType {
	return []StepType{StepSendText, StepSendMedia, StepSendTemplate, StepButtons, StepSetField, StepClearField,
		StepAddLabel, StepRemoveLabel, StepCondition, StepWait, StepGoto, StepEnd}
}

func knownStep(t StepType) bool {
	for _, k := range StepTypes() {
		if k == t {
			return true
		}
	}
	return false
}

// Step is one step of a reaction. It is one flat object whose fields depend on Type, so that
// strict decoding names every unknown field by its path; fields of another type are refused
// by validation.
type Step struct {
	// ID names the step within its reaction; branches and gotos refer to it.
	ID   string   `json:"id"`
	Type StepType `json:"type"`

	// Text (send_text, buttons) is the message text.
	Text string `json:"text,omitempty"`

	// MediaType (send_media) is image, video, audio or document; URL its https address;
	// Caption an optional text under it.
	MediaType string `json:"media_type,omitempty"`
	URL       string `json:"url,omitempty"`
	Caption   string `json:"caption,omitempty"`

	// TemplateName and TemplateLanguage (send_template) name a WhatsApp message template the
	// way WhatsApp does (order_update, en_US), so a bundle carries them between bots as they
	// are; Params are its body parameters {{1}}..{{n}} in order; FallbackText is sent instead
	// on a channel without templates (Telegram, VK), where the step is skipped without it.
	TemplateName     string          `json:"template_name,omitempty"`
	TemplateLanguage string          `json:"template_language,omitempty"`
	Params           []TemplateParam `json:"params,omitempty"`
	FallbackText     string          `json:"fallback_text,omitempty"`

	// Style (buttons) is inline (attached to the message) or quick_replies (a one-time
	// keyboard); Buttons are 1 to MaxButtons.
	Style   string   `json:"style,omitempty"`
	Buttons []Button `json:"buttons,omitempty"`

	// FieldID (set_field, clear_field) is the custom field; Value (set_field) its new value,
	// a JSON value of the field's type.
	FieldID string          `json:"field_id,omitempty"`
	Value   json.RawMessage `json:"value,omitempty"`

	// LabelID (add_label, remove_label) is the label.
	LabelID string `json:"label_id,omitempty"`

	// Match (condition) is all or any; Conditions are 1 to MaxConditions; Then and Else are
	// the ids of the steps that run when the conditions hold and when they do not.
	Match      string      `json:"match,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
	Then       string      `json:"then,omitempty"`
	Else       string      `json:"else,omitempty"`

	// Seconds (wait) is how long the run sleeps before the next step.
	Seconds int64 `json:"seconds,omitempty"`

	// StepID (goto) jumps within the reaction; ReactionID (goto) to another reaction's
	// published version (or, naming this reaction, to its first step).
	StepID     string `json:"step_id,omitempty"`
	ReactionID string `json:"reaction_id,omitempty"`
}

// Button is one button of a buttons step: a title and exactly one action.
type Button struct {
	Title string `json:"title"`
	// Payload fires the button trigger of the reaction listening for it.
	Payload string `json:"payload,omitempty"`
	// URL opens a web page; the run does not continue.
	URL string `json:"url,omitempty"`
	// StepID continues the run at that step of this reaction.
	StepID string `json:"step_id,omitempty"`
}

// TemplateParam is one body parameter of a send_template step: exactly one of Text (literal,
// written by the bot's author) and FieldID (the subscriber's value of that custom field, read
// when the step runs; Default when the subscriber has none).
type TemplateParam struct {
	Text    string `json:"text,omitempty"`
	FieldID string `json:"field_id,omitempty"`
	Default string `json:"default,omitempty"`
}

// Condition is one test of a condition step: on a custom field (FieldID, Op, Value) or on a
// label (LabelID, Op has or has_not).
type Condition struct {
	FieldID string          `json:"field_id,omitempty"`
	LabelID string          `json:"label_id,omitempty"`
	Op      string          `json:"op"`
	Value   json.RawMessage `json:"value,omitempty"`
}

// Media types of send_media.
var mediaTypes = []string{"image", "video", "audio", "document"}

// Button styles.
const (
	StyleInline       = "inline"
	StyleQuickReplies = "quick_replies"
)

// Condition matches.
const (
	MatchAll = "all"
	MatchAny = "any"
)

// Condition operators. Label conditions take has and has_not; field conditions the rest,
// as the field's type allows (see opAllows).
const (
	OpHas      = "has"
	OpHasNot   = "has_not"
	OpEq       = "eq"
	OpNe       = "ne"
	OpGt       = "gt"
	OpGte      = "gte"
	OpLt       = "lt"
	OpLte      = "lte"
	OpContains = "contains"
	OpIsSet    = "is_set"
	OpIsNotSet = "is_not_set"
)

var fieldOps = []string{OpEq, OpNe, OpGt, OpGte, OpLt, OpLte, OpContains, OpIsSet, OpIsNotSet}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// stepIDRe is what a step id may be: short, URL- and log-safe.
var stepIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// isNull reports a JSON value that is absent or null ("null means absent").
func isNull(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// isScalar reports a JSON string, number or boolean.
func isScalar(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	if len(t) == 0 {
		return false
	}
	switch t[0] {
	case '{', '[', 'n':
		return false
	}
	return true
}

// normalize fills the defaults a client may leave out, so stored and returned steps are complete.
func (s *Step) normalize() {
	if s.Type == StepButtons && s.Style == "" {
		s.Style = StyleInline
	}
	if s.Type == StepCondition && s.Match == "" {
		s.Match = MatchAll
	}
	if isNull(s.Value) {
		s.Value = nil
	}
	for i := range s.Conditions {
		if isNull(s.Conditions[i].Value) {
			s.Conditions[i].Value = nil
		}
	}
}

// check adds the step's shape problems to r. An unknown type is a flaw (422); its fields are
// then not checked, since their meaning is unknown.
func (s Step) check(r *report, path string) {
	if s.Type == "" {
		r.shape.Add(path+".type", "is required")
		return
	}
	if !knownStep(s.Type) {
		r.flaws.Add(path+".type", "unknown step type %q", s.Type)
		return
	}
	var allowed []string
	switch s.Type {
	case StepSendText:
		allowed = []string{"text"}
		checkText(r, path+".text", s.Text, MaxTextLen)
	case StepSendMedia:
		allowed = []string{"media_type", "url", "caption"}
		switch {
		case s.MediaType == "":
			r.shape.Add(path+".media_type", "is required: one of image, video, audio, document")
		case !contains(mediaTypes, s.MediaType):
			r.shape.Add(path+".media_type", "must be one of image, video, audio, document")
		}
		checkURL(r, path+".url", s.URL, true)
		if utf8.RuneCountInString(s.Caption) > MaxCaptionLen {
			r.shape.Add(path+".caption", "must be at most %d characters", MaxCaptionLen)
		} else {
			r.shape.Text(path+".caption", s.Caption, text.Message)
		}
	case StepSendTemplate:
		allowed = []string{"template_name", "template_language", "params", "fallback_text"}
		s.checkTemplate(r, path)
	case StepButtons:
		allowed = []string{"text", "style", "buttons"}
		s.checkButtons(r, path)
	case StepSetField:
		allowed = []string{"field_id", "value"}
		required(r, path+".field_id", s.FieldID)
		if s.Value == nil {
			r.shape.Add(path+".value", "is required (use a clear_field step to remove a value)")
		} else if !isScalar(s.Value) {
			r.shape.Add(path+".value", "must be a string, a number or a boolean")
		}
	case StepClearField:
		allowed = []string{"field_id"}
		required(r, path+".field_id", s.FieldID)
	case StepAddLabel, StepRemoveLabel:
		allowed = []string{"label_id"}
		required(r, path+".label_id", s.LabelID)
	case StepCondition:
		allowed = []string{"match", "conditions", "then", "else"}
		s.checkCondition(r, path)
	case StepWait:
		allowed = []string{"seconds"}
		if s.Seconds < 1 || s.Seconds > MaxWaitSeconds {
			r.shape.Add(path+".seconds", "must be from 1 to %d (30 days)", MaxWaitSeconds)
		}
	case StepGoto:
		allowed = []string{"step_id", "reaction_id"}
		if (s.StepID == "") == (s.ReactionID == "") {
			r.shape.Add(path, "a goto step takes exactly one of step_id and reaction_id")
		}
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"text", s.Text != ""}, {"media_type", s.MediaType != ""}, {"url", s.URL != ""},
		{"caption", s.Caption != ""}, {"template_name", s.TemplateName != ""},
		{"template_language", s.TemplateLanguage != ""}, {"params", s.Params != nil},
		{"fallback_text", s.FallbackText != ""}, {"style", s.Style != ""}, {"buttons", s.Buttons != nil},
		{"field_id", s.FieldID != ""}, {"value", s.Value != nil}, {"label_id", s.LabelID != ""},
		{"match", s.Match != ""}, {"conditions", s.Conditions != nil}, {"then", s.Then != ""},
		{"else", s.Else != ""}, {"seconds", s.Seconds != 0}, {"step_id", s.StepID != ""},
		{"reaction_id", s.ReactionID != ""},
	} {
		if f.set && !contains(allowed, f.name) {
			r.shape.Add(path+"."+f.name, "is not a field of %s steps", s.Type)
		}
	}
}

// checkTemplate checks a send_template step's shape: the template's name and language as
// WhatsApp writes them, and parameters that WhatsApp accepts as body text. Whether the bot's
// WhatsApp channel has the template is checked at publish (Service.PublishWithWarnings).
func (s Step) checkTemplate(r *report, path string) {
	switch {
	case s.TemplateName == "":
		r.shape.Add(path+".template_name", "is required: the template's name in WhatsApp")
	case !whatsapp.ValidName(s.TemplateName):
		r.shape.Add(path+".template_name", "must be 1 to %d characters of a-z 0-9 _, as WhatsApp names templates", whatsapp.MaxTemplateName)
	}
	switch {
	case s.TemplateLanguage == "":
		r.shape.Add(path+".template_language", "is required: the template's language code in WhatsApp, such as en or en_US")
	case !whatsapp.ValidLanguage(s.TemplateLanguage):
		r.shape.Add(path+".template_language", "must be a WhatsApp language code such as en, en_US or pt_BR")
	}
	if len(s.Params) > MaxTemplateParams {
		r.shape.Add(path+".params", "must have at most %d parameters", MaxTemplateParams)
	}
	for i, p := range s.Params {
		pp := path + ".params[" + itoa(i) + "]"
		switch {
		case (p.Text == "") == (p.FieldID == ""):
			r.shape.Add(pp, "a parameter takes exactly one of text and field_id")
		case p.Text != "":
			checkParamText(r, pp+".text", p.Text)
			if p.Default != "" {
				r.shape.Add(pp+".default", "only a field_id parameter takes a default")
			}
		case p.Default != "":
			checkParamText(r, pp+".default", p.Default)
		}
	}
	if s.FallbackText != "" {
		checkText(r, path+".fallback_text", s.FallbackText, MaxTextLen)
	}
}

// checkParamText applies WhatsApp's rules for a template parameter's text: not blank, at
// most MaxTemplateParamLen characters, and no new line, tab or more than four spaces in a
// row (the Cloud API refuses those, error 132018).
func checkParamText(r *report, path, s string) {
	switch {
	case strings.TrimSpace(s) == "":
		r.shape.Add(path, "must not be blank")
	case utf8.RuneCountInString(s) > MaxTemplateParamLen:
		r.shape.Add(path, "must be at most %d characters", MaxTemplateParamLen)
	case strings.ContainsAny(s, "\n\r\t") || strings.Contains(s, "     "):
		r.shape.Add(path, "must be one line: WhatsApp refuses parameters with a new line, a tab or more than 4 spaces in a row")
	default:
		r.shape.Text(path, s, text.Line)
	}
}

func (s Step) checkButtons(r *report, path string) {
	checkText(r, path+".text", s.Text, MaxTextLen)
	if s.Style != StyleInline && s.Style != StyleQuickReplies {
		r.shape.Add(path+".style", "must be inline or quick_replies")
	}
	switch {
	case len(s.Buttons) == 0:
		r.shape.Add(path+".buttons", "must have at least one button")
	case len(s.Buttons) > MaxButtons:
		r.shape.Add(path+".buttons", "must have at most %d buttons", MaxButtons)
	}
	for i, b := range s.Buttons {
		bp := path + ".buttons[" + itoa(i) + "]"
		title := strings.TrimSpace(b.Title)
		switch {
		case title == "":
			r.shape.Add(bp+".title", "is required")
		case utf8.RuneCountInString(b.Title) > MaxButtonTitleLen:
			r.shape.Add(bp+".title", "must be at most %d characters", MaxButtonTitleLen)
		default:
			r.shape.Text(bp+".title", b.Title, text.Line)
		}
		n := 0
		for _, set := range []bool{b.Payload != "", b.URL != "", b.StepID != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			r.shape.Add(bp, "a button takes exactly one of payload, url and step_id")
			continue
		}
		switch {
		case b.Payload != "":
			checkPayload(r, bp+".payload", b.Payload)
		case b.URL != "":
			if s.Style == StyleQuickReplies {
				r.shape.Add(bp+".url", "quick replies cannot open a URL; use an inline button")
			}
			checkURL(r, bp+".url", b.URL, false)
		}
	}
}

func (s Step) checkCondition(r *report, path string) {
	if s.Match != MatchAll && s.Match != MatchAny {
		r.shape.Add(path+".match", "must be all or any")
	}
	switch {
	case len(s.Conditions) == 0:
		r.shape.Add(path+".conditions", "must have at least one condition")
	case len(s.Conditions) > MaxConditions:
		r.shape.Add(path+".conditions", "must have at most %d conditions", MaxConditions)
	}
	for i, c := range s.Conditions {
		cp := path + ".conditions[" + itoa(i) + "]"
		switch {
		case (c.FieldID == "") == (c.LabelID == ""):
			r.shape.Add(cp, "a condition takes exactly one of field_id and label_id")
		case c.LabelID != "":
			if c.Op != OpHas && c.Op != OpHasNot {
				r.shape.Add(cp+".op", "a label condition's op must be has or has_not")
			}
			if c.Value != nil {
				r.shape.Add(cp+".value", "a label condition takes no value")
			}
		default:
			switch {
			case !contains(fieldOps, c.Op):
				r.shape.Add(cp+".op", "a field condition's op must be one of %s", strings.Join(fieldOps, ", "))
			case c.Op == OpIsSet || c.Op == OpIsNotSet:
				if c.Value != nil {
					r.shape.Add(cp+".value", "%s takes no value", c.Op)
				}
			case c.Value == nil:
				r.shape.Add(cp+".value", "is required for %s", c.Op)
			case !isScalar(c.Value):
				r.shape.Add(cp+".value", "must be a string, a number or a boolean")
			}
		}
	}
	required(r, path+".then", s.Then)
	required(r, path+".else", s.Else)
}

func required(r *report, path, v string) {
	if v == "" {
		r.shape.Add(path, "is required")
	}
}

func checkText(r *report, path, s string, max int) {
	switch {
	case strings.TrimSpace(s) == "":
		r.shape.Add(path, "is required")
	case utf8.RuneCountInString(s) > max:
		r.shape.Add(path, "must be at most %d characters", max)
	default:
		r.shape.Text(path, s, text.Message)
	}
}

// checkURL accepts an absolute http(s) URL without credentials; media must be https, since
// the channels fetch it themselves and refuse plain http.
func checkURL(r *report, path, raw string, httpsOnly bool) {
	if raw == "" {
		r.shape.Add(path, "is required")
		return
	}
	if len(raw) > MaxURLLen {
		r.shape.Add(path, "must be at most %d characters", MaxURLLen)
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || strings.ContainsAny(raw, " \t\r\n"):
		r.shape.Add(path, "must be an absolute URL")
	case httpsOnly && u.Scheme != "https":
		r.shape.Add(path, "must be an https URL")
	case u.Scheme != "https" && u.Scheme != "http":
		r.shape.Add(path, "must be an http or https URL")
	case u.User != nil:
		r.shape.Add(path, "must not contain credentials")
	}
}
