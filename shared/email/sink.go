package email

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Sink "sends" by writing each message, built and signed exactly as a real Sender would,
// to a file in Dir: <unix-nano>-<message-id>.eml, mode 0600. It is the local default, so
// the product works offline and tests can read what would have been sent. A file
// appears complete or not at all (it is written under a temporary name and renamed).
type Sink struct {
	// Dir receives the files; it is created with mode 0700 when missing.
	Dir string
	// DKIM, when not nil, signs every message before it is written.
	DKIM *Signer
}

var _ Sender = (*Sink)(nil)

// Send builds, signs and writes m. Failures are *SendError; only a message that does not
// build is permanent.
func (s *Sink) Send(ctx context.Context, m Message) (Receipt, error) {
	if err := ctx.Err(); err != nil {
		return Receipt{}, &SendError{Err: err}
	}
	if s.Dir == "" {
		return Receipt{}, configFailure("sink needs a Dir")
	}
	now := time.Now()
	raw, id, err := build(m, now)
	if err != nil {
		return Receipt{}, buildFailure(err)
	}
	if s.DKIM != nil {
		if raw, err = Sign(raw, *s.DKIM); err != nil {
			return Receipt{}, &SendError{Err: err}
		}
	}
	name := fmt.Sprintf("%019d-%s.eml", now.UnixNano(), fileSafe(id))
	if err := writeFileAtomic(s.Dir, name, raw); err != nil {
		return Receipt{}, &SendError{Err: fmt.Errorf("email: sink: %w", err)}
	}
	return Receipt{MessageID: id, Provider: "sink"}, nil
}

// List returns the paths of the messages in Dir, oldest first (file names start with
// the zero-padded send time). A missing Dir has no messages.
func (s *Sink) List() ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("email: sink: %w", err)
	}
	var paths []string
	for _, e := range entries { // ReadDir sorts by name
		name := e.Name()
		if e.Type().IsRegular() && strings.HasSuffix(name, ".eml") && !strings.HasPrefix(name, ".") {
			paths = append(paths, filepath.Join(s.Dir, name))
		}
	}
	return paths, nil
}

// writeFileAtomic writes data to dir/name with mode 0600 through a temporary file in the
// same directory, synced and then renamed, so readers never see a partial file.
func writeFileAtomic(dir, name string, data []byte) (err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*.eml") // created with mode 0600
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}

// fileSafe turns a Message-ID into a file name part: no angle brackets, characters
// other than A-Z a-z 0-9 . _ - @ replaced by '_', at most 100 bytes.
func fileSafe(id string) string {
	id = strings.TrimSuffix(strings.TrimPrefix(id, "<"), ">")
	b := []byte(id)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._-@", c) >= 0) {
			b[i] = '_'
		}
	}
	if len(b) > 100 {
		b = b[:100]
	}
	return string(b)
}
