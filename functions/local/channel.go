package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/platform"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/telegram"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// serveSettingsKey holds what the last `serve` was started with that admin commands need
// too: a channel connected by `admin channel connect` registers its webhook at the running
// server's public URL, and is checked against the same Bot API server.
var serveSettingsKey = store.Key{PK: "SYSTEM", SK: "SERVE"}

type serveSettings struct {
	PublicURL       string `json:"public_url,omitempty"`
	TelegramBaseURL string `json:"telegram_base_url,omitempty"`
}

// recordServeSettings saves serve's public URL and provider locations for admin commands.
func (a *app) recordServeSettings(ctx context.Context, cfg appConfig) error {
	data, err := store.Encode(serveSettings{PublicURL: cfg.PublicURL, TelegramBaseURL: cfg.Providers.TelegramBaseURL})
	if err != nil {
		return err
	}
	return a.Store.Put(ctx, store.Item{Key: serveSettingsKey, Data: data, Revision: 1}, store.Always)
}

func (a *app) loadServeSettings(ctx context.Context) (serveSettings, error) {
	it, err := a.Store.Get(ctx, serveSettingsKey)
	if errors.Is(err, store.ErrNotFound) {
		return serveSettings{}, nil
	}
	if err != nil {
		return serveSettings{}, err
	}
	return store.Decode[serveSettings](it)
}

// checkPublicURL normalizes a public base URL: absolute http or https, a host, no user
// info, query or fragment; a trailing slash is dropped. Plain http is allowed for a
// self-hosted Bot API server on the same machine; api.telegram.org itself takes only https.
func checkPublicURL(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("public URL %q: want an absolute http or https URL without query or fragment, e.g. https://abc.example.com", s)
	}
	return strings.TrimRight(s, "/"), nil
}

// channelConnect is `admin channel connect`: it attaches a Telegram bot to a bot of the
// platform, as an operator does (Telegram is not connectable over REST). The account is the
// demo account unless --account names another: a bot lives in its account's partition, and
// the operator knows the account, so no bot index is needed.
func channelConnect(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
	bot := fs.String("bot", "", "bot id")
	typ := fs.String("type", "", "channel type: telegram")
	token := fs.String("token", "", `the bot token from @BotFather; "-" reads it from stdin (keeps it out of the process list)`)
	baseURL := fs.String("base-url", "", "Bot API server of this channel (default: TELEGRAM_BASE_URL, else serve's --telegram-base-url, else https://api.telegram.org)")
	name := fs.String("name", "", "channel name (default: the bot's @username)")
	account := fs.String("account", "", "the bot's account (default: the demo account)")
	publicURL := fs.String("public-url", "", "public base URL the webhook is registered at (default: PUBLIC_URL, else the running serve's --public-url)")
	return func(ctx context.Context, a *app) (any, error) {
		if *bot == "" || *typ == "" || *token == "" {
			return nil, usageError("--bot, --type and --token are required")
		}
		if channel.Kind(*typ) != channel.Telegram {
			return nil, usageError(fmt.Sprintf("--type %q: only telegram is connected here; whatsapp and vk channels are connected over the API (POST /api/bots/{botID}/channels)", *typ))
		}
		if len([]rune(strings.TrimSpace(*name))) > 100 {
			return nil, usageError("--name must be at most 100 characters")
		}
		if *baseURL != "" {
			if err := telegram.CheckBaseURL(*baseURL); err != nil {
				return nil, usageError("--base-url " + err.Error())
			}
		}
		pub, err := checkPublicURL(*publicURL)
		if err != nil {
			return nil, usageError("--public-url: " + err.Error())
		}
		tok := *token
		if tok == "-" {
			line, err := bufio.NewReader(os.Stdin).ReadString('\n')
			if err != nil && line == "" {
				return nil, usageError("--token -: no token on stdin")
			}
			tok = strings.TrimSpace(line)
		}
		creds := telegram.Credentials{Token: tok, APIBaseURL: strings.TrimRight(*baseURL, "/")}
		if err := creds.Check(); err != nil {
			var ce *channel.CredentialsError
			if errors.As(err, &ce) && ce.Field == "token" {
				return nil, usageError("--token " + ce.Message)
			}
			return nil, usageError(err.Error())
		}

		acct, err := a.botAccount(ctx, *account, *bot)
		if err != nil {
			return nil, err
		}

		// The process's own settings come first, then what the running serve was started with.
		served, err := a.loadServeSettings(ctx)
		if err != nil {
			return nil, err
		}
		if pub == "" {
			if pub, err = checkPublicURL(os.Getenv("PUBLIC_URL")); err != nil {
				return nil, usageError("PUBLIC_URL: " + err.Error())
			}
		}
		if pub == "" {
			pub = served.PublicURL
		}
		providers := platform.ProvidersFromEnv(os.Getenv)
		if providers.TelegramBaseURL == "" {
			providers.TelegramBaseURL = served.TelegramBaseURL
		}
		if err := providers.Validate(); err != nil {
			return nil, usageError(err.Error())
		}
		adapters := providers.Adapters()
		chans := channels.NewService(a.Store, a.Secrets, adapters, a.Now, pub)
		tg, ok := chans.Adapter(channel.Telegram)
		if !ok {
			return nil, errors.New("this build has no telegram adapter")
		}

		// One Telegram bot has one webhook: refuse before setWebhook would move another
		// channel's deliveries here. (Connect checks again atomically when it stores.)
		if c, err := chans.ResolveBot(ctx, *bot, channel.Telegram); err == nil {
			return nil, fmt.Errorf("bot %s already has a telegram channel (%s); disconnect it first", *bot, c.ID)
		} else if !isNotFound(err) {
			return nil, err
		}
		if me, ok := tg.(interface {
			Me(context.Context, telegram.Credentials) (telegram.Settings, error)
		}); ok {
			info, err := me.Me(ctx, creds)
			if err != nil {
				return nil, fmt.Errorf("telegram refused the token: %w", err)
			}
			if c, err := chans.ResolveKey(ctx, channel.Telegram, strconv.FormatInt(info.BotID, 10)); err == nil {
				return nil, fmt.Errorf("telegram bot @%s is already connected (channel %s of bot %s); disconnect it there first", info.Username, c.ID, c.BotID)
			} else if !isNotFound(err) {
				return nil, err
			}
		}

		c, err := chans.Connect(ctx, acct, *bot, channel.Telegram, *name, &creds)
		if err != nil {
			return nil, err
		}
		return map[string]string{"channel_id": c.ID, "webhook_url": c.WebhookURL, "name": c.Name}, nil
	}
}

func isNotFound(err error) bool {
	var e *httpapi.Error
	return errors.As(err, &e) && e.Code == "not_found"
}

// botAccount returns the account of a bot named on the command line: account, or the demo
// account when none is given, checked to hold the bot.
func (a *app) botAccount(ctx context.Context, account, bot string) (string, error) {
	if account == "" {
		d, err := a.demo(ctx)
		if err != nil {
			return "", err
		}
		if d.AccountID == "" {
			return "", usageError("--account is required: this data directory has no demo account")
		}
		account = d.AccountID
	}
	if _, err := a.Bots.Get(ctx, account, bot); err != nil {
		if isNotFound(err) {
			return "", fmt.Errorf("bot %s not found in account %s (pass --account for a bot of another account)", bot, account)
		}
		return "", err
	}
	return account, nil
}

// demo returns the demo account's record, or the zero record when there is none.
func (a *app) demo(ctx context.Context) (demoRecord, error) {
	it, err := a.Store.Get(ctx, demoKey)
	if errors.Is(err, store.ErrNotFound) {
		return demoRecord{}, nil
	}
	if err != nil {
		return demoRecord{}, err
	}
	return store.Decode[demoRecord](it)
}
