package reactions

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/text"
)

// report collects a request's problems in two classes: shape problems (400
// validation_failed: a value wrong on its own) and flaws (422 invalid_steps: the flow cannot
// run as written: unknown types, dangling targets, cycles without a wait, references to
// labels, fields or reactions the bot does not have, values of the wrong type). Shape
// problems win: a flow is only judged once its parts are well formed.
type report struct {
	shape httpapi.Problems
	flaws httpapi.Problems
}

func (r *report) err() error {
	if len(r.shape) > 0 {
		return r.shape.Err()
	}
	if len(r.flaws) > 0 {
		// Flaws are found pass by pass; clients read them in document order.
		slices.SortStableFunc(r.flaws, func(a, b httpapi.FieldError) int { return strings.Compare(sortKey(a.Field), sortKey(b.Field)) })
		return invalidSteps(r.flaws)
	}
	return nil
}

// indexRe finds the array indexes of a path.
var indexRe = regexp.MustCompile(`\[(\d+)\]`)

// sortKey makes paths sort in document order: steps[2] before steps[10].
func sortKey(path string) string {
	return indexRe.ReplaceAllStringFunc(path, func(m string) string {
		return fmt.Sprintf("[%06s]", m[1:len(m)-1])
	})
}

// invalidSteps is the 422 listing every flaw with the path of the bad part.
func invalidSteps(flaws httpapi.Problems) error {
	detail := flaws[0].Field + ": " + flaws[0].Message
	if len(flaws) > 1 {
		detail += fmt.Sprintf(" (and %d more)", len(flaws)-1)
	}
	return httpapi.E(httpapi.KindUnprocessable, "invalid_steps", detail).With("errors", []httpapi.FieldError(flaws))
}

func itoa(i int) string { return strconv.Itoa(i) }

// join appends a field name to a path prefix ("" or ending in ".").
func join(prefix, name string) string { return prefix + name }

// use is a reference from a content to something outside it, with the path that makes it.
type use struct {
	path, id string
}

// fieldUse is a reference to a custom field and what is done with it.
type fieldUse struct {
	use
	// op is "set", "clear", "param" (a template parameter reads it: any type will do) or a
	// condition operator.
	op        string
	value     json.RawMessage
	valuePath string
}

// templateUse is a send_template step's template, checked against the bot's catalog at
// publish; path is the step's.
type templateUse struct {
	path, name, language string
	params               int
}

// uses are what one content refers to outside itself.
type uses struct {
	labels    []use
	fields    []fieldUse
	reactions []use
	templates []templateUse
}

// reactionIDs returns the distinct reactions referred to, in order of first use.
func (u uses) reactionIDs() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range u.reactions {
		if !seen[r.id] {
			seen[r.id] = true
			out = append(out, r.id)
		}
	}
	return out
}

// normalize trims the name and fills step defaults.
func (c *Content) normalize() {
	c.Name = strings.TrimSpace(c.Name)
	for i := range c.Steps {
		c.Steps[i].normalize()
	}
}

// check validates c on its own (shape, types, step targets, cycles) and returns what it
// refers to outside itself. prefix is the path of c ("" for a request's top level); self is
// the id (or bundle key) of c's own reaction, "" while it has none, so that a goto to itself
// counts as a jump to its first step.
func (c Content) check(r *report, prefix, self string) uses {
	switch {
	case c.Name == "":
		r.shape.Add(join(prefix, "name"), "is required")
	case utf8.RuneCountInString(c.Name) > MaxNameLen:
		r.shape.Add(join(prefix, "name"), "must be at most %d characters", MaxNameLen)
	default:
		r.shape.Text(join(prefix, "name"), c.Name, text.Name)
	}
	c.Trigger.check(r, join(prefix, "trigger"))
	if len(c.Steps) > MaxSteps {
		r.shape.Add(join(prefix, "steps"), "must have at most %d steps", MaxSteps)
		return uses{}
	}
	if b, err := json.Marshal(c); err == nil && len(b) > MaxContentBytes {
		r.shape.Add(join(prefix, "steps"), "the reaction takes %d bytes as JSON; at most %d", len(b), MaxContentBytes)
	}

	index := map[string]int{}
	for i, s := range c.Steps {
		sp := join(prefix, "steps["+itoa(i)+"]")
		switch {
		case s.ID == "":
			r.shape.Add(sp+".id", "is required")
		case len(s.ID) > MaxStepIDLen || !stepIDRe.MatchString(s.ID):
			r.shape.Add(sp+".id", "must be 1 to %d characters of A-Z a-z 0-9 _ -", MaxStepIDLen)
		default:
			if j, dup := index[s.ID]; dup {
				r.shape.Add(sp+".id", "repeats the id of steps[%d]; step ids are unique within a reaction", j)
			} else {
				index[s.ID] = i
			}
		}
		s.check(r, sp)
	}
	if len(r.shape) > 0 {
		return uses{}
	}

	var u uses
	if c.Trigger.Type == TriggerLabelAdded {
		u.labels = append(u.labels, use{join(prefix, "trigger.label_id"), c.Trigger.LabelID})
	}
	g := newGraph(len(c.Steps))
	target := func(from int, path, id string) {
		if j, ok := index[id]; ok {
			g.edge(from, j, path)
		} else {
			r.flaws.Add(path, "no step has the id %q in this reaction", id)
		}
	}
	for i, s := range c.Steps {
		sp := join(prefix, "steps["+itoa(i)+"]")
		switch s.Type {
		case StepSendText, StepSendMedia, StepSendTemplate, StepSetField, StepClearField, StepAddLabel, StepRemoveLabel:
			if i+1 < len(c.Steps) {
				g.edge(i, i+1, sp)
			}
		case StepButtons:
			// A button continues the run only when pressed: the subscriber acts, so a loop
			// through a button is a menu, not a spin. Its target must still exist.
			for k, b := range s.Buttons {
				if b.StepID != "" {
					if _, ok := index[b.StepID]; !ok {
						r.flaws.Add(sp+".buttons["+itoa(k)+"].step_id", "no step has the id %q in this reaction", b.StepID)
					}
				}
			}
		case StepCondition:
			target(i, sp+".then", s.Then)
			target(i, sp+".else", s.Else)
		case StepGoto:
			switch {
			case s.StepID != "":
				target(i, sp+".step_id", s.StepID)
			case self != "" && s.ReactionID == self:
				g.edge(i, 0, sp+".reaction_id")
			default:
				u.reactions = append(u.reactions, use{sp + ".reaction_id", s.ReactionID})
			}
		}
		// A wait ends the run's turn: what follows runs later, so a loop through it is paced.
		// End, and unknown types, lead nowhere.
		switch s.Type {
		case StepSetField:
			u.fields = append(u.fields, fieldUse{use: use{sp + ".field_id", s.FieldID}, op: "set", value: s.Value, valuePath: sp + ".value"})
		case StepClearField:
			u.fields = append(u.fields, fieldUse{use: use{sp + ".field_id", s.FieldID}, op: "clear"})
		case StepAddLabel, StepRemoveLabel:
			u.labels = append(u.labels, use{sp + ".label_id", s.LabelID})
		case StepSendTemplate:
			u.templates = append(u.templates, templateUse{path: sp, name: s.TemplateName, language: s.TemplateLanguage, params: len(s.Params)})
			for k, p := range s.Params {
				if p.FieldID != "" {
					u.fields = append(u.fields, fieldUse{use: use{sp + ".params[" + itoa(k) + "].field_id", p.FieldID}, op: "param"})
				}
			}
		case StepCondition:
			for k, cond := range s.Conditions {
				cp := sp + ".conditions[" + itoa(k) + "]"
				if cond.LabelID != "" {
					u.labels = append(u.labels, use{cp + ".label_id", cond.LabelID})
				} else {
					u.fields = append(u.fields, fieldUse{use: use{cp + ".field_id", cond.FieldID}, op: cond.Op, value: cond.Value, valuePath: cp + ".value"})
				}
			}
		}
	}
	for _, cyc := range g.cycles() {
		names := make([]string, 0, len(cyc.steps)+1)
		for _, i := range cyc.steps {
			names = append(names, c.Steps[i].ID)
		}
		names = append(names, c.Steps[cyc.steps[0]].ID)
		r.flaws.Add(cyc.path, "closes a cycle without a wait (%s): put a wait step on the loop", strings.Join(names, " -> "))
	}
	return u
}

// world is what references resolve against: a bot's labels, fields and reactions, or a
// bundle's keys.
type world struct {
	labels map[string]bool
	fields map[string]FieldType
	// reaction reports whether a reaction id exists.
	reaction func(id string) (bool, error)
	// where ends the "no such ..." messages: "in this bot" or "among the bundle's labels".
	labelWhere, fieldWhere, reactionWhere string
}

// resolve adds a flaw for every reference of u that w does not have, and for field values
// and operators that do not fit the field's type.
func (u uses) resolve(r *report, w world) error {
	for _, l := range u.labels {
		if !w.labels[l.id] {
			r.flaws.Add(l.path, "no label %q %s", l.id, w.labelWhere)
		}
	}
	for _, f := range u.fields {
		t, ok := w.fields[f.id]
		if !ok {
			r.flaws.Add(f.path, "no custom field %q %s", f.id, w.fieldWhere)
			continue
		}
		if f.op != "set" && f.op != "clear" && f.op != "param" && !opAllows(f.op, t) {
			r.flaws.Add(strings.TrimSuffix(f.path, "field_id")+"op", "%s does not apply to a field of type %s", f.op, t)
			continue
		}
		if f.value != nil {
			if msg := t.checkValue(f.value); msg != "" {
				r.flaws.Add(f.valuePath, "%s", msg)
			}
		}
	}
	known := map[string]bool{}
	for _, ref := range u.reactions {
		ok, seen := known[ref.id]
		if !seen {
			var err error
			if ok, err = w.reaction(ref.id); err != nil {
				return err
			}
			known[ref.id] = ok
		}
		if !ok {
			r.flaws.Add(ref.path, "no reaction %q %s", ref.id, w.reactionWhere)
		}
	}
	return nil
}

// graph is a reaction's steps with the edges along which a run continues at once (without
// waiting for time or for the subscriber).
type graph struct {
	next [][]edge
}

type edge struct {
	to   int
	path string
}

func newGraph(n int) *graph { return &graph{next: make([][]edge, n)} }

func (g *graph) edge(from, to int, path string) {
	g.next[from] = append(g.next[from], edge{to, path})
}

type cycle struct {
	steps []int
	// path is the part of the step that closes the cycle.
	path string
}

// cycles returns one cycle per edge that closes one (a back edge of a depth-first search):
// every loop without a wait or a button press is found.
func (g *graph) cycles() []cycle {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(g.next))
	var stack []int
	var out []cycle
	var visit func(int)
	visit = func(i int) {
		color[i] = grey
		stack = append(stack, i)
		for _, e := range g.next[i] {
			switch color[e.to] {
			case white:
				visit(e.to)
			case grey:
				start := 0
				for k, s := range stack {
					if s == e.to {
						start = k
					}
				}
				out = append(out, cycle{steps: append([]int(nil), stack[start:]...), path: e.path})
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
	}
	for i := range g.next {
		if color[i] == white {
			visit(i)
		}
	}
	return out
}
