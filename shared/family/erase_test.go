package family_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
)

// The erasure job runs every composed family's Erase step to its end, the subscribers'
// first and then the others in the order composed, each with the job's payload and its own
// cursor; a family without one is not asked.
func TestComposeChainsTheErasers(t *testing.T) {
	t.Parallel()
	var calls []string
	eraser := func(name string, steps int) family.Family {
		return family.Family{Name: name, Build: func(*family.Env) family.Parts {
			return family.Parts{Erase: func(_ context.Context, payload json.RawMessage, cursor string) (string, bool, error) {
				e, err := purge.DecodeErasure(payload)
				require.NoError(t, err)
				calls = append(calls, name+" "+e.SubscriberID+" "+cursor)
				n := len(cursor)
				return cursor + "x", n+1 >= steps, nil
			}}
		}}
	}
	env := familytest.Env(t, family.Deps{})
	c := family.Compose(env, eraser("emailcampaigns", 2), family.Family{Name: "bots", Build: func(*family.Env) family.Parts { return family.Parts{} }},
		eraser("subscribers", 1), eraser("webpush", 1))
	require.Contains(t, c.Registry().Kinds(), purge.EraseJob)

	payload, err := json.Marshal(purge.Erasure{BotID: "bot_1", SubscriberID: "sub_1"})
	require.NoError(t, err)
	st := jobs.State{Kind: purge.EraseJob, Payload: payload}
	for range 10 {
		if st.Done {
			break
		}
		st, err = c.Registry().RunStep(t.Context(), st)
		require.NoError(t, err)
	}
	require.True(t, st.Done)
	assert.Equal(t, []string{"subscribers sub_1 ", "emailcampaigns sub_1 ", "emailcampaigns sub_1 x", "webpush sub_1 "}, calls)

	_, err = c.Registry().RunStep(t.Context(), jobs.State{Kind: purge.EraseJob, Payload: json.RawMessage(`{"bot_id":"bot_1"}`)})
	assert.Error(t, err, "a payload that names no subscriber")
}
