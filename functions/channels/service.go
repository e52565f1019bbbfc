package channels

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/store"
)

// Service stores channels and resolves them.
type Service struct {
	store    store.Store
	secrets  secrets.Sealer
	adapters map[channel.Kind]channel.Adapter
	now      func() time.Time
	// publicURL is the deployment's public base URL ("" when it has none, as a laptop):
	// webhooks are registered with providers only when it is set.
	publicURL string
	// opened caches opened credentials (opened.go).
	opened *opened
}

// NewService returns a Service. adapters are the providers this deployment speaks to.
func NewService(st store.Store, sealer secrets.Sealer, adapters []channel.Adapter, now func() time.Time, publicURL string) *Service {
	m := map[channel.Kind]channel.Adapter{}
	for _, a := range adapters {
		m[a.Kind()] = a
	}
	return &Service{store: st, secrets: sealer, adapters: m, now: now, publicURL: strings.TrimRight(publicURL, "/"), opened: &opened{}}
}

// Adapter returns the adapter of a channel type.
func (s *Service) Adapter(k channel.Kind) (channel.Adapter, bool) {
	a, ok := s.adapters[k]
	return a, ok
}

// Keys. The record lives under the channel id, so a webhook finds it from its URL alone; a
// bot's channels are listed through GSI1.
func recordKey(id string) store.Key { return store.Key{PK: "CHANNEL#" + id, SK: "CHANNEL"} }

func botPartition(bot string) string { return "BOT#" + bot + "#CHANNELS" }

// typeKey makes a channel type unique per bot: subscribers are keyed by channel type.
func typeKey(bot string, k channel.Kind) store.Key {
	return store.Key{PK: "BOT#" + bot + "#CHANNELTYPE", SK: string(k)}
}

func lookupKey(k channel.Kind, key string) store.Key {
	return store.Key{PK: "CHANNELKEY#" + string(k) + "#" + key, SK: "KEY"}
}

// pointer is what typeKey and lookupKey items hold.
type pointer struct {
	ChannelID string `json:"channel_id"`
}

// WebhookPath is where the provider of kind delivers updates of channel id.
func WebhookPath(k channel.Kind, id string) string {
	if k == channel.WhatsApp {
		return "/webhooks/whatsapp" // one endpoint for every number; updates name their number
	}
	return "/webhooks/" + string(k) + "/" + id
}

// Errors of Connect that are not HTTP problems yet.
var (
	// ErrUnknownType: the deployment has no adapter for the type.
	ErrUnknownType = errors.New("channels: no adapter for this channel type")
)

// Connect connects a channel of kind to the bot: the adapter checks the credentials with the
// provider, then the channel is stored with its credentials sealed.
func (s *Service) Connect(ctx context.Context, account, bot string, k channel.Kind, name string, creds any) (Channel, error) {
	a, ok := s.adapters[k]
	if !ok {
		return Channel{}, ErrUnknownType
	}
	now := s.now().UTC()
	id := ids.At("ch", now)
	secret, err := randomSecret()
	if err != nil {
		return Channel{}, err
	}
	req := channel.ConnectRequest{ChannelID: id, Credentials: creds, WebhookSecret: secret}
	if s.publicURL != "" {
		req.WebhookURL = s.publicURL + WebhookPath(k, id)
	}
	res, err := a.Connect(ctx, req)
	if err != nil {
		return Channel{}, providerProblem(err)
	}
	kept := false
	defer func() {
		if !kept { // undo the provider's side (a registered webhook) of a channel not stored
			release(ctx, a, channel.Connection{ChannelID: id, BotID: bot, Settings: res.Settings,
				Credentials: res.Credentials, WebhookSecret: secret})
		}
	}()
	rec := record{
		Channel: Channel{ID: id, BotID: bot, Type: k, Name: strings.TrimSpace(name), Settings: res.Settings,
			WebhookURL: req.WebhookURL, Status: StatusActive, CreatedAt: now.Truncate(time.Second)},
		AccountID: account,
		LookupKey: res.LookupKey,
	}
	if rec.Name == "" {
		rec.Name = res.DisplayName
	}
	if rec.Credentials, err = s.secrets.Seal(ctx, res.Credentials, aad(id, "credentials")); err != nil {
		return Channel{}, err
	}
	if rec.WebhookSecret, err = s.secrets.Seal(ctx, []byte(secret), aad(id, "webhook_secret")); err != nil {
		return Channel{}, err
	}
	data, err := store.Encode(rec)
	if err != nil {
		return Channel{}, err
	}
	ptr, err := store.Encode(pointer{ChannelID: id})
	if err != nil {
		return Channel{}, err
	}
	writes := []store.Write{
		store.PutOp(store.Item{Key: typeKey(bot, k), Data: ptr, Revision: 1}, store.MustNotExist),
		store.PutOp(store.Item{Key: recordKey(id), GSI1: store.IndexKey{PK: botPartition(bot), SK: id}, Data: data, Revision: 1}, store.MustNotExist),
	}
	if res.LookupKey != "" {
		writes = append(writes, store.PutOp(store.Item{Key: lookupKey(k, res.LookupKey), Data: ptr, Revision: 1}, store.MustNotExist))
	}
	err = s.store.Transact(ctx, writes)
	var ce *store.ConditionError
	switch {
	case errors.As(err, &ce) && ce.Index == 0:
		return Channel{}, httpapi.Errorf(httpapi.KindConflict, "channel_exists",
			"the bot already has a %s channel; disconnect it first", k)
	case errors.As(err, &ce) && ce.Index == 2:
		return Channel{}, httpapi.Errorf(httpapi.KindConflict, "channel_in_use",
			"this %s account is already connected to a bot", k)
	case err != nil:
		return Channel{}, fmt.Errorf("connect channel: %w", err)
	}
	kept = true
	return rec.Channel, nil
}

// ReplaceCredentials gives the bot's channel id new credentials for the same provider
// account: a refreshed access token (functions/meta keeps attached WhatsApp numbers on the
// token it refreshes). The adapter checks them with the provider as Connect does (with the
// channel's webhook URL and secret, so a re-registration is the same one); they are sealed
// in place of the old ones, which stop being used at once. Credentials of another account
// of the provider (another lookup key) are refused with 409 channel_account_changed: that
// is a new channel, not new credentials.
func (s *Service) ReplaceCredentials(ctx context.Context, bot, id string, creds any) (Channel, error) {
	rec, rev, err := s.load(ctx, id)
	if err != nil {
		return Channel{}, err
	}
	if rec.BotID != bot {
		return Channel{}, errNotFound()
	}
	a, ok := s.adapters[rec.Type]
	if !ok {
		return Channel{}, ErrUnknownType
	}
	cur, err := s.open(ctx, rec)
	if err != nil {
		return Channel{}, err
	}
	res, err := a.Connect(ctx, channel.ConnectRequest{ChannelID: id, Credentials: creds,
		WebhookSecret: cur.WebhookSecret, WebhookURL: rec.WebhookURL})
	if err != nil {
		return Channel{}, providerProblem(err)
	}
	if res.LookupKey != rec.LookupKey {
		return Channel{}, httpapi.Errorf(httpapi.KindConflict, "channel_account_changed",
			"these credentials are of another %s account than the channel's; connect a new channel instead", rec.Type)
	}
	if rec.Credentials, err = s.secrets.Seal(ctx, res.Credentials, aad(id, "credentials")); err != nil {
		return Channel{}, err
	}
	rec.Settings = res.Settings
	data, err := store.Encode(rec)
	if err != nil {
		return Channel{}, err
	}
	err = s.store.Put(ctx, store.Item{Key: recordKey(id), GSI1: store.IndexKey{PK: botPartition(bot), SK: id},
		Data: data, Revision: rev + 1}, store.RevisionIs(rev))
	if errors.Is(err, store.ErrConditionFailed) {
		// Disconnected, or changed by another writer meanwhile: the caller reads again.
		return Channel{}, httpapi.E(httpapi.KindConflict, "channel_changed",
			"the channel changed while its credentials were replaced; retry")
	}
	if err != nil {
		return Channel{}, fmt.Errorf("replace channel credentials: %w", err)
	}
	return rec.Channel, nil
}

// release undoes, best effort, what an adapter registered with its provider for a channel
// that is gone or was never stored (channel.Disconnector). The channel is gone either way,
// so a failure is not the caller's.
func release(ctx context.Context, a channel.Adapter, conn channel.Connection) {
	d, ok := a.(channel.Disconnector)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = d.Disconnect(ctx, conn)
}

func aad(id, purpose string) []byte { return []byte(id + "/" + purpose) }

func randomSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// providerProblem turns an adapter's failure into the API's answer.
func providerProblem(err error) error {
	var ce *channel.CredentialsError
	switch {
	case errors.As(err, &ce):
		var p httpapi.Problems
		p.Add("credentials."+ce.Field, "%s", ce.Message)
		return p.Err()
	case errors.Is(err, channel.ErrInvalidCredentials):
		return httpapi.E(httpapi.KindUnprocessable, "credentials_rejected",
			"the provider refused these credentials; check them and try again").Wrap(err)
	case errors.Is(err, channel.ErrUnavailable), errors.Is(err, channel.ErrRateLimited):
		return httpapi.E(httpapi.KindUnavailable, "provider_unavailable",
			"the provider could not be reached to check the credentials; retry shortly").Wrap(err)
	default:
		return httpapi.E(httpapi.KindUnprocessable, "credentials_rejected",
			"the provider did not accept the connection").Wrap(err)
	}
}

// List returns one page of the bot's channels.
func (s *Service) List(ctx context.Context, bot string, limit int, cursor string) ([]Channel, string, error) {
	return listPage(ctx, s.store, bot, limit, cursor)
}

// BotChannels returns every channel of the bot (at most one per type) from the store alone:
// it needs no key, so families that only need to know what is connected (publishing a
// reaction) can read it where credentials cannot be opened.
func BotChannels(ctx context.Context, st store.Store, bot string) ([]Channel, error) {
	var all []Channel
	for cursor := ""; ; {
		page, next, err := listPage(ctx, st, bot, 0, cursor)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		cursor = next
	}
}

func listPage(ctx context.Context, st store.Store, bot string, limit int, cursor string) ([]Channel, string, error) {
	page, err := st.Query(ctx, store.Query{Index: store.GSI1, PK: botPartition(bot), Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Channel, 0, len(page.Items))
	for _, it := range page.Items {
		rec, err := store.Decode[record](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, rec.Channel)
	}
	return out, page.Next, nil
}

func (s *Service) load(ctx context.Context, id string) (record, int64, error) {
	if !ids.Valid("ch", id) {
		return record{}, 0, errNotFound()
	}
	it, err := s.store.Get(ctx, recordKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, 0, errNotFound()
	}
	if err != nil {
		return record{}, 0, err
	}
	rec, err := store.Decode[record](it)
	return rec, it.Revision, err
}

func errNotFound() error { return httpapi.NotFound("channel") }

func errOpen(what, id string, err error) error {
	return fmt.Errorf("open channel %s %s: %w", id, what, err)
}

// Get returns a channel of the bot.
func (s *Service) Get(ctx context.Context, bot, id string) (Channel, error) {
	rec, _, err := s.load(ctx, id)
	if err != nil {
		return Channel{}, err
	}
	if rec.BotID != bot {
		return Channel{}, errNotFound()
	}
	return rec.Channel, nil
}

// Disconnect removes a channel of the bot; its webhook stops being accepted at once.
func (s *Service) Disconnect(ctx context.Context, bot, id string) error {
	rec, rev, err := s.load(ctx, id)
	if err != nil {
		return err
	}
	if rec.BotID != bot {
		return errNotFound()
	}
	// The local template catalog goes first: it is a copy of the provider's, which a sync
	// rebuilds should the channel's own deletion below fail.
	if err := s.deleteChannelTemplates(ctx, bot, id); err != nil {
		return fmt.Errorf("disconnect channel: delete its templates: %w", err)
	}
	writes := []store.Write{
		store.DeleteOp(recordKey(id), store.RevisionIs(rev)),
		store.DeleteOp(typeKey(bot, rec.Type), store.Always),
	}
	if rec.LookupKey != "" {
		writes = append(writes, store.DeleteOp(lookupKey(rec.Type, rec.LookupKey), store.Always))
	}
	if err := s.store.Transact(ctx, writes); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return errNotFound()
		}
		return fmt.Errorf("disconnect channel: %w", err)
	}
	s.releaseRecord(ctx, rec)
	return nil
}

// Resolve returns channel id with its credentials opened, for a webhook that names it.
func (s *Service) Resolve(ctx context.Context, id string) (Resolved, error) {
	rec, _, err := s.load(ctx, id)
	if err != nil {
		return Resolved{}, err
	}
	return s.open(ctx, rec)
}

// ResolveKey resolves the channel registered under a provider's lookup key.
func (s *Service) ResolveKey(ctx context.Context, k channel.Kind, key string) (Resolved, error) {
	return s.resolvePointer(ctx, lookupKey(k, key))
}

// ResolveBot resolves the bot's channel of type k, for sending to a subscriber of that type.
func (s *Service) ResolveBot(ctx context.Context, bot string, k channel.Kind) (Resolved, error) {
	return s.resolvePointer(ctx, typeKey(bot, k))
}

func (s *Service) resolvePointer(ctx context.Context, key store.Key) (Resolved, error) {
	it, err := s.store.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return Resolved{}, errNotFound()
	}
	if err != nil {
		return Resolved{}, err
	}
	p, err := store.Decode[pointer](it)
	if err != nil {
		return Resolved{}, err
	}
	return s.Resolve(ctx, p.ChannelID)
}

func (s *Service) open(ctx context.Context, rec record) (Resolved, error) {
	creds, secret, err := s.opened.open(ctx, s.secrets, rec)
	if err != nil {
		return Resolved{}, err
	}
	return Resolved{
		Channel:       rec.Channel,
		AccountID:     rec.AccountID,
		WebhookSecret: string(secret),
		Conn: channel.Connection{ChannelID: rec.ID, BotID: rec.BotID, Settings: rec.Settings,
			Credentials: json.RawMessage(creds), WebhookSecret: string(secret)},
	}, nil
}
