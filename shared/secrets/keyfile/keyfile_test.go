package keyfile_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/secrets/keyfile"
)

// A master key as an existing data directory holds it.
const masterHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func writeKey(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "master.key")
	require.NoError(t, os.WriteFile(path, []byte(content), mode))
	require.NoError(t, os.Chmod(path, mode)) // past the umask
	return path
}

func TestDeriveKeepsTheListCursorKeyOfExistingDataDirs(t *testing.T) {
	t.Parallel()
	k, err := keyfile.LoadOrCreate(writeKey(t, masterHex+"\n", 0o600))
	require.NoError(t, err)

	master, _ := hex.DecodeString(masterHex)
	m := hmac.New(sha256.New, master)
	m.Write([]byte("list-cursors-v1"))
	assert.Equal(t, m.Sum(nil), k.Derive("list-cursors-v1"), "HMAC-SHA256(master, purpose), as before")
	// Pinned, so a change to the derivation cannot pass by changing both sides.
	assert.Equal(t, "b896ab226b646c4528d82a4c08e333a5a486fb46b0eb9922c7feca1afca63269", hex.EncodeToString(k.Derive("list-cursors-v1")))
	assert.NotEqual(t, k.Derive("list-cursors-v1"), k.Derive("other"), "purposes are separated")
}

func TestRoundTripTamperAndWrongKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, err := keyfile.New(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	aad := []byte("bot_1/slack/signing-secret")
	for _, pt := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("secret"), 1000)} {
		sealed, err := k.Seal(ctx, pt, aad)
		require.NoError(t, err)
		assert.Equal(t, secrets.FormatKeyFile, sealed[0])
		got, err := k.Open(ctx, sealed, aad)
		require.NoError(t, err)
		assert.Equal(t, string(pt), string(got))
		// Only a long plaintext is meaningfully absent: one byte turns up in random bytes.
		if len(pt) >= 16 {
			assert.NotContains(t, string(sealed), string(pt))
		}
	}

	sealed, err := k.Seal(ctx, []byte("provider-key"), aad)
	require.NoError(t, err)
	again, err := k.Seal(ctx, []byte("provider-key"), aad)
	require.NoError(t, err)
	assert.NotEqual(t, sealed, again, "a fresh nonce each time")

	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		_, err := k.Open(ctx, bad, aad)
		assert.ErrorIs(t, err, secrets.ErrOpen, "flipped byte %d", i)
	}
	for name, bad := range map[string][]byte{"truncated": sealed[:len(sealed)-1], "empty": nil, "header only": sealed[:13]} {
		_, err := k.Open(ctx, bad, aad)
		assert.ErrorIs(t, err, secrets.ErrOpen, name)
	}
	_, err = k.Open(ctx, sealed, []byte("bot_2/slack/signing-secret"))
	assert.ErrorIs(t, err, secrets.ErrOpen, "a value moved to another record does not open")

	other, err := keyfile.New(bytes.Repeat([]byte{8}, 32))
	require.NoError(t, err)
	_, err = other.Open(ctx, sealed, aad)
	assert.ErrorIs(t, err, secrets.ErrOpen, "another master key does not open it")
}

func TestCreatesTheKeyFileOwnerOnly(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "master.key")
	k, err := keyfile.LoadOrCreate(path)
	require.NoError(t, err)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Regexp(t, `^[0-9a-f]{64}\n$`, string(b))

	again, err := keyfile.LoadOrCreate(path)
	require.NoError(t, err)
	assert.Equal(t, k.Derive("p"), again.Derive("p"), "the second open reads the same key")
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")
}

func TestRefusesCorruptOrExposedKeyFiles(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		content string
		mode    os.FileMode
		want    string
	}{
		"short":          {masterHex[:62], 0o600, "corrupt"},
		"not hex":        {strings.Repeat("zz", 32), 0o600, "corrupt"},
		"empty":          {"", 0o600, "corrupt"},
		"group readable": {masterHex, 0o640, "readable by others"},
		"world readable": {masterHex, 0o644, "chmod 600"},
	} {
		_, err := keyfile.LoadOrCreate(writeKey(t, c.content, c.mode))
		assert.ErrorContains(t, err, c.want, name)
	}
}

func TestConcurrentCreationAgreesOnOneKey(t *testing.T) {
	t.Parallel()
	for range 20 {
		path := filepath.Join(t.TempDir(), "master.key")
		const n = 8
		keys := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				k, err := keyfile.LoadOrCreate(path)
				errs[i] = err
				if err == nil {
					keys[i] = k.Derive("probe")
				}
			})
		}
		close(start)
		wg.Wait()
		for i := range n {
			require.NoError(t, errs[i])
			assert.Equal(t, keys[0], keys[i], "every opener uses the one key that was created")
		}
	}
}

func TestNothingPrintsTheKey(t *testing.T) {
	t.Parallel()
	path := writeKey(t, masterHex, 0o600)
	k, err := keyfile.LoadOrCreate(path)
	require.NoError(t, err)
	seal := hex.EncodeToString(k.Derive("secrets-aes-256-gcm-v1"))

	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
		fmt.Fprintf(&out, verb+"\n", k)
		fmt.Fprintf(&out, verb+"\n", *k)
		fmt.Fprintf(&out, verb+"\n", struct{ K *keyfile.Key }{k})
	}
	slog.New(slog.NewJSONHandler(&out, nil)).Info("oops", "key", k, "value", *k)
	slog.New(slog.NewTextHandler(&out, nil)).Info("oops", "key", k)
	s := out.String()
	assert.Contains(t, s, "[redacted]")
	assert.Contains(t, s, path, "the file is named, to help debugging")
	for _, secret := range []string{masterHex, strings.ToUpper(masterHex), seal, "[0 1 2 3 4 5 6 7", "\\x00\\x01\\x02"} {
		assert.NotContains(t, s, secret)
	}
}
