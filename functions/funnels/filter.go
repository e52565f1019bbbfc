package funnels

import "strings"

// matcher tells whether an event's properties pass a step's filters.
type matcher func(props map[string]any) bool

// compile turns a step's filters into one matcher: all of them must pass.
func compile(filters []Filter) matcher {
	if len(filters) == 0 {
		return nil
	}
	ms := make([]matcher, len(filters))
	for i, f := range filters {
		ms[i] = compileFilter(f)
	}
	return func(props map[string]any) bool {
		for _, m := range ms {
			if !m(props) {
				return false
			}
		}
		return true
	}
}

// compileFilter is one filter's matcher. Comparisons are strict about types: the number 5
// does not equal the string "5" (docs/funnels.md).
func compileFilter(f Filter) matcher {
	key := f.Property
	switch f.Op {
	case OpEq:
		return func(p map[string]any) bool { v, ok := p[key]; return ok && equal(v, f.Value) }
	case OpNeq:
		return func(p map[string]any) bool { v, ok := p[key]; return !ok || !equal(v, f.Value) }
	case OpIn, OpNotIn:
		list, _ := f.Value.([]any)
		in := f.Op == OpIn
		return func(p map[string]any) bool {
			v, ok := p[key]
			if !ok {
				return !in
			}
			for _, w := range list {
				if equal(v, w) {
					return in
				}
			}
			return !in
		}
	case OpExists:
		return func(p map[string]any) bool { _, ok := p[key]; return ok }
	case OpNotExists:
		return func(p map[string]any) bool { _, ok := p[key]; return !ok }
	case OpGt, OpGte, OpLt, OpLte:
		bound, _ := f.Value.(float64)
		op := f.Op
		return func(p map[string]any) bool {
			n, ok := number(p[key])
			if !ok {
				return false
			}
			switch op {
			case OpGt:
				return n > bound
			case OpGte:
				return n >= bound
			case OpLt:
				return n < bound
			default:
				return n <= bound
			}
		}
	case OpContains:
		sub, _ := f.Value.(string)
		return func(p map[string]any) bool { s, ok := p[key].(string); return ok && strings.Contains(s, sub) }
	}
	return func(map[string]any) bool { return false } // validation refuses every other op
}

// equal compares a property's value with a filter's: strings with strings, numbers with
// numbers, booleans with booleans.
func equal(v, want any) bool {
	switch w := want.(type) {
	case string:
		s, ok := v.(string)
		return ok && s == w
	case bool:
		b, ok := v.(bool)
		return ok && b == w
	case float64:
		n, ok := number(v)
		return ok && n == w
	}
	return false
}

// number reads a numeric property. Logs decoded from JSON hold float64; an emitter in the
// same process may have appended an integer.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case float32:
		return float64(n), true
	}
	return 0, false
}
