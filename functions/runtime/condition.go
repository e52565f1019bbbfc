package runtime

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// evaluate tests a condition step's conditions against the subscriber as the run last saw
// it (docs/reactions.md, "Conditions"). A test on a label or field the bot no longer has is
// false, whatever its operator; a field without a value fails every test but ne and
// is_not_set. details records each test with its bot-authored operands and its result,
// never the subscriber's value.
func (d *driver) evaluate(ctx context.Context, s Step) (bool, []map[string]any, error) {
	return evaluateWith(s, func(c Condition) (bool, error) { return d.test(ctx, c) })
}

// evaluateWith combines a condition step's tests, each run by test, by the step's match (all
// or any), and details them as the trace records them. The runtime tests against the
// subscriber; a simulation against a sample subscriber or recorded results (Simulate).
func evaluateWith(s Step, test func(Condition) (bool, error)) (bool, []map[string]any, error) {
	details := make([]map[string]any, 0, len(s.Conditions))
	all, some := true, false
	for _, c := range s.Conditions {
		ok, err := test(c)
		if err != nil {
			return false, nil, err
		}
		item := map[string]any{"op": c.Op, "result": ok}
		if c.LabelID != "" {
			item["label_id"] = c.LabelID
		} else {
			item["field_id"] = c.FieldID
		}
		if c.Value != nil {
			var v any
			if json.Unmarshal(c.Value, &v) == nil {
				item["value"] = v
			}
		}
		details = append(details, item)
		all = all && ok
		some = some || ok
	}
	if s.Match == "any" {
		return some, details, nil
	}
	return all, details, nil
}

func (d *driver) test(ctx context.Context, c Condition) (bool, error) {
	if c.LabelID != "" {
		if d.labels == nil {
			ids, err := d.r.subs.Labels(ctx, d.rec.BotID)
			if err != nil {
				return false, err
			}
			d.labels = make(map[string]bool, len(ids))
			for _, id := range ids {
				d.labels[id] = true
			}
		}
		return testLabel(c, d.labels[c.LabelID], d.sub.Labels), nil
	}
	f, ok, err := d.field(ctx, c.FieldID)
	if err != nil || !ok {
		return false, err
	}
	return testField(c, f, d.sub.Fields), nil
}

// testLabel is a label test: known says whether the bot still has the label (a test on a
// label it no longer has is false, whatever its operator).
func testLabel(c Condition, known bool, labels []string) bool {
	if !known {
		return false
	}
	return slices.Contains(labels, c.LabelID) == (c.Op == "has")
}

// testField is a test on the field f of a subscriber whose values are fields (keyed by field
// name): a field without a value fails every test but ne and is_not_set.
func testField(c Condition, f Field, fields map[string]any) bool {
	v, set := fields[f.Name]
	set = set && v != nil
	switch c.Op {
	case "is_set":
		return set
	case "is_not_set":
		return !set
	}
	if !set {
		return c.Op == "ne"
	}
	var want any
	if err := json.Unmarshal(c.Value, &want); err != nil {
		return false
	}
	cmp, comparable := compare(f.Type, v, want)
	switch c.Op {
	case "eq":
		return comparable && cmp == 0
	case "ne":
		return !comparable || cmp != 0
	case "gt":
		return comparable && ordered(f.Type) && cmp > 0
	case "gte":
		return comparable && ordered(f.Type) && cmp >= 0
	case "lt":
		return comparable && ordered(f.Type) && cmp < 0
	case "lte":
		return comparable && ordered(f.Type) && cmp <= 0
	case "contains":
		have, ok1 := v.(string)
		sub, ok2 := want.(string)
		return f.Type == "string" && ok1 && ok2 && strings.Contains(strings.ToLower(have), strings.ToLower(sub))
	}
	return false
}

func ordered(t string) bool { return t == "number" || t == "datetime" }

// compare orders a subscriber's value against a condition's, by the field's type: numbers
// by value, datetimes as instants, strings and booleans by equality only.
func compare(t string, have, want any) (int, bool) {
	switch t {
	case "number":
		a, ok1 := have.(float64)
		b, ok2 := want.(float64)
		if !ok1 || !ok2 {
			return 0, false
		}
		switch {
		case a < b:
			return -1, true
		case a > b:
			return 1, true
		}
		return 0, true
	case "datetime":
		a, ok1 := instant(have)
		b, ok2 := instant(want)
		if !ok1 || !ok2 {
			return 0, false
		}
		return a.Compare(b), true
	case "string":
		a, ok1 := have.(string)
		b, ok2 := want.(string)
		if !ok1 || !ok2 || a != b {
			return 1, ok1 && ok2
		}
		return 0, true
	case "boolean":
		a, ok1 := have.(bool)
		b, ok2 := want.(bool)
		if !ok1 || !ok2 || a != b {
			return 1, ok1 && ok2
		}
		return 0, true
	}
	return 0, false
}

func instant(v any) (time.Time, bool) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

// field returns the bot's custom field of that id, ok false when the bot no longer has it;
// the bot's fields are read once per handler.
func (d *driver) field(ctx context.Context, id string) (Field, bool, error) {
	if d.fields == nil {
		list, err := d.r.subs.Fields(ctx, d.rec.BotID)
		if err != nil {
			return Field{}, false, err
		}
		d.fields = make(map[string]Field, len(list))
		for _, f := range list {
			d.fields[f.ID] = f
		}
	}
	f, ok := d.fields[id]
	return f, ok, nil
}
