// Package keyfile is the local process's key material: a 32-byte master key kept as 64 hex
// characters in a file of the data directory (mode 0600), created on first use. Everything
// is derived from it by purpose, so one leaked derived key (say, printed in a debugging
// session) exposes nothing else:
//
//   - Derive(purpose) gives subkeys, e.g. the list cursor key ("list-cursors-v1");
//   - Seal and Open implement secrets.Sealer with AES-256-GCM under the subkey
//     "secrets-aes-256-gcm-v1".
package keyfile

import (
	"context"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/secrets/internal/envelope"
)

// sealPurpose names the sealing subkey. A new version of the sealed format would take a
// new purpose, so both keys can coexist during a migration.
const sealPurpose = "secrets-aes-256-gcm-v1"

// Key is the master key and the sealer built on it. Its String, GoString, Format and
// LogValue print no key material, so it is safe to pass to a logger by mistake.
type Key struct {
	path   string
	master []byte
	aead   cipher.AEAD
}

var _ secrets.Sealer = (*Key)(nil)

// New returns a Key over master (32 bytes), for tests and tools that hold the key already.
func New(master []byte) (*Key, error) {
	if len(master) != envelope.KeySize {
		return nil, fmt.Errorf("keyfile: master key is %d bytes, want %d", len(master), envelope.KeySize)
	}
	k := &Key{master: append([]byte(nil), master...)}
	aead, err := envelope.NewAEAD(k.Derive(sealPurpose))
	if err != nil {
		return nil, err
	}
	k.aead = aead
	return k, nil
}

// LoadOrCreate reads the master key at path, or creates it with a fresh random key. When
// several processes start at once (the server and an admin command on a new data
// directory), exactly one key is created and all of them use it.
func LoadOrCreate(path string) (*Key, error) {
	// Three rounds cover every interleaving: a lost race to create is followed by a read
	// of the winner's complete file.
	for range 3 {
		k, err := load(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return k, err
		}
		if err := create(path); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("keyfile: %s keeps disappearing", path)
}

func load(path string) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("keyfile: read master key: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		// Like ssh with a private key: refuse rather than keep using a key others can read.
		return nil, fmt.Errorf("keyfile: master key %s is readable by others (mode %04o); run chmod 600 on it", path, st.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return nil, fmt.Errorf("keyfile: read master key: %w", err)
	}
	master, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(master) != envelope.KeySize {
		return nil, fmt.Errorf("keyfile: master key %s is corrupt: want 64 hex characters", path)
	}
	k, err := New(master)
	if err != nil {
		return nil, err
	}
	k.path = path
	return k, nil
}

// create writes a new key to a temporary file and links it into place. link(2) fails when
// the name exists, so of several creators exactly one wins (as with O_EXCL), and the name
// never shows a half-written file: with O_EXCL alone, a reader racing the creator could
// read it empty and call the key corrupt, and a creator dying mid-write would leave it so.
func create(path string) error {
	master := make([]byte, envelope.KeySize)
	if _, err := rand.Read(master); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".master.key.tmp-*") // mode 0600
	if err != nil {
		return fmt.Errorf("keyfile: create master key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		tmp.Close()
		return fmt.Errorf("keyfile: create master key: %w", err)
	}
	if _, err := tmp.WriteString(hex.EncodeToString(master) + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("keyfile: write master key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("keyfile: write master key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("keyfile: write master key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		// A file system without hard links: fall back to an exclusive create.
		return createExclusive(path, master)
	}
	// Make the new name durable before anything is sealed under the key.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

func createExclusive(path string, master []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("keyfile: create master key: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(master) + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("keyfile: write master key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("keyfile: write master key: %w", err)
	}
	return f.Close()
}

// Derive returns the 32-byte subkey for purpose: HMAC-SHA256(master, purpose). The
// derivation is fixed forever: data directories hold values made with it (the list cursor
// key is Derive("list-cursors-v1")).
func (k *Key) Derive(purpose string) []byte {
	m := hmac.New(sha256.New, k.master)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// Seal implements secrets.Sealer.
func (k *Key) Seal(_ context.Context, plaintext, aad []byte) ([]byte, error) {
	return envelope.Seal(k.aead, []byte{secrets.FormatKeyFile}, plaintext, aad), nil
}

// Open implements secrets.Sealer.
func (k *Key) Open(_ context.Context, sealed, aad []byte) ([]byte, error) {
	if len(sealed) == 0 || sealed[0] != secrets.FormatKeyFile {
		return nil, fmt.Errorf("%w: not a key-file sealed value", secrets.ErrOpen)
	}
	pt, err := envelope.Open(k.aead, sealed, 1, aad)
	if err != nil {
		return nil, secrets.ErrOpen
	}
	return pt, nil
}

// String names the key file, never the key.
func (k Key) String() string {
	if k.path == "" {
		return "keyfile.Key{[redacted]}"
	}
	return "keyfile.Key{" + k.path + ", [redacted]}"
}

// GoString is String, so %#v prints no key either.
func (k Key) GoString() string { return k.String() }

// Format prints String for every verb: without it, %d or %x of the struct would print
// the key's bytes.
func (k Key) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, k.String()) }

// LogValue keeps the key out of structured logs.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }
