// Package funnels serves saved funnel definitions and their reports over a bot's event log
// (shared/eventlog): how many subscribers went through ordered steps within a conversion
// window, the conversion between steps, the median time each step took, broken down by
// channel; and the cohorts of a report (those who stopped at a step), saved as segments
// through an interface the wiring implements. docs/funnels.md states the semantics.
package funnels

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/text"
)

// Bounds of a funnel definition.
const (
	MinSteps          = 2
	MaxSteps          = 10
	MaxFiltersPerStep = 10
	MaxInValues       = 50
	MaxNameLen        = 200
	// MaxFunnels bounds how many funnels one bot keeps (409 limit_reached beyond).
	MaxFunnels = 200
	// maxDefinitionBytes bounds a definition's stored JSON: every bound above multiplied
	// out would pass an item's size.
	maxDefinitionBytes = 64 << 10
)

// Op is a filter's comparison.
type Op string

// The filter comparisons. docs/funnels.md says what each matches.
const (
	OpEq        Op = "eq"
	OpNeq       Op = "neq"
	OpIn        Op = "in"
	OpNotIn     Op = "not_in"
	OpExists    Op = "exists"
	OpNotExists Op = "not_exists"
	OpGt        Op = "gt"
	OpGte       Op = "gte"
	OpLt        Op = "lt"
	OpLte       Op = "lte"
	OpContains  Op = "contains"
)

var ops = []Op{OpEq, OpNeq, OpIn, OpNotIn, OpExists, OpNotExists, OpGt, OpGte, OpLt, OpLte, OpContains}

// Filter narrows a step to events whose property compares to value.
type Filter struct {
	Property string `json:"property"`
	Op       Op     `json:"op"`
	// Value is a string, a number or a boolean; a list of them for in and not_in; a number
	// for gt, gte, lt and lte; a string for contains; absent for exists and not_exists.
	Value any `json:"value,omitempty"`
}

// Step is one step of a funnel: an event name and the filters its properties must pass.
type Step struct {
	Event   string   `json:"event"`
	Filters []Filter `json:"filters"`
}

// Funnel is a saved funnel definition.
type Funnel struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Steps []Step `json:"steps"`
	// ConversionWindow is in seconds: every step must follow the entry within it.
	ConversionWindow int64 `json:"conversion_window"`
	Revision         int64 `json:"revision"`
	// DefinitionRevision is the revision at which the steps or the window last changed: a
	// rename moves Revision only, so the cohorts computed from the funnel stay current.
	DefinitionRevision int64     `json:"definition_revision"`
	CreatedAt          time.Time `json:"created_at"`
	UpdatedAt          time.Time `json:"updated_at"`
}

// Window is the funnel's conversion window.
func (f Funnel) Window() time.Duration { return time.Duration(f.ConversionWindow) * time.Second }

// Definition is a create or PATCH body's funnel members; a member left out is left as it
// is (PATCH) or takes its default (create: conversion_window one day).
type Definition struct {
	Name  *string `json:"name"`
	Steps *[]Step `json:"steps"`
	// ConversionWindow is whole seconds or an ISO 8601 duration (window.go).
	ConversionWindow json.RawMessage `json:"conversion_window"`
}

// checkName records the problems of a funnel's name.
func checkName(p *httpapi.Problems, field, name string) {
	switch n := utf8.RuneCountInString(name); {
	case strings.TrimSpace(name) == "":
		p.Add(field, "is required")
	case n > MaxNameLen:
		p.Add(field, "is %d characters; at most %d", n, MaxNameLen)
	default:
		p.Text(field, name, text.Name)
	}
}

// checkSteps records the problems of a funnel's steps; prefix is "steps" or the members'
// path in a body that holds them elsewhere.
func checkSteps(p *httpapi.Problems, field string, steps []Step) {
	if len(steps) < MinSteps || len(steps) > MaxSteps {
		p.Add(field, "has %d steps; a funnel has %d to %d", len(steps), MinSteps, MaxSteps)
		if len(steps) > MaxSteps {
			return
		}
	}
	for i, s := range steps {
		sf := fmt.Sprintf("%s[%d]", field, i)
		if err := eventlog.CheckName(s.Event); err != nil {
			p.Add(sf+".event", "%s", err.Error())
		}
		if len(s.Filters) > MaxFiltersPerStep {
			p.Add(sf+".filters", "has %d filters; at most %d", len(s.Filters), MaxFiltersPerStep)
			continue
		}
		for j, f := range s.Filters {
			checkFilter(p, fmt.Sprintf("%s.filters[%d]", sf, j), f)
		}
	}
}

func checkFilter(p *httpapi.Problems, field string, f Filter) {
	switch {
	case f.Property == "":
		p.Add(field+".property", "is required")
	case len(f.Property) > eventlog.MaxPropertyKey:
		p.Add(field+".property", "is %d bytes; a property name is at most %d", len(f.Property), eventlog.MaxPropertyKey)
	default:
		p.Text(field+".property", f.Property, text.Line)
	}
	vf := field + ".value"
	switch f.Op {
	case OpEq, OpNeq:
		if f.Value == nil {
			p.Add(vf, "is required with %s: a string, a number or a boolean", f.Op)
		} else {
			checkScalar(p, vf, f.Value)
		}
	case OpIn, OpNotIn:
		list, ok := f.Value.([]any)
		switch {
		case !ok:
			p.Add(vf, "must be a list of strings, numbers or booleans with %s", f.Op)
		case len(list) == 0 || len(list) > MaxInValues:
			p.Add(vf, "has %d values; %s takes 1 to %d", len(list), f.Op, MaxInValues)
		default:
			for k, v := range list {
				checkScalar(p, fmt.Sprintf("%s[%d]", vf, k), v)
			}
		}
	case OpExists, OpNotExists:
		if f.Value != nil {
			p.Add(vf, "must be left out with %s", f.Op)
		}
	case OpGt, OpGte, OpLt, OpLte:
		if n, ok := f.Value.(float64); !ok || math.IsInf(n, 0) {
			p.Add(vf, "must be a number with %s", f.Op)
		}
	case OpContains:
		if s, ok := f.Value.(string); !ok || s == "" {
			p.Add(vf, "must be a non-empty string with contains")
		} else {
			checkScalar(p, vf, s)
		}
	default:
		p.Add(field+".op", "must be one of %s", joinOps())
	}
}

// checkScalar records a value that is not a string, a number or a boolean, or a string
// longer than a property value can be (it could never match).
func checkScalar(p *httpapi.Problems, field string, v any) {
	switch x := v.(type) {
	case string:
		if len(x) > eventlog.MaxPropertyString {
			p.Add(field, "is %d bytes; a property value is at most %d", len(x), eventlog.MaxPropertyString)
		} else {
			p.Text(field, x, text.Message)
		}
	case float64, bool:
	default:
		p.Add(field, "must be a string, a number or a boolean")
	}
}

func joinOps() string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = string(o)
	}
	return strings.Join(s, ", ")
}

// normalize spells empty filter lists as [] (never null).
func normalize(steps []Step) []Step {
	for i := range steps {
		if steps[i].Filters == nil {
			steps[i].Filters = []Filter{}
		}
	}
	return steps
}
