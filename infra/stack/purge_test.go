package stack

import (
	"slices"
	"testing"
)

// A deleted bot's data is erased by the purge job (docs/purge.md): the bots Lambda deletes
// the bot with its tokens and channels and queues the job; the jobs Lambda runs its steps,
// which query the table and its indexes (Table covers both) and delete in transactions.
func TestAccessAllowsThePurge(t *testing.T) {
	t.Parallel()
	need := map[string]map[Resource][]string{
		"bots": {Table: {"dynamodb:Query", "dynamodb:GetItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"},
			JobsQueue: {"sqs:SendMessage"}},
		"jobs": {Table: {"dynamodb:Query", "dynamodb:GetItem", "dynamodb:DeleteItem"}, JobsQueue: {"sqs:SendMessage"}},
	}
	access := Access()
	for lambda, grants := range need {
		for res, actions := range grants {
			var have []string
			for _, g := range access[lambda] {
				if g.On == res {
					have = append(have, g.Actions...)
				}
			}
			for _, a := range actions {
				if !slices.Contains(have, a) {
					t.Errorf("%s lacks %s for the purge", lambda, a)
				}
			}
		}
	}
}
