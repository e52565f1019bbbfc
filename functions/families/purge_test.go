package families

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/functions/collections"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite"
)

func TestPurgeOrder(t *testing.T) {
	t.Parallel()
	names := family.Compose(testEnv(t), All()...).PurgeOrder()
	require.GreaterOrEqual(t, len(names), 2)
	assert.Equal(t, []string{"channels", "subscribers"}, names[:2], "channels (they take webhooks) and personal data first")
	assert.Equal(t, "emaildomains", names[len(names)-1], "the one step that waits for a provider (SES) last")
	for _, f := range []string{"requestlogs", "collections", "reactions", "stats"} {
		assert.Contains(t, names, f, "every family that stores bot data purges it")
	}
	for i, n := range names {
		assert.NotContains(t, names[i+1:], n, "once each")
	}
}

// docs/purge.md lists every family the purge runs, in the order it runs them.
func TestPurgeOrderIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/purge.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(doc), "| family | what is erased |\n|---|---|\n")
	require.True(t, ok, "the table of docs/purge.md")
	var documented []string
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		documented = append(documented, strings.TrimSpace(strings.Split(line, "|")[1]))
	}
	assert.Equal(t, family.Compose(testEnv(t), All()...).PurgeOrder(), documented)
}

// Deleting a bot through the environment the processes build starts the purge job, whose
// steps, delivered as the workers would, erase every family's data of the bot.
func TestDeletedBotIsPurged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	q := &queuetest.Sender{}
	env := familytest.Env(t, family.Deps{Store: st, Secrets: key, Queue: q, Tenancy: bots.Tenancy})
	mux, err := family.Compose(env, All()...).QueueMux()
	require.NoError(t, err)
	botService := bots.NewService(env.Store, env.Auth, env.Now)

	acct, _, err := env.Auth.CreateAccount(ctx, "Acme")
	require.NoError(t, err)
	var botIDs []string
	for range 2 {
		b, err := botService.Create(ctx, acct.ID, "b", nil)
		require.NoError(t, err)
		botIDs = append(botIDs, b.ID)
		subs := subscribers.NewService(st, env.Now, nil)
		for i := range 40 {
			first := fmt.Sprintf("Ann %d", i)
			_, _, err := subs.Upsert(ctx, b.ID, subscribers.ChannelTelegram, fmt.Sprint(i), subscribers.Changes{FirstName: &first})
			require.NoError(t, err)
		}
		_, err = subs.CreateLabel(ctx, b.ID, "VIP")
		require.NoError(t, err)
		cols := collections.NewService(st, env.Jobs, env.Now, env.Log)
		c, err := cols.CreateCollection(ctx, b.ID, "Things", []collections.FieldInput{{Name: ptr("n"), Type: ptr("number"), Indexed: ptr(true)}})
		require.NoError(t, err)
		_, err = cols.CreateRecord(ctx, b.ID, c.ID, nil, map[string]json.RawMessage{"n": json.RawMessage("1")})
		require.NoError(t, err)
		require.NoError(t, env.RequestLog.RecordRequest(ctx, httpapi.RequestRecord{Time: time.Now(), BotID: b.ID, Method: "GET", Route: "GET /api/bots/{botID}", Status: 200}))
	}
	deleted, kept := botIDs[0], botIDs[1]
	before, err := st.Mentioning(ctx, kept)
	require.NoError(t, err)

	svc := botService.WithPurge(env.Outbox, env.Log)
	require.NoError(t, svc.Delete(ctx, acct.ID, deleted, nil))
	started := q.Take()
	require.Len(t, started, 2)
	assert.Zero(t, started[0].Delay)
	assert.InDelta(t, float64(purge.SweepDelay), float64(started[1].Delay), float64(time.Second),
		"the second pass (its delay counted from the deletion's commit)")

	for _, first := range started {
		pending := []queue.Message{first}
		for steps := 0; len(pending) > 0; steps++ {
			require.Less(t, steps, 100)
			require.NoError(t, mux.HandleMessage(ctx, pending[0]))
			pending = append(pending[1:], q.Take()...)
		}
		left, err := st.Mentioning(ctx, deleted)
		require.NoError(t, err)
		assert.Empty(t, left, "nothing of the deleted bot remains")
	}
	after, err := st.Mentioning(ctx, kept)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the other bot keeps everything")
}

func TestPurgeStepResumesByFamilyName(t *testing.T) {
	t.Parallel()
	composed := family.Compose(testEnv(t), All()...)
	step := func(payload json.RawMessage, cursor string) (string, bool, error) {
		st, err := composed.Registry().RunStep(t.Context(), jobs.State{Kind: purge.Job, Payload: payload, Cursor: cursor})
		return st.Cursor, st.Done, err
	}
	payload := json.RawMessage(`{"account_id":"acct_1","bot_id":"bot_1"}`)

	list := composed.PurgeOrder()
	next, done, err := step(payload, `{"family":"`+list[len(list)-1]+`"}`)
	require.NoError(t, err)
	assert.True(t, done, "the last family's end is the job's")
	assert.Empty(t, next)

	next, done, err = step(payload, `{"family":"gone","cursor":"x"}`)
	require.NoError(t, err)
	assert.False(t, done)
	assert.JSONEq(t, `{"family":"subscribers"}`, next, "an unknown family starts over: channels were empty")

	_, _, err = step(json.RawMessage(`{}`), "")
	assert.Error(t, err, "a payload without a bot purges nothing")
}

func ptr[T any](v T) *T { return &v }
