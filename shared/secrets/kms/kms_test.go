package kms_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	awskms "github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/awsfake"
	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
)

const (
	keyAlias = "alias/botplatform-secrets"
	keyARN   = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
)

// fakeKMS issues data keys and decrypts them only under the same key and encryption
// context, as KMS does. Encrypted data keys are opaque random blobs it remembers.
type fakeKMS struct {
	*awsfake.Server
	t *testing.T

	mu     sync.Mutex
	keys   map[string]issued // by encrypted data key
	outage bool
	plains [][]byte // every plaintext data key handed out, to look for in logs
}

type issued struct {
	plaintext []byte
	context   map[string]string
}

func newFakeKMS(t *testing.T) *fakeKMS {
	f := &fakeKMS{Server: awsfake.New(t, awsfake.KMS), t: t, keys: map[string]issued{}}
	f.Handle("GenerateDataKey", f.generateDataKey)
	f.Handle("Decrypt", f.decrypt)
	return f
}

func strict(t *testing.T, raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	assert.NoError(t, err)
	return err
}

func (f *fakeKMS) generateDataKey(raw json.RawMessage) (any, *awsfake.Error) {
	var req struct {
		KeyId             string
		KeySpec           string
		EncryptionContext map[string]string
	}
	if err := strict(f.t, raw, &req); err != nil {
		return nil, &awsfake.Error{Status: 400, Type: "ValidationException", Message: err.Error()}
	}
	assert.Equal(f.t, keyAlias, req.KeyId)
	assert.Equal(f.t, "AES_256", req.KeySpec)
	assert.NotEmpty(f.t, req.EncryptionContext)
	pt, edk := make([]byte, 32), make([]byte, 48)
	_, _ = rand.Read(pt)
	_, _ = rand.Read(edk)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys[string(edk)] = issued{plaintext: pt, context: req.EncryptionContext}
	f.plains = append(f.plains, pt)
	// []byte marshals as base64, the JSON protocol's blob encoding.
	return map[string]any{"KeyId": keyARN, "Plaintext": pt, "CiphertextBlob": edk}, nil
}

func (f *fakeKMS) decrypt(raw json.RawMessage) (any, *awsfake.Error) {
	var req struct {
		CiphertextBlob    []byte
		KeyId             string
		EncryptionContext map[string]string
	}
	if err := strict(f.t, raw, &req); err != nil {
		return nil, &awsfake.Error{Status: 400, Type: "ValidationException", Message: err.Error()}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.outage {
		return nil, &awsfake.Error{Status: 500, Type: "KMSInternalException", Message: "try later"}
	}
	if req.KeyId != keyAlias {
		return nil, &awsfake.Error{Status: 400, Type: "IncorrectKeyException", Message: "wrong key"}
	}
	k, ok := f.keys[string(req.CiphertextBlob)]
	if !ok || !maps.Equal(k.context, req.EncryptionContext) {
		return nil, &awsfake.Error{Status: 400, Type: "InvalidCiphertextException", Message: ""}
	}
	return map[string]any{"KeyId": keyARN, "Plaintext": k.plaintext, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"}, nil
}

func (f *fakeKMS) counts() (generate, decrypt int) {
	return len(f.Calls("GenerateDataKey")), len(f.Calls("Decrypt"))
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

func newSealer(t *testing.T, f *fakeKMS, cfg kms.Config) *kms.Sealer {
	t.Helper()
	if cfg.KeyID == "" {
		cfg.KeyID = keyAlias
	}
	s, err := kms.New(awskms.NewFromConfig(f.Config()), cfg)
	require.NoError(t, err)
	return s
}

var ctx = context.Background()

func sealN(t *testing.T, s *kms.Sealer, n int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range out {
		var err error
		out[i], err = s.Seal(ctx, fmt.Appendf(nil, "secret %d", i), fmt.Appendf(nil, "bot_%d", i))
		require.NoError(t, err)
	}
	return out
}

func openAll(t *testing.T, s *kms.Sealer, sealed [][]byte) {
	t.Helper()
	for i, v := range sealed {
		pt, err := s.Open(ctx, v, fmt.Appendf(nil, "bot_%d", i))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("secret %d", i), string(pt))
	}
}

func TestRoundTripWithOneDataKeyPerProcess(t *testing.T) {
	t.Parallel()
	f := newFakeKMS(t)
	a := newSealer(t, f, kms.Config{})
	sealed := sealN(t, a, 100)
	assert.Equal(t, secrets.FormatKMS, sealed[0][0])
	openAll(t, a, sealed)
	g, d := f.counts()
	assert.Equal(t, 1, g, "one data key seals them all")
	assert.Equal(t, 0, d, "the sealing process opens from its cache")

	b := newSealer(t, f, kms.Config{}) // another process (or a cold Lambda)
	openAll(t, b, sealed)
	openAll(t, b, sealed)
	_, d = f.counts()
	assert.Equal(t, 1, d, "one Decrypt per data key, then the cache")
}

func TestConcurrentOpensShareOneDecrypt(t *testing.T) {
	t.Parallel()
	f := newFakeKMS(t)
	sealed := sealN(t, newSealer(t, f, kms.Config{}), 1)
	b := newSealer(t, f, kms.Config{})
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			pt, err := b.Open(ctx, sealed[0], []byte("bot_0"))
			assert.NoError(t, err)
			assert.Equal(t, "secret 0", string(pt))
		})
	}
	wg.Wait()
	_, d := f.counts()
	assert.Equal(t, 1, d)
}

func TestDataKeyRotationAndCacheExpiry(t *testing.T) {
	t.Parallel()
	f := newFakeKMS(t)
	byUses := newSealer(t, f, kms.Config{MaxUses: 10})
	sealN(t, byUses, 25)
	g, _ := f.counts()
	assert.Equal(t, 3, g, "a new data key every 10 seals")

	f2 := newFakeKMS(t)
	c := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	byAge := newSealer(t, f2, kms.Config{MaxAge: time.Hour, Now: c.Now})
	first := sealN(t, byAge, 2)
	c.Add(59 * time.Minute)
	sealN(t, byAge, 1)
	g, _ = f2.counts()
	assert.Equal(t, 1, g)
	c.Add(2 * time.Minute)
	sealN(t, byAge, 1)
	g, _ = f2.counts()
	assert.Equal(t, 2, g, "a new data key after MaxAge")

	// A decrypted data key is kept for MaxAge too: access revoked in KMS bites within it.
	reader := newSealer(t, f2, kms.Config{MaxAge: time.Hour, Now: c.Now})
	openAll(t, reader, first)
	c.Add(30 * time.Minute)
	openAll(t, reader, first)
	_, d := f2.counts()
	assert.Equal(t, 1, d)
	c.Add(31 * time.Minute)
	openAll(t, reader, first)
	_, d = f2.counts()
	assert.Equal(t, 2, d, "an expired cache entry is decrypted again")
}

func TestDecryptCacheIsBounded(t *testing.T) {
	t.Parallel()
	f := newFakeKMS(t)
	sealed := sealN(t, newSealer(t, f, kms.Config{MaxUses: 1}), 3) // three data keys
	b := newSealer(t, f, kms.Config{CacheSize: 2})
	open := func(i int) {
		_, err := b.Open(ctx, sealed[i], fmt.Appendf(nil, "bot_%d", i))
		require.NoError(t, err)
	}
	open(0)
	open(1)
	open(2) // evicts 0, the least recently used
	open(2)
	open(1)
	_, d := f.counts()
	assert.Equal(t, 3, d)
	open(0)
	_, d = f.counts()
	assert.Equal(t, 4, d, "the evicted key is fetched again")
}

func TestTamperWrongAADAndWrongKeyDoNotOpen(t *testing.T) {
	t.Parallel()
	f := newFakeKMS(t)
	a := newSealer(t, f, kms.Config{})
	sealed, err := a.Seal(ctx, []byte("provider-key"), []byte("bot_1/openai"))
	require.NoError(t, err)

	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		_, err := a.Open(ctx, bad, []byte("bot_1/openai"))
		assert.ErrorIs(t, err, secrets.ErrOpen, "flipped byte %d", i)
	}
	for name, bad := range map[string][]byte{"empty": nil, "truncated": sealed[:len(sealed)-1], "header only": sealed[:3+48]} {
		_, err := a.Open(ctx, bad, []byte("bot_1/openai"))
		assert.ErrorIs(t, err, secrets.ErrOpen, name)
	}
	_, err = a.Open(ctx, sealed, []byte("bot_2/openai"))
	assert.ErrorIs(t, err, secrets.ErrOpen, "a value moved to another record does not open")

	otherContext := newSealer(t, f, kms.Config{EncryptionContext: map[string]string{"purpose": "something-else"}})
	_, err = otherContext.Open(ctx, sealed, []byte("bot_1/openai"))
	assert.ErrorIs(t, err, secrets.ErrOpen, "KMS refuses the data key under another context")
	// The CRM family's sealer (same key, its own purpose) opens no channel credential.
	crmSealer := newSealer(t, f, kms.Config{EncryptionContext: kms.Context(kms.PurposeCRMCredentials)})
	_, err = crmSealer.Open(ctx, sealed, []byte("bot_1/openai"))
	assert.ErrorIs(t, err, secrets.ErrOpen, "the CRM purpose opens no value sealed under the default purpose")

	otherKey := newSealer(t, f, kms.Config{KeyID: "alias/another"})
	_, err = otherKey.Open(ctx, sealed, []byte("bot_1/openai"))
	assert.ErrorIs(t, err, secrets.ErrOpen, "KMS refuses the data key under another key")

	local, err := keyfile.New(bytes.Repeat([]byte{1}, 32))
	require.NoError(t, err)
	localSealed, err := local.Seal(ctx, []byte("x"), nil)
	require.NoError(t, err)
	_, err = a.Open(ctx, localSealed, nil)
	assert.ErrorIs(t, err, secrets.ErrOpen)
	assert.ErrorContains(t, err, "not a KMS sealed value")
	_, err = local.Open(ctx, sealed, []byte("bot_1/openai"))
	assert.ErrorContains(t, err, "not a key-file sealed value")
}

func TestKMSOutageIsNotTampering(t *testing.T) {
	t.Parallel()
	f := newFakeKMS(t)
	sealed := sealN(t, newSealer(t, f, kms.Config{}), 1)
	f.mu.Lock()
	f.outage = true
	f.mu.Unlock()
	_, err := newSealer(t, f, kms.Config{}).Open(ctx, sealed[0], []byte("bot_0"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, secrets.ErrOpen, "a retryable failure, not a bad value")
	assert.ErrorContains(t, err, "KMSInternalException")
}

func TestConfigAndRedaction(t *testing.T) {
	t.Parallel()
	_, err := kms.New(nil, kms.Config{CacheSize: -1})
	assert.ErrorContains(t, err, "client")
	assert.ErrorContains(t, err, "key id")
	assert.ErrorContains(t, err, "cache size")

	f := newFakeKMS(t)
	s := newSealer(t, f, kms.Config{})
	sealed := sealN(t, s, 2)
	openAll(t, s, sealed)
	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d", "%q"} {
		fmt.Fprintf(&out, verb+"\n", s)
		fmt.Fprintf(&out, verb+"\n", *s)
	}
	slog.New(slog.NewJSONHandler(&out, nil)).Info("oops", "sealer", s)
	text := out.String()
	assert.Contains(t, text, "kms.Sealer{"+keyAlias+", [redacted]}")
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.plains)
	for _, pt := range f.plains {
		for _, form := range []string{string(pt), hex.EncodeToString(pt), fmt.Sprint(pt)} {
			assert.False(t, strings.Contains(text, form), "a data key was printed")
		}
	}
}
