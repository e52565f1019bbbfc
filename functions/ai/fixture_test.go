package ai

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// stub is a provider client double that answers from a script: the service's routing,
// idempotency and metering are what these tests are about (the real clients are tested
// against the providers' fakes in shared/ai/...).
type stub struct {
	name string
	mu   sync.Mutex
	// fail answers the next calls with these errors, in order, before answering.
	fail []error
	// text, when set, is the answer instead of "<name> says hi".
	text string
	// midStream fails the next streamed call after its first piece of text.
	midStream error
	// hold, when set, blocks each call until it is closed; entered is signalled first.
	hold    chan struct{}
	entered chan struct{}
	calls   []stubCall
}

type stubCall struct {
	key string
	req aiapi.Request
}

func (s *stub) Generate(ctx context.Context, key string, req aiapi.Request) (aiapi.Response, error) {
	return s.Stream(ctx, key, req, nil)
}

func (s *stub) Stream(ctx context.Context, key string, req aiapi.Request, delta func(string) error) (aiapi.Response, error) {
	s.mu.Lock()
	s.calls = append(s.calls, stubCall{key, req})
	hold, entered := s.hold, s.entered
	var err error
	if len(s.fail) > 0 {
		err, s.fail = s.fail[0], s.fail[1:]
	}
	s.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return aiapi.Response{}, ctx.Err()
		}
	}
	if err != nil {
		return aiapi.Response{}, err
	}
	text := s.name + " says hi"
	if s.text != "" {
		text = s.text
	}
	if delta != nil {
		s.mu.Lock()
		mid := s.midStream
		s.midStream = nil
		s.mu.Unlock()
		for _, part := range []string{s.name, " says", " hi"} {
			if err := delta(part); err != nil {
				return aiapi.Response{}, err
			}
			if mid != nil {
				return aiapi.Response{}, mid
			}
		}
	}
	in := int64(0)
	for _, m := range req.Messages {
		in += int64(len(m.Content))
	}
	return aiapi.Response{ID: s.name + "-1", Model: req.Model, Text: text, StopReason: aiapi.StopEnd,
		Usage: aiapi.Usage{InputTokens: in, OutputTokens: 3}}, nil
}

func (s *stub) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func (s *stub) lastKey() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[len(s.calls)-1].key
}

type fixture struct {
	*httpapitest.Server
	clock     *httpapitest.Clock
	svc       *Service
	providers map[string]*stub
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clock := httpapitest.NewClock(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), 0)
	raw := sqlitetest.Open(t, sqlite.WithClock(clock.Now))
	f := &fixture{clock: clock, providers: map[string]*stub{}}
	clients := map[string]aiapi.Client{}
	for _, p := range aiapi.Providers {
		f.providers[p] = &stub{name: p}
		clients[p] = f.providers[p]
	}
	sealer, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	f.svc = New(Config{Store: raw, Sealer: secretstest.Wrap(sealer, kms.PurposeSecrets), Now: clock.Now, Clients: clients,
		Keys: map[string]string{aiapi.OpenAI: "managed-openai", aiapi.Anthropic: "managed-anthropic", aiapi.Gemini: "managed-gemini"}})
	f.Server = httpapitest.New(t, httpapitest.Config{Now: clock.Now, Store: raw})
	Routes(f.Mux, f.svc)
	return f
}

// setKey stores an account's own key of provider as the operator's admin command does
// (functions/local, ai set-key): no Lambda seals one (the ai Lambda is granted only
// kms:Decrypt), so what it does is not recorded for the ai Lambda (accesstest).
func (f *fixture) setKey(t *testing.T, account, provider, key string) (KeyInfo, error) {
	t.Helper()
	return f.svc.SetKey(sqlitetest.Unrecorded(t.Context()), account, provider, key)
}
