package copilot_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/ai"
	aiwiring "github.com/botplatform/api/functions/ai/wiring"
	"github.com/botplatform/api/functions/copilot"
	"github.com/botplatform/api/functions/copilot/wiring"
	"github.com/botplatform/api/functions/reactions"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	openaifake "github.com/botplatform/api/tests/fakes/ai/openai"
)

// oneBot is the tenancy check of an account with one bot.
type oneBot struct{ account, bot string }

func (o oneBot) LoadBot(_ context.Context, account, bot string) (any, error) {
	if account != o.account || bot != o.bot {
		return nil, httpapi.NotFound("bot")
	}
	return bot, nil
}

// The service as the copilot Lambda composes it (wiring.Service over the managed AI family,
// configured as the ai Lambda is): an account with its own OpenAI key (BYOK) has its proposal
// generated with that key, which the copilot Lambda opens (kms:Decrypt, its one use of the
// secrets key; it never seals one: the operator's admin command does) and presents to the
// provider, which knows no other key here. Not parallel: the managed AI configuration is read
// from the process environment, as on AWS.
func TestProposalWithTheAccountsOwnKeyOpensIt(t *testing.T) {
	ctx := t.Context()
	oa := openaifake.New(t)
	oa.AddKey("sk-own-key-of-the-account")
	t.Setenv(aiwiring.EnvOpenAIBaseURL, oa.URL())
	t.Setenv(aiwiring.EnvPrivateAddresses, "allow")
	for _, k := range []string{aiwiring.EnvOpenAIKey, aiwiring.EnvAnthropicKey, aiwiring.EnvGeminiKey, aiwiring.EnvRoutes, aiwiring.EnvPrices} {
		t.Setenv(k, "") // no managed key: only the account's own can answer
	}
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	bot := ids.New("bot")
	env := familytest.Env(t, family.Deps{Secrets: key,
		Tenancy: func(*family.Env) httpapi.BotLoader { return oneBot{account: "acct_a", bot: bot} }})

	// The operator stores the account's key (the admin command: no Lambda); the reactions
	// Lambda creates the reaction.
	_, err = ai.New(ai.Config{Store: env.Store, Sealer: env.Secrets, Now: env.Now, Log: env.Log}).
		SetKey(sqlitetest.Unrecorded(ctx), "acct_a", aiapi.OpenAI, "sk-own-key-of-the-account")
	require.NoError(t, err)
	var steps []reactions.Step
	require.NoError(t, json.Unmarshal([]byte(`[{"id": "hi", "type": "send_text", "text": "Hello"}]`), &steps))
	rx, err := reactionswiring.Service(env).Create(sqlitetest.As(ctx, "reactions"), bot,
		reactions.Content{Name: "Welcome", Trigger: reactions.Trigger{Type: reactions.TriggerStart}, Steps: steps})
	require.NoError(t, err)

	oa.ReplyNext("```json\n" + `{"summary": "Greets warmly.", "steps": [{"id": "hi", "type": "send_text", "text": "Hello there, welcome!"}]}` + "\n```")
	owner := &auth.Principal{AccountID: "acct_a", Kind: auth.KindPAT, Role: auth.RoleOwner, Scopes: auth.Scopes{"*"},
		Entitlements: auth.Entitlements{Rollout: []auth.Feature{auth.RolloutCopilot}}}
	pr, err := wiring.Service(env).Create(ctx, owner, rx.ID, copilot.CreateRequest{Goal: "Greet more warmly"})
	require.NoError(t, err)
	assert.Equal(t, "Greets warmly.", pr.Summary)
	assert.Equal(t, ai.BillingBYOK, pr.Usage.Billing, "generated with the account's own key")
	assert.Equal(t, aiapi.OpenAI, pr.Usage.Provider)
	assert.Equal(t, 1, oa.Requests(), "the provider was called once, and accepted the key")
}
