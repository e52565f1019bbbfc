// Package kms seals secrets with envelope encryption under an AWS KMS key: a data key from
// GenerateDataKey (AES_256) encrypts values locally with AES-256-GCM, and the value carries
// the data key encrypted by KMS. Opening asks KMS to Decrypt that data key.
//
// One KMS call per value would make KMS the bottleneck and the bill, so a process keeps:
//   - one current data key for sealing, replaced after MaxAge or MaxUses seals;
//   - a bounded cache of decrypted data keys by their encrypted form, each entry kept for
//     MaxAge, so that revoking access to the KMS key takes effect within MaxAge.
//
// The KMS encryption context is the Sealer's (a purpose, fixed in configuration), not the
// per-value aad: a data key seals many values with different aad, and a per-value context
// would cost a KMS call per value. The context still scopes the data keys (IAM policies can
// condition on it, CloudTrail records it); the aad binds each value through GCM instead.
//
// A deployment seals with two Sealers under the same key: channel and other provider
// credentials with the default purpose (PurposeSecrets), CRM credentials with their own
// (PurposeCRMCredentials), so that a Lambda granted the key only under the CRM purpose
// (infra/access: a grant conditioned on kms:EncryptionContext:purpose) can open CRM
// credentials and nothing else.
package kms

import (
	"container/list"
	"context"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskms "github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/secrets/internal/envelope"
)

// The encryption context of the deployment's Sealers: one key, PurposeKey, whose value is
// the purpose the sealed values serve. IAM policies name these (ContextCondition).
const (
	// PurposeKey is the encryption context's key.
	PurposeKey = "purpose"
	// PurposeSecrets is the default purpose: provider credentials (channel tokens, DKIM
	// keys, VAPID keys, the customer SDK's identity secrets).
	PurposeSecrets = "botplatform-secrets"
	// PurposeCRMCredentials is the purpose of CRM connections' credentials (and the PKCE
	// verifiers of pending OAuth starts): the CRM family seals and opens them with a Sealer
	// of its own (family.Env.CRMSecrets).
	PurposeCRMCredentials = "botplatform-crm-credentials"
	// ContextCondition is the IAM condition key a policy restricts the key's use to one
	// purpose with.
	ContextCondition = "kms:EncryptionContext:" + PurposeKey
)

// Context is the encryption context of purpose.
func Context(purpose string) map[string]string { return map[string]string{PurposeKey: purpose} }

// API is the part of *kms.Client the Sealer uses.
type API interface {
	GenerateDataKey(ctx context.Context, in *awskms.GenerateDataKeyInput, optFns ...func(*awskms.Options)) (*awskms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *awskms.DecryptInput, optFns ...func(*awskms.Options)) (*awskms.DecryptOutput, error)
}

// Config configures a Sealer.
type Config struct {
	// KeyID is the KMS key (id, ARN, alias name or alias ARN). Required. Decrypt names it
	// too, so a value whose data key was encrypted under another key is refused.
	KeyID string
	// EncryptionContext is passed to every KMS call (default Context(PurposeSecrets):
	// {"purpose": "botplatform-secrets"}).
	// It is part of the key's identity: changing it makes existing values unreadable.
	EncryptionContext map[string]string
	// MaxAge bounds how long a data key seals, and how long a decrypted one stays cached
	// (default 1 hour).
	MaxAge time.Duration
	// MaxUses bounds the values sealed with one data key (default 2^20, far below the 2^32
	// values GCM's random nonces allow per key).
	MaxUses int64
	// CacheSize bounds the decrypted data keys kept (default 64; least recently used go first).
	CacheSize int
	// Now is the clock for expiry (default time.Now).
	Now func() time.Time
}

// Sealer is a secrets.Sealer over KMS. It is safe for concurrent use. Its String,
// GoString, Format and LogValue print no key material.
type Sealer struct {
	client API
	cfg    Config
	st     *state
}

var _ secrets.Sealer = (*Sealer)(nil)

// state is the mutable part, behind a pointer so that Sealer values can be printed or
// copied without copying locks or showing keys.
type state struct {
	sealMu  sync.Mutex
	current *dataKey

	cacheMu  sync.Mutex
	cache    map[string]*list.Element // by encrypted data key
	lru      *list.List               // of *dataKey, most recent first
	inflight map[string]*fetch        // Decrypt calls under way, shared by concurrent Opens
}

// dataKey is a plaintext data key ready to use, with its encrypted form.
type dataKey struct {
	encrypted []byte
	aead      cipher.AEAD
	expires   time.Time
	uses      int64 // seals so far (current key only)
}

type fetch struct {
	done chan struct{}
	key  *dataKey
	err  error
}

// New returns a Sealer over client (a *kms.Client built once per container).
func New(client API, cfg Config) (*Sealer, error) {
	if cfg.EncryptionContext == nil {
		cfg.EncryptionContext = Context(PurposeSecrets)
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = time.Hour
	}
	if cfg.MaxUses == 0 {
		cfg.MaxUses = 1 << 20
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = 64
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("a KMS client is required"))
	}
	if cfg.KeyID == "" {
		errs = append(errs, errors.New("a KMS key id is required"))
	}
	if len(cfg.EncryptionContext) == 0 {
		errs = append(errs, errors.New("the encryption context may not be empty"))
	}
	if cfg.MaxAge < 0 || cfg.MaxUses < 1 || cfg.CacheSize < 1 {
		errs = append(errs, errors.New("max age, max uses and cache size must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("kms sealer config: %w", err)
	}
	return &Sealer{client: client, cfg: cfg, st: &state{
		cache:    make(map[string]*list.Element),
		lru:      list.New(),
		inflight: make(map[string]*fetch),
	}}, nil
}

// Seal implements secrets.Sealer.
func (s *Sealer) Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error) {
	dk, err := s.sealingKey(ctx)
	if err != nil {
		return nil, err
	}
	if len(dk.encrypted) > 0xffff {
		return nil, errors.New("secrets: encrypted data key too long")
	}
	header := make([]byte, 3, 3+len(dk.encrypted))
	header[0] = secrets.FormatKMS
	binary.BigEndian.PutUint16(header[1:3], uint16(len(dk.encrypted)))
	header = append(header, dk.encrypted...)
	return envelope.Seal(dk.aead, header, plaintext, aad), nil
}

// sealingKey returns the current data key, generating a new one when there is none or it
// has reached MaxAge or MaxUses. Concurrent Seals wait for one GenerateDataKey.
func (s *Sealer) sealingKey(ctx context.Context) (*dataKey, error) {
	st := s.st
	st.sealMu.Lock()
	defer st.sealMu.Unlock()
	now := s.cfg.Now()
	if k := st.current; k != nil && now.Before(k.expires) && k.uses < s.cfg.MaxUses {
		k.uses++
		return k, nil
	}
	out, err := s.client.GenerateDataKey(ctx, &awskms.GenerateDataKeyInput{
		KeyId:             aws.String(s.cfg.KeyID),
		KeySpec:           types.DataKeySpecAes256,
		EncryptionContext: s.cfg.EncryptionContext,
	})
	if err != nil {
		return nil, fmt.Errorf("secrets: kms generate data key: %w", err)
	}
	aead, err := envelope.NewAEAD(out.Plaintext)
	clear(out.Plaintext) // the AEAD holds its own expanded key
	if err != nil {
		return nil, fmt.Errorf("secrets: kms data key: %w", err)
	}
	k := &dataKey{encrypted: out.CiphertextBlob, aead: aead, expires: now.Add(s.cfg.MaxAge), uses: 1}
	st.current = k
	// Values sealed now are often read back soon (in this process): spare that Decrypt.
	s.remember(&dataKey{encrypted: k.encrypted, aead: aead, expires: k.expires})
	return k, nil
}

// Open implements secrets.Sealer.
func (s *Sealer) Open(ctx context.Context, sealed, aad []byte) ([]byte, error) {
	if len(sealed) < 3 || sealed[0] != secrets.FormatKMS {
		return nil, fmt.Errorf("%w: not a KMS sealed value", secrets.ErrOpen)
	}
	n := int(binary.BigEndian.Uint16(sealed[1:3]))
	if n == 0 || len(sealed) < 3+n+envelope.NonceSize+envelope.Overhead {
		return nil, secrets.ErrOpen
	}
	dk, err := s.openingKey(ctx, sealed[3:3+n])
	if err != nil {
		return nil, err
	}
	pt, err := envelope.Open(dk.aead, sealed, 3+n, aad)
	if err != nil {
		return nil, secrets.ErrOpen
	}
	return pt, nil
}

// openingKey returns the data key whose encrypted form is edk, from the cache or from one
// KMS Decrypt shared by every concurrent Open that needs it.
func (s *Sealer) openingKey(ctx context.Context, edk []byte) (*dataKey, error) {
	st := s.st
	id := string(edk)
	st.cacheMu.Lock()
	if el, ok := st.cache[id]; ok {
		k := el.Value.(*dataKey)
		if s.cfg.Now().Before(k.expires) {
			st.lru.MoveToFront(el)
			st.cacheMu.Unlock()
			return k, nil
		}
		st.lru.Remove(el)
		delete(st.cache, id)
	}
	f, waiting := st.inflight[id]
	if !waiting {
		f = &fetch{done: make(chan struct{})}
		st.inflight[id] = f
	}
	st.cacheMu.Unlock()

	if waiting {
		select {
		case <-f.done:
			return f.key, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.key, f.err = s.decrypt(ctx, edk)
	st.cacheMu.Lock()
	delete(st.inflight, id)
	st.cacheMu.Unlock()
	if f.err == nil {
		s.remember(f.key)
	}
	close(f.done)
	return f.key, f.err
}

func (s *Sealer) decrypt(ctx context.Context, edk []byte) (*dataKey, error) {
	out, err := s.client.Decrypt(ctx, &awskms.DecryptInput{
		CiphertextBlob:    edk,
		KeyId:             aws.String(s.cfg.KeyID),
		EncryptionContext: s.cfg.EncryptionContext,
	})
	if err != nil {
		var invalid *types.InvalidCiphertextException
		var incorrect *types.IncorrectKeyException
		if errors.As(err, &invalid) || errors.As(err, &incorrect) {
			// Not our data key, or not under our context: the value does not open.
			return nil, secrets.ErrOpen
		}
		return nil, fmt.Errorf("secrets: kms decrypt: %w", err)
	}
	aead, err := envelope.NewAEAD(out.Plaintext)
	clear(out.Plaintext)
	if err != nil {
		return nil, fmt.Errorf("secrets: kms data key: %w", err)
	}
	return &dataKey{encrypted: edk, aead: aead, expires: s.cfg.Now().Add(s.cfg.MaxAge)}, nil
}

// remember caches k, evicting the least recently used keys beyond CacheSize.
func (s *Sealer) remember(k *dataKey) {
	st := s.st
	st.cacheMu.Lock()
	defer st.cacheMu.Unlock()
	id := string(k.encrypted)
	if el, ok := st.cache[id]; ok {
		el.Value = k
		st.lru.MoveToFront(el)
		return
	}
	st.cache[id] = st.lru.PushFront(k)
	for st.lru.Len() > s.cfg.CacheSize {
		old := st.lru.Back()
		st.lru.Remove(old)
		delete(st.cache, string(old.Value.(*dataKey).encrypted))
	}
}

// String names the KMS key, never a data key.
func (s Sealer) String() string { return "kms.Sealer{" + s.cfg.KeyID + ", [redacted]}" }

// GoString is String, so %#v prints no key either.
func (s Sealer) GoString() string { return s.String() }

// Format prints String for every verb.
func (s Sealer) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// LogValue keeps key material out of structured logs.
func (s Sealer) LogValue() slog.Value { return slog.StringValue(s.String()) }
