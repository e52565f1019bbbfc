package runtime

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/store"
)

// A run suspended by a buttons step is found from the subscriber's next message through a
// pointer: one item per subscriber naming the run, the wait (its entry count) and the step's
// buttons. A subscriber has at most one such run: a newer one supersedes it. The pointer
// expires with the wait (ButtonsWait), after which a press finds nothing to resume.

// pointer is the subscriber's run waiting for a button.
type pointer struct {
	ExecutionID string   `json:"execution_id"`
	Seq         int      `json:"seq"`
	StepID      string   `json:"step_id"`
	Buttons     []Button `json:"buttons"`
	// Targets are the indexes of the steps the buttons resume at (-1: not a step button).
	Targets []int `json:"targets"`
	rev     int64
}

func (r *Runtime) loadPointer(ctx context.Context, bot, sub string) (*pointer, error) {
	it, err := r.store.Get(ctx, buttonsKey(bot, sub))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, err := store.Decode[pointer](it)
	if err != nil {
		return nil, err
	}
	p.rev = it.Revision
	return &p, nil
}

// pointerWrite replaces the subscriber's pointer (at revision prev, 0 for none) with p.
func pointerWrite(bot, sub string, p pointer, prev int64, until time.Time) (store.Write, error) {
	data, err := store.Encode(p)
	if err != nil {
		return store.Write{}, err
	}
	cond := store.RevisionOrAbsent(prev)
	return store.PutOp(store.Item{Key: buttonsKey(bot, sub), Data: data, Revision: prev + 1, ExpiresAt: until}, cond), nil
}

// dropPointer deletes the subscriber's pointer if it is still the one at rev; a newer one
// (another run now waits) stays.
func (r *Runtime) dropPointer(ctx context.Context, bot, sub string, rev int64) {
	if rev == 0 || sub == "" {
		return
	}
	err := r.store.Delete(ctx, buttonsKey(bot, sub), store.RevisionIs(rev))
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		r.log.WarnContext(ctx, "runtime: could not drop a buttons pointer; it expires on its own", "error", err)
	}
}

// titled returns the index of the button whose title is text (ignoring case and outer
// white space), or -1.
func (p *pointer) titled(text string) int {
	t := strings.TrimSpace(text)
	if t == "" {
		return -1
	}
	for i, b := range p.Buttons {
		if b.URL == "" && strings.EqualFold(strings.TrimSpace(b.Title), t) {
			return i
		}
	}
	return -1
}

// resume is the action that continues p's run at button b's step.
func (p *pointer) resume(i int, b Button, quick bool) action {
	step := -1
	if i < len(p.Targets) {
		step = p.Targets[i]
	}
	return action{Kind: actResume, ExecutionID: p.ExecutionID, Seq: p.Seq, PointerRev: p.rev, Step: step,
		Button: &pressed{Index: i, Title: b.Title, StepID: b.StepID, QuickReply: quick}}
}

// Buttons that resume a run carry a payload of the platform's own: "~", the run id without
// its prefix, the wait's entry count and the button's index ("~<26 chars>.<seq>.<i>", at
// most 40 bytes, within Telegram's 64). "~" is outside the characters a reaction's payload
// may use, so it never collides with a button trigger.
const runPayloadPrefix = "~"

func runPayload(exe string, seq, i int) string {
	return runPayloadPrefix + strings.TrimPrefix(exe, "exe_") + "." + strconv.Itoa(seq) + "." + strconv.Itoa(i)
}

func parseRunPayload(s string) (exe string, seq, i int, ok bool) {
	body, found := strings.CutPrefix(s, runPayloadPrefix)
	if !found {
		return "", 0, 0, false
	}
	parts := strings.Split(body, ".")
	if len(parts) != 3 {
		return "", 0, 0, true // ours, but not one we made: resumes nothing
	}
	seq, err1 := strconv.Atoi(parts[1])
	i, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || seq < 1 || i < 0 {
		return "", 0, 0, true
	}
	return "exe_" + parts[0], seq, i, true
}

// channelButtons renders a buttons step's buttons for the channel: payload buttons carry
// their payload, link buttons their URL, step buttons a payload that resumes this run.
func channelButtons(exe string, seq int, bs []Button) []channel.Button {
	out := make([]channel.Button, len(bs))
	for i, b := range bs {
		cb := channel.Button{Title: b.Title}
		switch {
		case b.URL != "":
			cb.URL = b.URL
		case b.StepID != "":
			cb.Payload = runPayload(exe, seq, i)
		default:
			cb.Payload = b.Payload
		}
		out[i] = cb
	}
	return out
}
