// Package secretstest seals secrets for tests and records, like sqlitetest records store
// operations, what each seal and open would ask of KMS on AWS: the KMS action and the
// encryption context purpose (shared/secrets/kms) of the sealer that made it, in this test
// binary's one record (Actions), so that a family's tests can check that the AWS role of
// the code they exercise is granted the key for what that code does
// (infra/access/accesstest).
package secretstest

import (
	"bytes"
	"context"
	"sync"

	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// The KMS actions the AWS sealer (shared/secrets/kms) calls: Seal takes a data key from
// GenerateDataKey, Open has KMS Decrypt the data key a value carries. Both are cached per
// process there, but a Lambda must be granted each action its code may need after a cold
// start, so every Seal and Open is recorded.
const (
	ActionSeal = "kms:GenerateDataKey"
	ActionOpen = "kms:Decrypt"
)

// Use is one recorded use of the key: a KMS action under an encryption context purpose.
type Use struct {
	Action  string
	Purpose string
}

// Sealer is a secrets.Sealer that records each Seal and Open as the KMS action the AWS
// sealer of Purpose would make, then hands it to the sealer it wraps.
type Sealer struct {
	secrets.Sealer
	// Purpose is the encryption context purpose the AWS sealer in this sealer's place
	// seals under (kms.PurposeSecrets, kms.PurposeCRMCredentials).
	Purpose string
}

var _ secrets.Sealer = (*Sealer)(nil)

// Wrap returns s recording its uses under purpose. A Sealer already recording is returned
// as it is: its purpose is the one it was made for.
func Wrap(s secrets.Sealer, purpose string) secrets.Sealer {
	if s == nil {
		return nil
	}
	if r, ok := s.(*Sealer); ok {
		return r
	}
	return &Sealer{Sealer: s, Purpose: purpose}
}

// New returns a recording sealer for purpose over a key file sealer with a fixed master
// key (every byte b), so that tests may make sealers that cannot open each other's values.
func New(purpose string, b byte) *Sealer {
	k, err := keyfile.New(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	return &Sealer{Sealer: k, Purpose: purpose}
}

// Seal implements secrets.Sealer.
func (s *Sealer) Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error) {
	note(ctx, Use{Action: ActionSeal, Purpose: s.Purpose}, "Seal "+string(aad))
	return s.Sealer.Seal(ctx, plaintext, aad)
}

// Open implements secrets.Sealer.
func (s *Sealer) Open(ctx context.Context, sealed, aad []byte) ([]byte, error) {
	note(ctx, Use{Action: ActionOpen, Purpose: s.Purpose}, "Open "+string(aad))
	return s.Sealer.Open(ctx, sealed, aad)
}

// record is the binary's record: per Lambda ("" for the family's own), each use with the
// first operation that made it. Process-wide on purpose, as sqlitetest's is.
var record = struct {
	sync.Mutex
	uses map[string]map[Use]string
}{uses: map[string]map[Use]string{}}

// note records u for the Lambda ctx is attributed to (sqlitetest.As), unless ctx is a
// test's own setup (sqlitetest.Unrecorded).
func note(ctx context.Context, u Use, what string) {
	lambda, recorded := sqlitetest.Lambda(ctx)
	if !recorded {
		return
	}
	record.Lock()
	defer record.Unlock()
	m := record.uses[lambda]
	if m == nil {
		m = map[Use]string{}
		record.uses[lambda] = m
	}
	if _, ok := m[u]; !ok {
		m[u] = what
	}
}

// Uses returns the uses of the key recorded so far for each Lambda ("" for the family's
// own), each with an operation that made it ("Seal crm/conn_1/credentials").
func Uses() map[string]map[Use]string {
	record.Lock()
	defer record.Unlock()
	out := make(map[string]map[Use]string, len(record.uses))
	for l, m := range record.uses {
		c := make(map[Use]string, len(m))
		for u, w := range m {
			c[u] = w
		}
		out[l] = c
	}
	return out
}
