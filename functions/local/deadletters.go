package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/store"
)

// queueDeadLetters is `admin queue dead-letters`: the messages of the work queue that failed
// every delivery (a conversation step whose provider stayed down, a job step that kept
// failing), oldest first. Bodies are not printed: an inbound update holds personal data.
func queueDeadLetters(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
	limit := fs.Int("limit", 100, "at most this many (1 to 1000)")
	return func(ctx context.Context, a *app) (any, error) {
		if *limit < 1 || *limit > store.MaxQueryLimit {
			return nil, usageError(fmt.Sprintf("--limit must be 1 to %d", store.MaxQueryLimit))
		}
		list, next, err := a.jobs.DeadLetters(ctx, *limit, "")
		if err != nil {
			return nil, err
		}
		type letter struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			Attempts  int    `json:"attempts"`
			SentAt    string `json:"sent_at"`
			DeadAt    string `json:"dead_at"`
			LastError string `json:"last_error"`
		}
		out := []letter{}
		for _, d := range list {
			out = append(out, letter{ID: d.Message.ID, Type: d.Message.Type, Attempts: d.Message.Attempt,
				SentAt: d.SentAt.UTC().Format(time.RFC3339), DeadAt: d.DeadAt.UTC().Format(time.RFC3339), LastError: d.LastError})
		}
		return map[string]any{"data": out, "more": next != ""}, nil
	}
}

// queueRedrive is `admin queue redrive --id ID`: it puts a dead letter back on the queue with
// a fresh attempt count, once its cause is fixed. A conversation resumes at the step that
// failed.
func queueRedrive(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
	id := fs.String("id", "", "the dead letter's id (from admin queue dead-letters)")
	return func(ctx context.Context, a *app) (any, error) {
		if *id == "" {
			return nil, usageError("--id is required")
		}
		err := a.jobs.Redrive(ctx, *id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("dead letter %s not found", *id)
		}
		if err != nil {
			return nil, err
		}
		return map[string]string{"redriven": *id}, nil
	}
}
