package email

import (
	"bytes"
	"context"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSinkWritesSignedPrivateFiles(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "outbox") // missing: Send creates it
	sink := &Sink{Dir: dir, DKIM: testSigner()}

	first := sampleMessage()
	first.Subject = "first"
	second := sampleMessage()
	second.Subject = "second"
	r1, err := sink.Send(context.Background(), first)
	require.NoError(t, err)
	r2, err := sink.Send(context.Background(), second)
	require.NoError(t, err)
	assert.Equal(t, "sink", r1.Provider)

	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())

	paths, err := sink.List()
	require.NoError(t, err)
	require.Len(t, paths, 2)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no temporary files are left behind")

	nameRE := regexp.MustCompile(`^\d{19}-[0-9a-f]{32}@example\.com\.eml$`)
	for i, p := range paths {
		assert.Regexp(t, nameRE, filepath.Base(p))
		info, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), p)

		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		requireCRLF(t, raw)
		verifyDKIM(t, raw)
		msg, err := mail.ReadMessage(bytes.NewReader(raw))
		require.NoError(t, err)
		want := []Receipt{r1, r2}[i]
		assert.Equal(t, want.MessageID, msg.Header.Get("Message-ID"), "List is in send order")
		assert.Equal(t, []string{"first", "second"}[i], msg.Header.Get("Subject"))
		parseMultipart(t, raw)
	}
}

func TestSinkRefusesInvalidMessages(t *testing.T) {
	t.Parallel()
	sink := &Sink{Dir: t.TempDir()}
	m := sampleMessage()
	m.To.Name = "x\nBcc: y@example.net"
	_, err := sink.Send(context.Background(), m)
	assert.True(t, IsPermanent(err))
	assert.ErrorIs(t, err, ErrInvalidMessage)
	paths, err := sink.List()
	require.NoError(t, err)
	assert.Empty(t, paths)

	_, err = (&Sink{}).Send(context.Background(), sampleMessage())
	assert.ErrorIs(t, err, ErrConfig)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = sink.Send(ctx, sampleMessage())
	assert.ErrorIs(t, err, context.Canceled)
}

func TestSinkListMissingDirAndIgnoredFiles(t *testing.T) {
	t.Parallel()
	paths, err := (&Sink{Dir: filepath.Join(t.TempDir(), "nope")}).List()
	require.NoError(t, err)
	assert.Empty(t, paths)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".tmp-123.eml"), []byte("partial"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "0000000000000000001-a.eml"), []byte("x"), 0o600))
	paths, err = (&Sink{Dir: dir}).List()
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "0000000000000000001-a.eml")}, paths)
}

func TestFileSafe(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "abc.1_x@ex-ample.com", fileSafe("<abc.1/x@ex-ample.com>"))
	assert.Equal(t, "a_.._.._b", fileSafe("<a/../..\\b>"), "no path separators survive")
	assert.Len(t, fileSafe("<"+string(bytes.Repeat([]byte("a"), 300))+"@b>"), 100)
}
