package experiments

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/text"
)

var (
	variantIDRe = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)
	saltRe      = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	// subjectIDRe bounds the ids a subject names to what any of the families mints; the
	// family that owns the subject says whether it exists.
	subjectIDRe = regexp.MustCompile(`^[a-z]{1,8}_[0-9a-z]{1,56}$`)
)

// checkName adds the problems of an experiment's name.
func checkName(p *httpapi.Problems, name string) {
	switch {
	case strings.TrimSpace(name) == "":
		p.Add("name", "is required")
	case utf8.RuneCountInString(name) > MaxNameLen:
		p.Add("name", "at most %d characters", MaxNameLen)
	default:
		p.Text("name", name, text.Name)
	}
}

// checkHypothesis adds the problems of a hypothesis ("" removes it: never stored).
func checkHypothesis(p *httpapi.Problems, h string) {
	if utf8.RuneCountInString(h) > MaxHypothesisLen {
		p.Add("hypothesis", "at most %d characters", MaxHypothesisLen)
		return
	}
	p.Text("hypothesis", h, text.Message)
}

// checkDefinition adds every problem of a definition's shape. Whether the subjects exist
// in the bot is asked afterwards (Subjects), of a definition without problems.
func checkDefinition(p *httpapi.Problems, d Definition) {
	n := len(d.Variants)
	if n < MinVariants || n > MaxVariants {
		p.Add("variants", "needs %d to %d variants, has %d", MinVariants, MaxVariants, n)
	}
	seen := map[string]bool{}
	total := 0
	for i, v := range d.Variants {
		at := fmt.Sprintf("variants[%d]", i)
		switch {
		case !variantIDRe.MatchString(v.ID):
			p.Add(at+".id", "must be 1 to %d characters of a-z, 0-9, _ and -", MaxVariantIDLen)
		case seen[v.ID]:
			p.Add(at+".id", "%q is the id of an earlier variant", v.ID)
		}
		seen[v.ID] = true
		switch {
		case strings.TrimSpace(v.Name) == "":
			p.Add(at+".name", "is required")
		case utf8.RuneCountInString(v.Name) > MaxVariantName:
			p.Add(at+".name", "at most %d characters", MaxVariantName)
		default:
			p.Text(at+".name", v.Name, text.Name)
		}
		if v.Weight < 0 || v.Weight > MaxWeight {
			p.Add(at+".weight", "must be an integer from 0 to %d", MaxWeight)
		} else {
			total += v.Weight
		}
		checkSubject(p, at+".subject", v.Subject)
	}
	if n > 0 && total == 0 {
		p.Add("variants", "the weights sum to 0: no one would be assigned")
	}
	if c, i := d.variant(d.ControlVariantID); i < 0 {
		p.Add("control_variant_id", "%q is not the id of a variant", d.ControlVariantID)
	} else if c.Weight == 0 {
		p.Add("control_variant_id", "the control variant has weight 0: nothing to compare with")
	}
	checkGoal(p, d.Goal)
	if !saltRe.MatchString(d.Salt) {
		p.Add("salt", "must be 1 to %d characters of A-Z, a-z, 0-9, _ and -", MaxSaltLen)
	}
}

// checkSubject adds the problems of a subject's shape: its type and exactly the members
// that type takes.
func checkSubject(p *httpapi.Problems, at string, s Subject) {
	id := func(name string, v *string) {
		switch {
		case v == nil:
			p.Add(at+"."+name, "is required for a %s subject", s.Type)
		case !subjectIDRe.MatchString(*v):
			p.Add(at+"."+name, "is not an id")
		}
	}
	absent := func(name string, given bool) {
		if given {
			p.Add(at+"."+name, "is not a member of a %s subject", s.Type)
		}
	}
	switch s.Type {
	case SubjectReactionVersion:
		id("reaction_id", s.ReactionID)
		if s.Version == nil {
			p.Add(at+".version", "is required for a reaction_version subject")
		}
		absent("document_id", s.DocumentID != nil)
		absent("popup_id", s.PopupID != nil)
	case SubjectContent:
		id("document_id", s.DocumentID)
		absent("reaction_id", s.ReactionID != nil)
		absent("popup_id", s.PopupID != nil)
	case SubjectPopup:
		id("popup_id", s.PopupID)
		absent("reaction_id", s.ReactionID != nil)
		absent("document_id", s.DocumentID != nil)
		absent("version", s.Version != nil)
	default:
		p.Add(at+".type", "must be reaction_version, content or popup")
		return
	}
	if s.Version != nil && *s.Version < 1 {
		p.Add(at+".version", "must be a version number: an integer of at least 1")
	}
}

// checkGoal adds the problems of a goal.
func checkGoal(p *httpapi.Problems, g Goal) {
	switch err := eventlog.CheckName(g.Event); {
	case err != nil:
		p.Add("goal.event", "%s", err.Error())
	case g.Event == ExposureEvent:
		p.Add("goal.event", "%s is what assignments record; choose the event that means a conversion", ExposureEvent)
	}
	if len(g.Filters) > MaxFilters {
		p.Add("goal.filters", "at most %d filters", MaxFilters)
		return
	}
	for i, f := range g.Filters {
		at := fmt.Sprintf("goal.filters[%d]", i)
		if err := eventlog.CheckPropertyKey(f.Property); err != nil {
			p.Add(at+".property", "%s", err.Error())
		}
		checkFilter(p, at, f)
	}
}

// checkFilter adds the problems of a filter's op and value; at is the filter's path.
func checkFilter(p *httpapi.Problems, path string, f Filter) {
	at := path + ".value"
	scalar := func(field string, v any) {
		if v == nil {
			p.Add(field, "must be a string, a number or a boolean")
		} else if err := eventlog.CheckPropertyValue(v); err != nil {
			p.Add(field, "%s", err.Error())
		}
	}
	switch f.Op {
	case OpEq, OpNeq:
		if f.Value == nil {
			p.Add(at, "is required with %s: a string, a number or a boolean", f.Op)
		} else {
			scalar(at, f.Value)
		}
	case OpIn, OpNotIn:
		list, ok := f.Value.([]any)
		switch {
		case !ok:
			p.Add(at, "must be a list of strings, numbers or booleans with %s", f.Op)
		case len(list) == 0 || len(list) > MaxInValues:
			p.Add(at, "has %d values; %s takes 1 to %d", len(list), f.Op, MaxInValues)
		default:
			for k, v := range list {
				scalar(fmt.Sprintf("%s[%d]", at, k), v)
			}
		}
	case OpExists, OpNotExists:
		if f.Value != nil {
			p.Add(at, "must be left out with %s", f.Op)
		}
	case OpGt, OpGte, OpLt, OpLte:
		if v, ok := f.Value.(float64); !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			p.Add(at, "must be a number with %s", f.Op)
		}
	case OpContains:
		if v, ok := f.Value.(string); !ok {
			p.Add(at, "must be a string with contains")
		} else {
			scalar(at, v)
		}
	default:
		p.Add(path+".op", "must be one of eq, neq, in, not_in, exists, not_exists, gt, gte, lt, lte, contains")
	}
}

// matches reports whether an event's properties pass every filter.
func matches(filters []Filter, props map[string]any) bool {
	for _, f := range filters {
		if !match(f, props) {
			return false
		}
	}
	return true
}

func match(f Filter, props map[string]any) bool {
	v, ok := props[f.Property]
	switch f.Op {
	case OpEq:
		return ok && equal(v, f.Value)
	case OpNeq:
		return !ok || !equal(v, f.Value)
	case OpIn, OpNotIn:
		list, _ := f.Value.([]any)
		in := false
		for _, w := range list {
			if ok && equal(v, w) {
				in = true
				break
			}
		}
		return in == (f.Op == OpIn)
	case OpExists:
		return ok
	case OpNotExists:
		return !ok
	case OpContains:
		s, isString := v.(string)
		sub, _ := f.Value.(string)
		return isString && strings.Contains(s, sub)
	}
	x, isNumber := number(v)
	y, _ := f.Value.(float64)
	if !ok || !isNumber {
		return false
	}
	switch f.Op {
	case OpGt:
		return x > y
	case OpGte:
		return x >= y
	case OpLt:
		return x < y
	case OpLte:
		return x <= y
	}
	return false
}

// equal compares two property values; values of kinds a property cannot hold are equal to
// nothing (and never compared with ==, which panics on them).
func equal(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}
