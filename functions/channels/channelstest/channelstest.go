// Package channelstest gives the tests of the families that act through channels a bot with
// a Telegram channel, connected against the Telegram fake (tests/fakes/telegram) as the
// channels Lambda connects one: its token and webhook secret sealed under a recording
// secrets key (familytest), so that what the family under test opens is recorded for its
// own Lambda (infra/access/accesstest).
package channelstest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/telegram"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	tgfake "github.com/botplatform/api/tests/fakes/telegram"
)

// PublicURL is the deployment's public URL in the environment Telegram returns: where the
// channel's webhook is registered.
const PublicURL = "https://api.example.com"

// Setup is a family environment with one bot's Telegram channel.
type Setup struct {
	// Env is the environment: deps' with a secrets key, PublicURL and the Telegram adapter.
	Env *family.Env
	// Adapter is the Telegram adapter, pointed at Fake.
	Adapter *telegram.Adapter
	// Fake is the Telegram Bot API the channel talks to, and TelegramBot the channel's bot
	// there.
	Fake        *tgfake.Server
	TelegramBot tgfake.Bot
	// Account and Bot own the channel.
	Account, Bot string
	Channel      channels.Channel
}

// Telegram returns deps' environment with a secrets key, PublicURL and a Telegram adapter
// added, and a new bot of account acct_1 whose Telegram channel the channels Lambda
// connected (sqlitetest.As "channels").
func Telegram(t *testing.T, deps family.Deps) Setup {
	t.Helper()
	fake := tgfake.New(t)
	tgBot := fake.AddBot("demo_bot")
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	adapter := telegram.New(telegram.Config{BaseURL: fake.URL})
	deps.Secrets, deps.PublicURL = key, PublicURL
	deps.Adapters = append(deps.Adapters, adapter)
	env := familytest.Env(t, deps)
	s := Setup{Env: env, Adapter: adapter, Fake: fake, TelegramBot: tgBot, Account: "acct_1", Bot: ids.New("bot")}
	s.Channel, err = channels.FromEnv(env).Connect(sqlitetest.As(t.Context(), "channels"), s.Account, s.Bot, channel.Telegram, "",
		&telegram.Credentials{Token: tgBot.Token})
	require.NoError(t, err)
	return s
}
