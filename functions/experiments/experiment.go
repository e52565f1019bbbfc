// Package experiments serves a bot's A/B experiments: definitions whose variants show a
// reaction version, a content document or a popup to a weighted share of subscribers, a
// lifecycle (draft, running, paused, completed) with frozen versions of the definition,
// deterministic assignment of subscribers to variants (each assignment records an
// experiment_exposure event in the bot's event log), reports of conversions to a goal
// event, revenue per currency and significance against the control, cohorts of a variant
// saved as segments, and the choice of a winner. docs/experiments.md records the decisions.
package experiments

import (
	"time"
)

// Status is where an experiment is in its life (lifecycle.go has the transitions).
type Status string

// The statuses of an experiment.
const (
	Draft     Status = "draft"
	Running   Status = "running"
	Paused    Status = "paused"
	Completed Status = "completed"
)

// Statuses lists every status, for the list filter.
func Statuses() []Status { return []Status{Draft, Running, Paused, Completed} }

// SubjectType is what kind of thing a variant shows.
type SubjectType string

// The subject types.
const (
	// SubjectReactionVersion is one published version of a reaction.
	SubjectReactionVersion SubjectType = "reaction_version"
	// SubjectContent is a content document: a given published version, or its newest.
	SubjectContent SubjectType = "content"
	// SubjectPopup is a popup.
	SubjectPopup SubjectType = "popup"
)

// Subject is what a variant shows. Which members it has depends on Type: reaction_id and
// version for a reaction version, document_id and an optional version for content,
// popup_id for a popup.
type Subject struct {
	Type       SubjectType `json:"type"`
	ReactionID *string     `json:"reaction_id,omitempty"`
	DocumentID *string     `json:"document_id,omitempty"`
	PopupID    *string     `json:"popup_id,omitempty"`
	Version    *int64      `json:"version,omitempty"`
}

// Variant is one arm of an experiment.
type Variant struct {
	// ID is the variant's stable key ("a", "control", "new_copy"): reports, assignments and
	// the winner name it.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Weight is the variant's share of the subscribers assigned, relative to the sum of the
	// weights. A weight of 0 assigns no one to the variant.
	Weight  int     `json:"weight"`
	Subject Subject `json:"subject"`
}

// Op is how a goal filter compares an event property to its value: the comparisons of
// funnel steps' filters, with the same meaning (docs/funnels.md).
type Op string

// The filter operators. A property the event does not have passes neq, not_in and
// not_exists, and no other.
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

// Filter is a condition on a property of the goal event.
type Filter struct {
	Property string `json:"property"`
	Op       Op     `json:"op"`
	// Value is a string, a number or a boolean; a list of them for in and not_in; a number
	// for gt, gte, lt and lte; a string for contains; absent for exists and not_exists.
	Value any `json:"value,omitempty"`
}

// Goal is the conversion: an event of this name (and these property filters) that a
// subscriber has after their exposure. The revenue of the experiment is the revenue those
// events carry.
type Goal struct {
	Event   string   `json:"event"`
	Filters []Filter `json:"filters"`
}

// Definition is what a version of an experiment freezes: who is assigned to what, and what
// counts as a conversion.
type Definition struct {
	Variants []Variant `json:"variants"`
	// ControlVariantID is the variant the others are compared with.
	ControlVariantID string `json:"control_variant_id"`
	Goal             Goal   `json:"goal"`
	// Salt is mixed into the assignment hash: two experiments over the same subscribers
	// split them independently, and a new salt reshuffles an experiment's assignments.
	Salt string `json:"salt"`
}

// Experiment is an experiment as the API shows it.
type Experiment struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Hypothesis *string `json:"hypothesis"`
	Status     Status  `json:"status"`
	// Revision counts every change, transitions included; mutations send it back as
	// expected_revision.
	Revision int64 `json:"revision"`
	// Version is the number of the version the definition below is (0 while a draft: a
	// draft has no version). Starting freezes version 1; each change of the definition of a
	// running or paused experiment freezes the next.
	Version int64 `json:"version"`
	Definition
	// WinnerVariantID is the variant chosen as the winner (null until one is).
	WinnerVariantID *string    `json:"winner_variant_id"`
	StartedAt       *time.Time `json:"started_at"`
	CompletedAt     *time.Time `json:"completed_at"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
}

// Version is a frozen definition of an experiment.
type Version struct {
	ExperimentID string `json:"experiment_id"`
	Number       int64  `json:"version"`
	Definition
	// Revision is the experiment's revision that froze this version.
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
}

// variant returns the definition's variant id and its index, -1 when there is none.
func (d Definition) variant(id string) (Variant, int) {
	for i, v := range d.Variants {
		if v.ID == id {
			return v, i
		}
	}
	return Variant{}, -1
}

// Limits of an experiment: each keeps an experiment a few kilobytes, and a bot's
// experiments few enough to list.
const (
	MaxExperiments   = 200
	MaxVersions      = 50
	MaxNameLen       = 200
	MaxHypothesisLen = 2000
	MinVariants      = 2
	MaxVariants      = 8
	MaxVariantIDLen  = 32
	MaxVariantName   = 100
	MaxWeight        = 10000
	MaxFilters       = 10
	MaxInValues      = 50
	MaxSaltLen       = 64
	MaxIDLen         = 64 // a subject's reaction, document or popup id
)
