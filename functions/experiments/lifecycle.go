package experiments

import (
	"slices"

	"github.com/botplatform/api/shared/httpapi"
)

// Action is what a client does to an experiment's status.
type Action string

// The actions and the statuses each applies to. Every other combination answers 409
// invalid_transition with the current status (winner on an experiment that has one answers
// 409 winner_already_selected):
//
//	draft            → running    start: freezes version 1
//	running          → paused     pause: assignments answer 409 until resumed
//	paused           → running    resume
//	running, paused  → completed  complete
//	running, paused  → completed  winner: records the winning variant
//	draft, completed → (deleted)  delete
//
// Completed is final. A draft's definition changes freely; a running or paused
// experiment's definition changes make a new version; a completed experiment does not change.
const (
	ActionStart    Action = "start"
	ActionPause    Action = "pause"
	ActionResume   Action = "resume"
	ActionComplete Action = "complete"
	ActionWinner   Action = "winner"
	ActionDelete   Action = "delete"
)

// from lists, for each action, the statuses it applies to.
var from = map[Action][]Status{
	ActionStart:    {Draft},
	ActionPause:    {Running},
	ActionResume:   {Paused},
	ActionComplete: {Running, Paused},
	ActionWinner:   {Running, Paused},
	ActionDelete:   {Draft, Completed},
}

// to is the status each transition leads to.
var to = map[Action]Status{
	ActionStart:    Running,
	ActionPause:    Paused,
	ActionResume:   Running,
	ActionComplete: Completed,
	ActionWinner:   Completed,
}

var pastTense = map[Action]string{
	ActionStart: "started", ActionPause: "paused", ActionResume: "resumed",
	ActionComplete: "completed", ActionWinner: "given a winner", ActionDelete: "deleted",
}

// can is nil when action applies to e, else its 409.
func can(action Action, e Experiment) error {
	if slices.Contains(from[action], e.Status) {
		return nil
	}
	if action == ActionWinner && e.WinnerVariantID != nil {
		return httpapi.Errorf(httpapi.KindConflict, "winner_already_selected", "the experiment's winner is %q already", *e.WinnerVariantID).
			With("winner_variant_id", *e.WinnerVariantID).With("state", e.Status)
	}
	return httpapi.Errorf(httpapi.KindConflict, "invalid_transition", "a %s experiment cannot be %s", e.Status, pastTense[action]).
		With("state", e.Status)
}
