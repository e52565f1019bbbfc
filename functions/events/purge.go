package events

import (
	"context"
	"encoding/json"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
)

// PurgeStep erases a deleted bot's events and their aggregates (job purge.Job): one bounded
// DeleteBot call per step, until the log reports none left.
func PurgeStep(log eventlog.Log) jobs.Step {
	return func(ctx context.Context, raw json.RawMessage, _ string) (string, bool, error) {
		p, err := purge.DecodePayload(raw)
		if err != nil {
			return "", false, err
		}
		done, err := log.DeleteBot(ctx, p.BotID)
		if err != nil || done {
			return "", done, err
		}
		return "more", false, nil
	}
}
