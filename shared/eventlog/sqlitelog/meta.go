package sqlitelog

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/botplatform/api/shared/eventlog"
)

// The meta column holds what reports rarely filter on, in a compact binary form read without
// a JSON parse: a scan reads fewer columns per row (each costs a call into SQLite), and most
// events' meta is two bytes.
//
//	byte 0   the source, as its index in sources
//	byte 1   flags: metaClientID, metaProps, metaRevenue
//	then, for each flag set, in that order:
//	         client id       uvarint length, bytes
//	         properties      uvarint length, JSON object
//	         revenue         varint minor units, 3 bytes of currency
const (
	metaClientID = 1 << iota
	metaProps
	metaRevenue
)

// sources are the eventlog sources by their code in meta. Append, never reorder.
var sources = []string{eventlog.SourceRuntime, eventlog.SourceBuilder, eventlog.SourceBroadcast,
	eventlog.SourceEmail, eventlog.SourcePush, eventlog.SourcePopup, eventlog.SourceCustom}

func sourceCode(s string) (byte, bool) {
	for i, v := range sources {
		if v == s {
			return byte(i), true
		}
	}
	return 0, false
}

// encodeMeta packs e's meta members (e is valid).
func encodeMeta(e eventlog.Event) ([]byte, error) {
	code, ok := sourceCode(e.Source)
	if !ok {
		return nil, fmt.Errorf("%w: source %q", eventlog.ErrInvalid, e.Source)
	}
	b := []byte{code, 0}
	if e.ClientEventID != "" {
		b[1] |= metaClientID
		b = binary.AppendUvarint(b, uint64(len(e.ClientEventID)))
		b = append(b, e.ClientEventID...)
	}
	if len(e.Properties) > 0 {
		p, err := json.Marshal(e.Properties)
		if err != nil {
			return nil, fmt.Errorf("%w: properties: %w", eventlog.ErrInvalid, err)
		}
		b[1] |= metaProps
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	if e.Revenue != nil {
		b[1] |= metaRevenue
		b = binary.AppendVarint(b, e.Revenue.Minor)
		b = append(b, e.Revenue.Currency...) // three letters (Validate)
	}
	return b, nil
}

var errMeta = errors.New("sqlitelog: malformed meta")

// decodeMeta sets e's meta members from b.
func decodeMeta(b []byte, e *eventlog.Event) error {
	if len(b) < 2 || int(b[0]) >= len(sources) {
		return errMeta
	}
	e.Source = sources[b[0]]
	flags, rest := b[1], b[2:]
	bytesOf := func() ([]byte, error) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || uint64(len(rest)-k) < n {
			return nil, errMeta
		}
		v := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		return v, nil
	}
	if flags&metaClientID != 0 {
		v, err := bytesOf()
		if err != nil {
			return err
		}
		e.ClientEventID = string(v)
	}
	if flags&metaProps != 0 {
		v, err := bytesOf()
		if err != nil {
			return err
		}
		if err := json.Unmarshal(v, &e.Properties); err != nil {
			return fmt.Errorf("%w: %w", errMeta, err)
		}
	}
	if flags&metaRevenue != 0 {
		minor, k := binary.Varint(rest)
		if k <= 0 || len(rest)-k != 3 {
			return errMeta
		}
		e.Revenue = &eventlog.Revenue{Minor: minor, Currency: string(rest[k:])}
	}
	return nil
}
