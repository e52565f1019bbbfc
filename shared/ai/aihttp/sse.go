package aihttp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Bounds of a stream.
const (
	// MaxLineBytes bounds one line of an event stream (a chunk of JSON): a provider's chunk is
	// a few hundred bytes, so a longer line is a broken or hostile answer, refused before it
	// is held in memory whole.
	MaxLineBytes = 1 << 20
	// MaxStreamBytes bounds a whole event stream: a long answer's chunks, each repeating its
	// envelope, stay well under it.
	MaxStreamBytes = 32 << 20
)

// ErrLineTooLong is returned by Reader.Next for a line over MaxLineBytes.
var ErrLineTooLong = fmt.Errorf("an event stream line exceeds %d bytes", MaxLineBytes)

// ErrTooLarge is returned when an answer exceeds its bound (MaxResponseBytes for a JSON
// answer, the Reader's limit for a stream).
var ErrTooLarge = errors.New("the answer exceeds its size bound")

// Event is one server-sent event: its type (the event field, "" when it had none) and its
// data (the data fields' values joined with "\n").
type Event struct {
	Name string
	Data []byte
}

// Reader reads the events of a text/event-stream as the HTML Standard parses them: lines end
// with LF, CRLF or CR; a line starting with a colon is a comment (a keep-alive); "field:
// value" sets a field, one space after the colon dropped; a blank line dispatches the event,
// unless it had no data. Fields other than event and data (id, retry) are ignored, since the
// providers' APIs do not resume a stream. An event not closed by a blank line when the stream
// ends is dropped, as the standard says: a cut stream then shows as one without its last
// event rather than as a last event cut short.
type Reader struct {
	sc   *bufio.Scanner
	seen func()
}

// NewReader reads events from r, at most limit bytes in all (MaxStreamBytes when limit <=
// 0); seen, when not nil, is called after every line read, comments included (a keep-alive
// shows the stream is alive).
func NewReader(r io.Reader, limit int64, seen func()) *Reader {
	if limit <= 0 {
		limit = MaxStreamBytes
	}
	sc := bufio.NewScanner(&limitReader{r: r, n: limit})
	// The buffer must hold a line and its terminator.
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes+2)
	sc.Split(splitLines)
	return &Reader{sc: sc, seen: seen}
}

// Next returns the next event: io.EOF when the stream ended, ErrLineTooLong or ErrTooLarge
// past a bound, or the underlying reader's error (a cancelled request's).
func (r *Reader) Next() (Event, error) {
	var (
		ev      Event
		data    bytes.Buffer
		hasData bool
	)
	for r.sc.Scan() {
		if r.seen != nil {
			r.seen()
		}
		line := r.sc.Bytes()
		if len(line) == 0 {
			if hasData {
				ev.Data = bytes.Clone(data.Bytes())
				return ev, nil
			}
			ev = Event{}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
			if data.Len() > MaxLineBytes {
				return Event{}, ErrLineTooLong
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Event{}, ErrLineTooLong
		}
		return Event{}, err
	}
	return Event{}, io.EOF
}

// splitLines is a bufio.SplitFunc for the line ends of an event stream: LF, CRLF or a lone CR.
func splitLines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0:
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	}
	// A CR at the end of what was read: an LF may follow.
	return 0, nil, nil
}

// limitReader reads at most n bytes of r and then fails with ErrTooLarge (io.LimitReader
// would end the stream quietly, which would read as a provider's early end).
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		// One byte more tells a stream of exactly the limit from a longer one.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			return 0, ErrTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}
