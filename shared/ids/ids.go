// Package ids mints the opaque, type-prefixed identifiers every resource carries
// (bot_..., pat_..., evt_...). Identifiers sort by creation time, so a sort key built
// from one lists newest-last (or newest-first when read in reverse) without an extra index.
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"time"
)

// alphabet is Crockford's base32 in lower case: no i, l, o, u, so ids read aloud safely,
// and ASCII order equals numeric order, which keeps ids time-sortable as strings.
const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// bodyLen is the length of the part after the prefix: 13 characters of nanosecond
// timestamp (65 bits) and 13 of randomness (65 bits, 64 used).
const bodyLen = 26

// New returns prefix + "_" + a time-ordered random body, using the wall clock.
func New(prefix string) string { return At(prefix, time.Now()) }

// At is New with an explicit creation time.
func At(prefix string, t time.Time) string {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		// crypto/rand.Read never fails on supported platforms (Go 1.24+ crashes instead).
		panic(err)
	}
	var b strings.Builder
	b.Grow(len(prefix) + 1 + bodyLen)
	b.WriteString(prefix)
	b.WriteByte('_')
	encode(&b, uint64(t.UnixNano()))
	encode(&b, binary.BigEndian.Uint64(rnd[:]))
	return b.String()
}

// encode writes v as 13 base32 digits, most significant first.
func encode(b *strings.Builder, v uint64) {
	var d [13]byte
	for i := 12; i >= 0; i-- {
		d[i] = alphabet[v&31]
		v >>= 5
	}
	b.Write(d[:])
}

// Valid reports whether id has the given prefix and a well-formed body. Handlers use it to
// answer 404 for ids that cannot exist without touching the store.
func Valid(prefix, id string) bool {
	body, ok := strings.CutPrefix(id, prefix+"_")
	if !ok || len(body) != bodyLen {
		return false
	}
	for i := 0; i < len(body); i++ {
		if strings.IndexByte(alphabet, body[i]) < 0 {
			return false
		}
	}
	return true
}
