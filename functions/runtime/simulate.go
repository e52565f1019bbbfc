package runtime

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/channel"
)

// A simulation runs a flow the way the runtime runs it (the same step semantics, the same
// condition rules, the same trace entries) against an input instead of the world: no store,
// no channel, no wall clock. Copilot runs a proposed flow on sample subscribers; replay re-runs
// a recorded run's input against a version or a draft. The same flow and input always give
// the same result, byte for byte: every time is on the input's clock, every id made up from
// the entry's number.

// SimInput is what a simulation runs a flow against.
type SimInput struct {
	Channel channel.Kind `json:"channel"`
	Trigger TriggerInfo  `json:"trigger"`
	// Start is the clock at the run's start. Steps take no time; a wait moves the clock to
	// its end.
	Start time.Time `json:"start"`
	// Subscriber is a sample subscriber: conditions and template parameters read it, and the
	// steps change it, by the runtime's rules. Without one, conditions take their results
	// from Facts.
	Subscriber *SimSubscriber `json:"subscriber,omitempty"`
	// Facts are recorded results of condition tests (used when Subscriber is nil).
	Facts []SimFact `json:"facts,omitempty"`
	// Presses answer the buttons steps, in order.
	Presses []SimPress `json:"presses,omitempty"`
	// Answers are the provider's answers to the sends, in order; a send without one
	// succeeds.
	Answers []SimAnswer `json:"answers,omitempty"`
	// Templates says the channel sends message templates (WhatsApp).
	Templates bool `json:"templates"`
	// NoQuickReplies says the channel shows quick replies as inline buttons.
	NoQuickReplies bool `json:"no_quick_replies,omitempty"`
	// Published are the reactions a goto step may start (those with a published version).
	Published []string `json:"published,omitempty"`
	// Fields are the bot's custom fields and Labels its label ids. A test on a field or
	// label the bot does not have is false, as in the runtime; with neither given, every
	// field and label a step names is taken to exist (a recorded input does not list them).
	Fields []Field  `json:"fields,omitempty"`
	Labels []string `json:"labels,omitempty"`
}

// SimSubscriber is a sample subscriber.
type SimSubscriber struct {
	Labels []string `json:"labels"`
	// Fields are custom field values keyed by field id.
	Fields map[string]any `json:"fields"`
}

// SimFact is the recorded result of one condition test: the test (a label's or a field's,
// its operator and operand) and its result.
type SimFact struct {
	LabelID string          `json:"label_id,omitempty"`
	FieldID string          `json:"field_id,omitempty"`
	Op      string          `json:"op"`
	Value   json.RawMessage `json:"value,omitempty"`
	Result  bool            `json:"result"`
}

// SimPress is what the subscriber did about one buttons step: pressed Button (its index),
// or, with Button -1, nothing (the wait expired); or replied with a message (Reply), pressed
// a payload button, which starts another reaction (Payload), or started another run that
// waits for buttons (Superseded).
type SimPress struct {
	StepID     string `json:"step_id,omitempty"`
	Button     int    `json:"button"`
	QuickReply bool   `json:"quick_reply,omitempty"`
	Reply      bool   `json:"reply,omitempty"`
	Payload    bool   `json:"payload,omitempty"`
	Superseded bool   `json:"superseded,omitempty"`
}

// SimAnswer is the provider's answer to one send of step StepID: its message id, or the
// error that failed the run.
type SimAnswer struct {
	StepID    string     `json:"step_id,omitempty"`
	MessageID string     `json:"message_id,omitempty"`
	Error     *StepError `json:"error,omitempty"`
}

// SimResult is a simulated run: its end and its entries, in the form of a recorded trace.
type SimResult struct {
	Status    Status     `json:"status"`
	EndReason *string    `json:"end_reason"`
	Error     *StepError `json:"error"`
	Steps     []Entry    `json:"steps"`
	// Notes say where the input did not cover the flow.
	Notes []SimNote `json:"notes"`
}

// SimNote is a place where the input did not say what happens: Code is no_fact (a condition
// test without a recorded result: false), no_press (a buttons step with no press left: the
// run waits), answer_unused (a recorded answer no send took) or invalid_press (a press of a
// button that does not exist or is a link).
type SimNote struct {
	Code    string `json:"code"`
	StepID  string `json:"step_id,omitempty"`
	Message string `json:"message"`
}

// The codes of SimNote.
const (
	NoteNoFact       = "no_fact"
	NoteNoPress      = "no_press"
	NoteAnswerUnused = "answer_unused"
	NoteInvalidPress = "invalid_press"
)

// sim is a simulation in progress.
type sim struct {
	flow    Flow
	in      SimInput
	index   map[string]int
	clock   time.Time
	cursor  int
	labels  []string       // the sample subscriber's labels
	values  map[string]any // the sample subscriber's values, by field name
	fields  map[string]Field
	known   map[string]bool // the bot's labels
	facts   []bool          // facts used
	answers []bool          // answers used
	presses int
	out     SimResult
}

// Simulate runs flow against in.
func Simulate(flow Flow, in SimInput) SimResult {
	s := &sim{flow: flow, in: in, index: make(map[string]int, len(flow.Steps)), clock: ms(in.Start),
		facts: make([]bool, len(in.Facts)), answers: make([]bool, len(in.Answers)),
		out: SimResult{Status: StatusRunning, Steps: []Entry{}, Notes: []SimNote{}}}
	for i, st := range flow.Steps {
		s.index[st.ID] = i
	}
	if len(in.Fields) > 0 {
		s.fields = make(map[string]Field, len(in.Fields))
		for _, f := range in.Fields {
			s.fields[f.ID] = f
		}
	}
	if len(in.Labels) > 0 {
		s.known = make(map[string]bool, len(in.Labels))
		for _, l := range in.Labels {
			s.known[l] = true
		}
	}
	if sub := in.Subscriber; sub != nil {
		s.labels = slices.Clone(sub.Labels)
		s.values = map[string]any{}
		for id, v := range sub.Fields {
			if f, ok := s.field(id); ok {
				s.values[f.Name] = v
			}
		}
	}
	for s.out.Status == StatusRunning {
		if s.cursor < 0 || s.cursor >= len(flow.Steps) {
			s.finish(StatusCompleted, EndLastStep)
			break
		}
		if len(s.out.Steps) >= MaxEntries {
			s.out.Error = &StepError{Kind: "step_limit", Message: fmt.Sprintf("the run executed %d steps, the most one run may", MaxEntries)}
			s.finish(StatusFailed, "")
			break
		}
		s.step(flow.Steps[s.cursor])
	}
	for i, used := range s.answers {
		if !used {
			s.note(NoteAnswerUnused, in.Answers[i].StepID, "a recorded provider answer was not used by any send")
		}
	}
	return s.out
}

func (s *sim) finish(st Status, reason string) {
	s.out.Status = st
	if reason != "" {
		s.out.EndReason = &reason
	}
}

func (s *sim) note(code, step, msg string) {
	s.out.Notes = append(s.out.Notes, SimNote{Code: code, StepID: step, Message: msg})
}

// field returns the bot's field id; with no fields given, a field named by its id.
func (s *sim) field(id string) (Field, bool) {
	if s.fields == nil {
		return Field{ID: id, Name: id, Type: "string"}, true
	}
	f, ok := s.fields[id]
	return f, ok
}

func (s *sim) labelKnown(id string) bool { return s.known == nil || s.known[id] }

// add appends e as the next entry.
func (s *sim) add(e *Entry) {
	e.Seq = len(s.out.Steps) + 1
	s.out.Steps = append(s.out.Steps, *e)
}

// fail ends the run as failed at the step of e, as driver.fail does.
func (s *sim) fail(e *Entry, se StepError) {
	se.StepID = e.StepID
	e.Error = &se
	run := se
	s.out.Error = &run
	s.finish(StatusFailed, "")
}

// send takes the provider's answer to a send of step id: the first unused answer for it.
func (s *sim) send(e *Entry) (string, bool) {
	for i, a := range s.in.Answers {
		if s.answers[i] || (a.StepID != "" && a.StepID != e.StepID) {
			continue
		}
		s.answers[i] = true
		if a.Error != nil {
			s.fail(e, *a.Error)
			return "", false
		}
		if a.MessageID != "" {
			return a.MessageID, true
		}
		break
	}
	return "sim_" + strconv.Itoa(len(s.out.Steps)+1), true
}

func (s *sim) deliver(e *Entry) {
	if id, ok := s.send(e); ok {
		e.Outcome = map[string]any{"message_id": id}
		s.cursor++
	}
}

func (s *sim) step(st Step) {
	e := &Entry{StepID: st.ID, Type: st.Type, At: s.clock, Attempts: 1}
	defer s.add(e)
	switch st.Type {
	case StepSendText:
		e.Input = map[string]any{"text": clip(st.Text)}
		s.deliver(e)
	case StepSendMedia:
		e.Input = map[string]any{"media_type": st.MediaType, "url": st.URL}
		if st.Caption != "" {
			e.Input["caption"] = clip(st.Caption)
		}
		s.deliver(e)
	case StepSendTemplate:
		s.template(st, e)
	case StepButtons:
		s.buttons(st, e)
	case StepSetField, StepClearField:
		var v any
		if st.Type == StepSetField {
			_ = json.Unmarshal(st.Value, &v) // validated on publish
			e.Input = map[string]any{"field_id": st.FieldID, "value": v}
		} else {
			e.Input = map[string]any{"field_id": st.FieldID}
		}
		if f, ok := s.field(st.FieldID); !ok {
			e.Outcome = map[string]any{"skipped": "field_missing"}
		} else {
			if s.values != nil {
				if v == nil {
					delete(s.values, f.Name)
				} else {
					s.values[f.Name] = v
				}
			}
			e.Outcome = map[string]any{"done": true}
		}
		s.cursor++
	case StepAddLabel, StepRemoveLabel:
		e.Input = map[string]any{"label_id": st.LabelID}
		if !s.labelKnown(st.LabelID) {
			e.Outcome = map[string]any{"skipped": "label_missing"}
			s.cursor++
			break
		}
		had := s.has(st.LabelID)
		if st.Type == StepAddLabel {
			e.Outcome = map[string]any{"added": !had}
			if !had {
				s.labels = append(s.labels, st.LabelID)
			}
		} else {
			e.Outcome = map[string]any{"removed": had}
			s.labels = slices.DeleteFunc(s.labels, func(l string) bool { return l == st.LabelID })
		}
		s.cursor++
	case StepCondition:
		ok, details, _ := evaluateWith(st, func(c Condition) (bool, error) { return s.test(st.ID, c), nil })
		branch, target := "then", st.Then
		if !ok {
			branch, target = "else", st.Else
		}
		e.Decision = map[string]any{"match": st.Match, "result": ok, "branch": branch, "next_step_id": target, "conditions": details}
		s.jump(e, target)
	case StepWait:
		until := s.clock.Add(time.Duration(st.Seconds) * time.Second).UTC()
		e.Input = map[string]any{"seconds": st.Seconds}
		e.Outcome = map[string]any{"until": until}
		s.clock = until
		s.cursor++
	case StepGoto:
		if st.StepID != "" {
			e.Decision = map[string]any{"next_step_id": st.StepID}
			s.jump(e, st.StepID)
			break
		}
		e.Input = map[string]any{"reaction_id": st.ReactionID}
		if !slices.Contains(s.in.Published, st.ReactionID) {
			e.Outcome = map[string]any{"started": false}
			s.finish(StatusCompleted, EndGotoNothing)
			break
		}
		e.Outcome = map[string]any{"started": true, "execution_id": "sim_next"}
		s.finish(StatusCompleted, EndGoto)
	case StepEnd:
		s.finish(StatusCompleted, EndStep)
	default:
		s.fail(e, StepError{Kind: "unsupported_step", Message: fmt.Sprintf("this runtime cannot execute %q steps", st.Type)})
	}
}

func (s *sim) has(label string) bool {
	if s.in.Subscriber != nil {
		return slices.Contains(s.labels, label)
	}
	// A recorded run: the label's last known state, from the run itself or its facts.
	if slices.Contains(s.labels, label) {
		return true
	}
	return s.fact(Condition{LabelID: label, Op: "has"}, false)
}

// jump continues at step id, as driver.jump.
func (s *sim) jump(e *Entry, id string) {
	i, ok := s.index[id]
	if !ok {
		s.fail(e, StepError{Kind: "unsupported_step", Message: fmt.Sprintf("no step %q in this version", id)})
		return
	}
	s.cursor = i
}

// test runs one condition test: against the sample subscriber, or from the recorded facts.
func (s *sim) test(step string, c Condition) bool {
	if c.LabelID != "" && !s.labelKnown(c.LabelID) {
		return false
	}
	var f Field
	if c.LabelID == "" {
		var ok bool
		if f, ok = s.field(c.FieldID); !ok {
			return false
		}
	}
	if s.in.Subscriber != nil {
		if c.LabelID != "" {
			return testLabel(c, true, s.labels)
		}
		return testField(c, f, s.values)
	}
	if c.LabelID != "" && slices.Contains(s.labels, c.LabelID) {
		return c.Op == "has" // added by this run
	}
	ok, found := s.lookup(c)
	if !found {
		s.note(NoteNoFact, step, "no recorded result for this test: it counts as false")
	}
	return ok
}

// fact is the recorded result of c, or def when none was recorded.
func (s *sim) fact(c Condition, def bool) bool {
	if ok, found := s.lookup(c); found {
		return ok
	}
	return def
}

// lookup finds the result of c in the facts: the first unused match, else the last match
// (a test repeated in a loop keeps its last result).
func (s *sim) lookup(c Condition) (bool, bool) {
	last := -1
	for i, f := range s.in.Facts {
		if f.LabelID != c.LabelID || f.FieldID != c.FieldID || !sameOperand(f, c) {
			continue
		}
		if f.Op != c.Op {
			if c.LabelID != "" && (f.Op == "has") != (c.Op == "has") {
				// has and has_not are one fact about the label.
				if !s.facts[i] {
					s.facts[i] = true
					return !f.Result, true
				}
				last = i
			}
			continue
		}
		if !s.facts[i] {
			s.facts[i] = true
			return f.Result, true
		}
		last = i
	}
	if last < 0 {
		return false, false
	}
	f := s.in.Facts[last]
	if f.Op != c.Op {
		return !f.Result, true
	}
	return f.Result, true
}

func sameOperand(f SimFact, c Condition) bool {
	if c.LabelID != "" {
		return true
	}
	var a, b any
	_ = json.Unmarshal(f.Value, &a)
	_ = json.Unmarshal(c.Value, &b)
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func (s *sim) template(st Step, e *Entry) {
	e.Input = templateInput(st)
	if !s.in.Templates {
		if st.FallbackText == "" {
			e.Outcome = map[string]any{"skipped": skippedNoTemplates}
			s.cursor++
			return
		}
		s.deliver(e)
		if e.Error == nil {
			e.Outcome["sent_as"] = "fallback_text"
		}
		return
	}
	for i, p := range st.Params {
		if p.FieldID == "" || s.in.Subscriber == nil {
			// A literal; or a recorded run, whose parameters the trace never shows: the
			// recorded answers say whether the send went.
			continue
		}
		v := ""
		if f, ok := s.field(p.FieldID); ok {
			v = paramValue(s.values[f.Name])
		}
		if v == "" && p.Default == "" {
			s.fail(e, StepError{Kind: "missing_parameter", Message: fmt.Sprintf(
				"params[%d]: no value of the custom field %s (the subscriber has none, or the bot no longer has the field) and no default",
				i, p.FieldID)})
			return
		}
	}
	s.deliver(e)
}

func (s *sim) buttons(st Step, e *Entry) {
	list := make([]map[string]any, len(st.Buttons))
	for i, b := range st.Buttons {
		item := map[string]any{"title": b.Title}
		switch {
		case b.Payload != "":
			item["payload"] = b.Payload
		case b.URL != "":
			item["url"] = b.URL
		default:
			item["step_id"] = b.StepID
		}
		list[i] = item
	}
	e.Input = map[string]any{"text": clip(st.Text), "style": st.Style, "buttons": list}
	id, ok := s.send(e)
	if !ok {
		return
	}
	until := s.clock.Add(ButtonsWait).UTC()
	e.Outcome = map[string]any{"message_id": id, "waiting_until": until}
	if st.Style == styleQuickReplies && s.in.NoQuickReplies {
		e.Outcome["sent_as"] = styleInline
	}
	// The wait: the subscriber's next answer to a buttons step.
	var p *SimPress
	for s.presses < len(s.in.Presses) {
		c := s.in.Presses[s.presses]
		s.presses++
		if c.StepID == "" || c.StepID == st.ID {
			p = &c
			break
		}
	}
	switch {
	case p == nil:
		s.note(NoteNoPress, st.ID, "no press left for this buttons step: the run waits")
		s.finish(StatusWaiting, "")
	case p.Reply:
		s.finish(StatusCompleted, EndReply)
	case p.Superseded:
		s.finish(StatusCompleted, EndSuperseded)
	case p.Payload:
		s.finish(StatusCompleted, EndButtonPayload)
	case p.Button < 0:
		s.clock = until
		s.finish(StatusCompleted, EndButtonsExpired)
	case p.Button >= len(st.Buttons) || st.Buttons[p.Button].URL != "":
		s.note(NoteInvalidPress, st.ID, fmt.Sprintf("button %d cannot be pressed: the run waits", p.Button))
		s.finish(StatusWaiting, "")
	case st.Buttons[p.Button].Payload != "":
		s.finish(StatusCompleted, EndButtonPayload)
	default:
		b := st.Buttons[p.Button]
		// The entry of the buttons step itself goes first; the resumption is the next.
		s.add(e)
		decision := map[string]any{"button": p.Button, "title": b.Title, "next_step_id": b.StepID}
		if p.QuickReply {
			decision["quick_reply"] = true
		}
		*e = Entry{StepID: st.ID, Type: StepButtons, At: s.clock, Attempts: 1, Decision: decision,
			Outcome: map[string]any{"resumed": true}}
		s.cursor = -1
		if i, ok := s.index[b.StepID]; ok {
			s.cursor = i
		}
	}
}

// RecordedInput rebuilds the input of a recorded run from its trace: the trigger, the start,
// the condition results the run saw (and the label states its label steps found), what the
// subscriber did about each buttons step, and the provider's answer to each send. The trace
// holds nothing the subscriber sent and no field value, so neither does the input: a
// simulation of it takes its conditions from the recorded results (docs/replay.md).
func RecordedInput(d Detail) SimInput {
	in := SimInput{Channel: d.Channel, Trigger: d.Trigger, Start: d.StartedAt, Templates: d.Channel == channel.WhatsApp}
	for i, e := range d.Steps {
		switch e.Type {
		case StepCondition:
			list, _ := e.Decision["conditions"].([]any)
			for _, item := range list {
				if f, ok := recordedFact(item); ok {
					in.Facts = append(in.Facts, f)
				}
			}
			if list == nil {
				// A trace read in process, not decoded from JSON.
				if typed, ok := e.Decision["conditions"].([]map[string]any); ok {
					for _, item := range typed {
						if f, ok := recordedFact(item); ok {
							in.Facts = append(in.Facts, f)
						}
					}
				}
			}
		case StepAddLabel, StepRemoveLabel:
			label, _ := e.Input["label_id"].(string)
			if added, ok := e.Outcome["added"].(bool); ok && label != "" {
				in.Facts = append(in.Facts, SimFact{LabelID: label, Op: "has", Result: !added})
			}
			if removed, ok := e.Outcome["removed"].(bool); ok && label != "" {
				in.Facts = append(in.Facts, SimFact{LabelID: label, Op: "has", Result: removed})
			}
		case StepGoto:
			if started, _ := e.Outcome["started"].(bool); started {
				if id, _ := e.Input["reaction_id"].(string); id != "" && !slices.Contains(in.Published, id) {
					in.Published = append(in.Published, id)
				}
			}
		case StepSendTemplate:
			switch {
			case e.Outcome["skipped"] == skippedNoTemplates, e.Outcome["sent_as"] == "fallback_text":
				in.Templates = false
			case e.Error == nil || e.Error.Kind != "missing_parameter":
				in.Templates = true
			}
		}
		if resumed, _ := e.Outcome["resumed"].(bool); resumed {
			p := SimPress{StepID: e.StepID, Button: intOf(e.Decision["button"])}
			p.QuickReply, _ = e.Decision["quick_reply"].(bool)
			in.Presses = append(in.Presses, p)
			continue
		}
		if e.Type == StepButtons && e.Outcome["sent_as"] == styleInline {
			in.NoQuickReplies = true
		}
		if sends(e) {
			a := SimAnswer{StepID: e.StepID}
			if e.Error != nil {
				se := *e.Error
				se.StepID, se.Attempts = "", 0
				a.Error = &se
			} else {
				a.MessageID, _ = e.Outcome["message_id"].(string)
			}
			in.Answers = append(in.Answers, a)
		}
		if e.Type == StepButtons && e.Error == nil && i == len(d.Steps)-1 && d.EndReason != nil {
			// The run ended at its last buttons wait: how.
			p := SimPress{StepID: e.StepID, Button: -1}
			switch *d.EndReason {
			case EndReply:
				p.Reply = true
			case EndSuperseded:
				p.Superseded = true
			case EndButtonPayload:
				p.Payload = true
			}
			in.Presses = append(in.Presses, p)
		}
	}
	return in
}

// sends reports whether entry e is a send's: a send step (a buttons step's first entry, not
// its resumption) that called the provider, successfully or not.
func sends(e Entry) bool {
	switch e.Type {
	case StepSendText, StepSendMedia, StepSendTemplate, StepButtons:
	default:
		return false
	}
	if _, ok := e.Outcome["message_id"]; ok {
		return true
	}
	if e.Error == nil {
		return false
	}
	switch e.Error.Kind {
	case "blocked", "outside_window", "rejected", "invalid_credentials", "rate_limited", "unavailable":
		return true
	}
	return false
}

func recordedFact(item any) (SimFact, bool) {
	m, ok := item.(map[string]any)
	if !ok {
		return SimFact{}, false
	}
	f := SimFact{}
	f.Op, _ = m["op"].(string)
	f.Result, _ = m["result"].(bool)
	f.LabelID, _ = m["label_id"].(string)
	f.FieldID, _ = m["field_id"].(string)
	if v, ok := m["value"]; ok {
		f.Value, _ = json.Marshal(v)
	}
	return f, f.Op != "" && (f.LabelID != "" || f.FieldID != "")
}

func intOf(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	}
	return -1
}
