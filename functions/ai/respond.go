package ai

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// Bounds of a generation request.
const (
	DefaultMaxOutputTokens = 1024
	MaxOutputTokens        = 8192
	MaxInputMessages       = 100
	// MaxInputChars bounds the characters of the instructions and every input message
	// together (the request body is at most 1 MiB anyway).
	MaxInputChars = 200_000
	// MaxIdempotencyKeyLen bounds the Idempotency-Key header, as Stripe's does.
	MaxIdempotencyKeyLen = 255
)

// Idempotency: a key is kept 24 hours from its first use; a request holding it may run
// for up to generationTimeout, and its claim outlives that by a margin (leaseTTL) before a
// retry with the same key may take it over.
const (
	IdempotencyTTL    = 24 * time.Hour
	generationTimeout = 4 * time.Minute
	leaseTTL          = 5 * time.Minute
)

// The billing of a request: the platform's managed keys (the account is charged) or the
// account's own key (the provider charges the account).
const (
	BillingManaged = "managed"
	BillingBYOK    = "byok"
)

// ResponseRequest is the body of POST /api/v1/ai/responses.
type ResponseRequest struct {
	// Profile is fast, balanced or quality (default balanced).
	Profile string `json:"profile"`
	// Provider is auto (default: the profile's route) or a provider's name.
	Provider string `json:"provider"`
	// Instructions are the system prompt.
	Instructions string `json:"instructions"`
	// Input is the conversation: user and assistant turns, ending with a user turn.
	Input           []aiapi.Message `json:"input"`
	MaxOutputTokens int             `json:"max_output_tokens"`
	Temperature     *float64        `json:"temperature"`
	// Stream asks for the answer as server-sent events as it is generated.
	Stream bool `json:"stream"`
}

// normalize fills the defaults.
func (r *ResponseRequest) normalize() {
	if r.Profile == "" {
		r.Profile = ProfileBalanced
	}
	if r.Provider == "" {
		r.Provider = ProviderAuto
	}
	if r.MaxOutputTokens == 0 {
		r.MaxOutputTokens = DefaultMaxOutputTokens
	}
}

// Validate checks the request's form, every problem at once.
func (r *ResponseRequest) Validate() error {
	r.normalize()
	var p httpapi.Problems
	if !slices.Contains(Profiles, r.Profile) {
		p.Add("profile", "must be one of %s", strings.Join(Profiles, ", "))
	}
	if r.Provider != ProviderAuto && !slices.Contains(aiapi.Providers, r.Provider) {
		p.Add("provider", "must be auto or one of %s", strings.Join(aiapi.Providers, ", "))
	}
	switch {
	case len(r.Input) == 0:
		p.Add("input", "is required: at least one user message")
	case len(r.Input) > MaxInputMessages:
		p.Add("input", "has %d messages; at most %d", len(r.Input), MaxInputMessages)
	default:
		for i, m := range r.Input {
			at := "input[" + strconv.Itoa(i) + "]"
			if m.Role != aiapi.RoleUser && m.Role != aiapi.RoleAssistant {
				p.Add(at+".role", "must be user or assistant (the system prompt is instructions)")
			}
			if strings.TrimSpace(m.Content) == "" {
				p.Add(at+".content", "is required")
			}
			if !utf8.ValidString(m.Content) {
				p.Add(at+".content", "must be UTF-8 text")
			}
		}
		if r.Input[len(r.Input)-1].Role != aiapi.RoleUser {
			p.Add("input", "must end with a user message")
		}
	}
	chars := utf8.RuneCountInString(r.Instructions)
	for _, m := range r.Input {
		chars += utf8.RuneCountInString(m.Content)
	}
	if chars > MaxInputChars {
		p.Add("input", "has %d characters with the instructions; at most %d", chars, MaxInputChars)
	}
	if r.MaxOutputTokens < 1 || r.MaxOutputTokens > MaxOutputTokens {
		p.Add("max_output_tokens", "must be between 1 and %d", MaxOutputTokens)
	}
	if t := r.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
		p.Add("temperature", "must be between 0 and 2")
	}
	return p.Err()
}

// hash is the request's identity for its Idempotency-Key: its normalized form.
func (r *ResponseRequest) hash() string {
	b, _ := json.Marshal(r) // a struct of strings, numbers and slices: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Cost is a request's cost: exact in nano-USD (billionths of a dollar), and in minor units
// (cents) rounded half up. Sums are made of the nanos, then rounded.
type Cost struct {
	Currency   string `json:"currency"`
	MinorUnits int64  `json:"minor_units"`
	Nanos      int64  `json:"nanos"`
}

// costOf is the Cost of nanos.
func costOf(nanos int64) Cost {
	return Cost{Currency: "USD", MinorUnits: (nanos + 5_000_000) / 10_000_000, Nanos: nanos}
}

// Usage is what a request used.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Cost         Cost  `json:"cost"`
}

// Attempt is a provider model tried before the one that answered, and why it did not.
type Attempt struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Error    string `json:"error"`
}

// Response is a generation's answer.
type Response struct {
	ID         string    `json:"id"`
	Object     string    `json:"object"`
	CreatedAt  time.Time `json:"created_at"`
	Profile    string    `json:"profile"`
	Provider   string    `json:"provider"`
	Model      string    `json:"model"`
	Billing    string    `json:"billing"`
	OutputText string    `json:"output_text"`
	StopReason string    `json:"stop_reason"`
	Usage      Usage     `json:"usage"`
	Attempts   []Attempt `json:"attempts"`
	// ProviderResponseID is the provider's id of the generation, for its support.
	ProviderResponseID string `json:"provider_response_id,omitempty"`
}

// The states of an Idempotency-Key.
const (
	idemInFlight = "in_flight"
	idemDone     = "done"
)

// idemRecord is an Idempotency-Key's request and, once answered, its answer.
type idemRecord struct {
	State       string    `json:"state"`
	RequestHash string    `json:"request_hash"`
	LeaseUntil  time.Time `json:"lease_until"`
	CreatedAt   time.Time `json:"created_at"`
	Response    *Response `json:"response,omitempty"`
}

// plan is what Service.plan answered: the calls to try in order, and how they are billed.
type plan struct {
	calls   []call
	billing string
	err     error
}

// claim is a request's hold on its Idempotency-Key.
type claim struct {
	key     store.Key
	rev     int64
	created time.Time
	hash    string // the request's
}

// Respond answers a generation request under its Idempotency-Key: the stored answer of the
// key's first request (replayed true) when the body is the same, else a new generation. A
// streaming request's text goes to delta as it arrives (nil for none); once some has, no
// other provider is tried. Only an answer is kept under the key: a request that failed
// releases it, so that the same request may be retried.
func (s *Service) Respond(ctx context.Context, account, key string, req ResponseRequest, delta func(string) error) (resp Response, replayed bool, err error) {
	if err := CheckIdempotencyKey(key); err != nil {
		return Response{}, false, err
	}
	if err := req.Validate(); err != nil {
		return Response{}, false, err
	}
	// The plan (a read of the account's own keys, and opening the one it uses) does not
	// depend on the claim (a write): they run side by side, a read's latency off every
	// request. The key's outcome comes first: a replay answers even when the plan would
	// now fail (a key removed since), as Stripe replays whatever the first request got, and
	// without waiting for it: a replay or a refused key cancels the plan (its channel is
	// buffered, so the goroutine ends on its own).
	planCtx, cancelPlan := context.WithCancel(ctx)
	defer cancelPlan()
	planned := make(chan plan, 1)
	go func() {
		var p plan
		p.calls, p.billing, p.err = s.plan(planCtx, account, req)
		planned <- p
	}()
	c, prior, err := s.claim(ctx, account, key, req.hash())
	if prior != nil {
		return *prior, true, nil
	}
	if err != nil {
		return Response{}, false, err
	}
	p := <-planned
	if p.err != nil {
		s.release(context.WithoutCancel(ctx), c)
		return Response{}, false, p.err
	}
	// The generation outlives a caller that goes away (a closed connection, a gateway's
	// timeout): the provider bills it whatever happens to the caller, so it is metered and
	// its answer kept under the key, for the caller's retry to replay instead of paying for
	// a second one. generate bounds it (generationTimeout); a stream stops writing to a
	// caller that is gone but reads the provider to its end.
	resp, err = s.generate(context.WithoutCancel(ctx), req, p.calls, p.billing, forgiving(delta))
	if err != nil {
		s.release(context.WithoutCancel(ctx), c)
		return Response{}, false, err
	}
	resp.ID, resp.Object, resp.CreatedAt, resp.Profile = ids.New("air"), "ai.response", s.now().UTC().Truncate(time.Millisecond), req.Profile
	if err := s.complete(context.WithoutCancel(ctx), account, c, resp); err != nil {
		return Response{}, false, err
	}
	return resp, false, nil
}

// forgiving wraps a stream's delta so that the first failure to pass text on (the caller is
// gone) stops passing text on without stopping the generation; nil stays nil.
func forgiving(delta func(string) error) func(string) error {
	if delta == nil {
		return nil
	}
	gone := false
	return func(text string) error {
		if !gone && delta(text) != nil {
			gone = true
		}
		return nil
	}
}

// CheckIdempotencyKey checks an Idempotency-Key header's value: required, at most 255
// visible ASCII characters (copilot's optional key takes the same form).
func CheckIdempotencyKey(key string) error {
	if key == "" {
		return httpapi.E(httpapi.KindInvalid, "idempotency_key_required", "send an Idempotency-Key header: a unique value per generation (a UUID, say)")
	}
	if len(key) > MaxIdempotencyKeyLen || strings.ContainsFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return httpapi.Errorf(httpapi.KindInvalid, "invalid_idempotency_key", "the Idempotency-Key must be 1 to %d visible ASCII characters", MaxIdempotencyKeyLen)
	}
	return nil
}

// claim takes the Idempotency-Key for a request with hash: a new key, or one whose holder
// abandoned it (its lease ran out). It returns the stored answer instead when the key's
// request was answered, and refuses a key used with another body (422) or held by a
// request still running (409).
func (s *Service) claim(ctx context.Context, account, key, hash string) (claim, *Response, error) {
	k := idemKey(account, key)
	for range 3 {
		now := s.now().UTC()
		rec := idemRecord{State: idemInFlight, RequestHash: hash, LeaseUntil: now.Add(leaseTTL), CreatedAt: now}
		it, err := item(k, 1, rec)
		if err != nil {
			return claim{}, nil, err
		}
		it.ExpiresAt = store.SecondsPrecision(now.Add(IdempotencyTTL))
		err = s.store.Put(ctx, it, store.MustNotExist)
		if err == nil {
			return claim{key: k, rev: 1, created: now, hash: hash}, nil, nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return claim{}, nil, err
		}
		cur, err := s.store.Get(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			continue // expired in between: claim it anew
		}
		if err != nil {
			return claim{}, nil, err
		}
		old, err := store.Decode[idemRecord](cur)
		if err != nil {
			return claim{}, nil, err
		}
		switch {
		case old.RequestHash != hash:
			return claim{}, nil, httpapi.E(httpapi.KindUnprocessable, "idempotency_key_reused",
				"this Idempotency-Key was used with another request body within 24 hours; use a new key for a new request")
		case old.State == idemDone && old.Response != nil:
			return claim{}, old.Response, nil
		case now.Before(old.LeaseUntil):
			return claim{}, nil, httpapi.E(httpapi.KindConflict, "idempotency_in_flight",
				"a request with this Idempotency-Key is still running; retry once it has answered").With("retry_after_seconds", int64(1))
		}
		// Its holder is gone (a crash, a timeout past the lease): this request takes over.
		rec.CreatedAt = old.CreatedAt
		it, err = item(k, cur.Revision+1, rec)
		if err != nil {
			return claim{}, nil, err
		}
		it.ExpiresAt = cur.ExpiresAt
		if err := s.store.Put(ctx, it, store.RevisionIs(cur.Revision)); err != nil {
			if errors.Is(err, store.ErrConditionFailed) {
				continue
			}
			return claim{}, nil, err
		}
		return claim{key: k, rev: cur.Revision + 1, created: old.CreatedAt, hash: hash}, nil, nil
	}
	return claim{}, nil, httpapi.E(httpapi.KindConflict, "idempotency_in_flight", "a request with this Idempotency-Key is still running; retry once it has answered")
}

// release gives the key up after a failure: the same request may be retried at once.
func (s *Service) release(ctx context.Context, c claim) {
	if err := s.store.Delete(ctx, c.key, store.RevisionIs(c.rev)); err != nil && !errors.Is(err, store.ErrConditionFailed) {
		s.log.WarnContext(ctx, "ai: could not release an idempotency key", "error", err)
	}
}

// complete keeps the answer under the key and meters it, in one transaction. When the key
// was taken over meanwhile (this request outlived its lease), the usage is metered alone:
// the provider answered, so the account used it.
func (s *Service) complete(ctx context.Context, account string, c claim, resp Response) error {
	rec := idemRecord{State: idemDone, RequestHash: c.hash, CreatedAt: c.created, Response: &resp}
	it, err := item(c.key, c.rev+1, rec)
	if err != nil {
		return err
	}
	it.ExpiresAt = store.SecondsPrecision(c.created.Add(IdempotencyTTL))
	meter := s.meterWrites(account, resp)
	if len(it.Data) > store.MaxDataBytes {
		// An answer too large to keep (far beyond what MaxOutputTokens allows in practice)
		// is still the caller's, and metered; its key is released, as after a failure.
		s.log.WarnContext(ctx, "ai: an answer too large to keep under its idempotency key", "bytes", len(it.Data))
		if err := s.store.Transact(ctx, meter); err != nil {
			return err
		}
		s.release(ctx, c)
		return nil
	}
	writes := append([]store.Write{store.PutOp(it, store.RevisionIs(c.rev))}, meter...)
	// The route's audit event commits with the answer where the trail is in the store: one
	// commit fewer per request (a copilot proposal's generation stages a 200 its 201
	// replaces).
	event, audited, staged := httpapi.StageAudit(ctx, s.store, http.StatusOK)
	if staged {
		writes = append(writes, event)
	}
	err = s.store.Transact(ctx, writes)
	if errors.Is(err, store.ErrConditionFailed) {
		return s.store.Transact(ctx, meter)
	}
	if err == nil && staged {
		audited()
	}
	return err
}
