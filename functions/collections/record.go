package collections

import (
	"bytes"
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// Record is one row of a collection as the API shows it.
type Record struct {
	ID           string  `json:"id"`
	CollectionID string  `json:"collection_id"`
	ExternalKey  *string `json:"external_key"`
	// Values holds the record's values by field name; a field without a value is absent.
	Values    map[string]json.RawMessage `json:"values"`
	Revision  int64                      `json:"revision"`
	CreatedAt time.Time                  `json:"created_at"`
	UpdatedAt time.Time                  `json:"updated_at"`
}

// version is one state of a record. Values are keyed by field key and stored canonical.
type version struct {
	ExternalKey string                     `json:"external_key,omitempty"`
	Values      map[string]json.RawMessage `json:"values"`
	Revision    int64                      `json:"revision"`
	CreatedAt   time.Time                  `json:"created_at"`
	UpdatedAt   time.Time                  `json:"updated_at"`
}

// pendingVersion is a version written by a batch upsert that is not known to have committed:
// it is the record's value only once its batch's status says committed (batch.go).
type pendingVersion struct {
	Batch string `json:"batch"`
	version
}

// recordDoc is a record as stored: its committed version (nil for a record a batch is still
// creating) and at most one pending version.
type recordDoc struct {
	ID      string          `json:"id"`
	Current *version        `json:"current,omitempty"`
	Pending *pendingVersion `json:"pending,omitempty"`
}

// itemRevision is the store revision of a record item: twice the committed revision, plus
// one while a version is pending. A write conditioned on RevisionIs(2*r) therefore holds
// exactly when the record is at API revision r with nothing pending, which is how
// expected_revision becomes a store condition.
func (d *recordDoc) itemRevision() int64 {
	var r int64
	if d.Current != nil {
		r = 2 * d.Current.Revision
	}
	if d.Pending != nil {
		r++
	}
	return r
}

func (d *recordDoc) item(bot, col string) (store.Item, error) {
	data, err := store.Encode(d)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: recordKey(bot, col, d.ID), Data: data, Revision: d.itemRevision()}, nil
}

// show shows version v of record id under the collection's current schema: values of
// removed fields are not shown.
func (c *collectionDoc) show(id string, v *version) Record {
	byKey := c.byKey()
	vals := make(map[string]json.RawMessage, len(v.Values))
	for k, raw := range v.Values {
		if f, ok := byKey[k]; ok {
			vals[f.Name] = raw
		}
	}
	r := Record{ID: id, CollectionID: c.ID, Values: vals, Revision: v.Revision, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt}
	if v.ExternalKey != "" {
		k := v.ExternalKey
		r.ExternalKey = &k
	}
	return r
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// applyValues returns base (values by field key) with in (values by field name) merged in:
// a given value replaces the stored one, null removes it. The result holds only fields of
// the current schema, every required field, and fits MaxRecordBytes. Problems are reported
// under prefix ("values", "records[3].values").
func applyValues(p *httpapi.Problems, prefix string, c *collectionDoc, base, in map[string]json.RawMessage) map[string]json.RawMessage {
	byKey := c.byKey()
	out := make(map[string]json.RawMessage, len(base)+len(in))
	for k, v := range base {
		if _, ok := byKey[k]; ok {
			out[k] = v
		}
	}
	for _, name := range sortedKeys(in) {
		raw := in[name]
		path := prefix + "." + name
		f, ok := c.field(name)
		if !ok {
			p.Add(path, "the collection has no field %q", name)
			continue
		}
		if isNull(raw) {
			delete(out, f.Key)
			continue
		}
		v, problem := canonical(f.Field, raw)
		if problem != "" {
			p.Add(path, "%s", problem)
			continue
		}
		out[f.Key] = v
	}
	for _, f := range c.Fields {
		if _, ok := out[f.Key]; f.Required && !ok {
			if raw, sent := in[f.Name]; !sent || isNull(raw) {
				p.Add(prefix+"."+f.Name, "is required")
			}
		}
	}
	if size := valuesSize(c, out); size > MaxRecordBytes {
		p.Add(prefix, "take %d bytes as JSON; a record's values may take at most %d", size, MaxRecordBytes)
	}
	return out
}

// valuesSize is the size of the values object as the API shows it.
func valuesSize(c *collectionDoc, vals map[string]json.RawMessage) int {
	byKey := c.byKey()
	n := 2 // {}
	for k, v := range vals {
		n += len(byKey[k].Name) + 4 + len(v) // "name": value,
	}
	return n
}

func sortedKeys(m map[string]json.RawMessage) []string { return slices.Sorted(maps.Keys(m)) }

func sortEntries(es []entry) {
	slices.SortFunc(es, func(a, b entry) int { return cmp.Or(cmp.Compare(a.field, b.field), cmp.Compare(a.token, b.token)) })
}

func sameValues(a, b map[string]json.RawMessage) bool {
	return maps.EqualFunc(a, b, func(x, y json.RawMessage) bool { return bytes.Equal(x, y) })
}

// checkExternalKey adds a problem when k is not 1 to 128 characters without control
// characters: a key is an identifier from another system (an SKU, an email address).
func checkExternalKey(p *httpapi.Problems, path, k string) {
	switch n := utf8.RuneCountInString(k); {
	case n == 0:
		p.Add(path, "must not be empty")
	case n > MaxExternalKeyLen:
		p.Add(path, "must be at most %d characters", MaxExternalKeyLen)
	default:
		for _, r := range k {
			if unicode.IsControl(r) {
				p.Add(path, "must not contain control characters")
				return
			}
		}
	}
}

// entry is one index entry: an indexed field's key and the token of the record's value.
type entry struct{ field, token string }

// entries lists the index entries of version v under the collection's indexed fields.
func (c *collectionDoc) entries(v *version) map[entry]bool {
	out := map[entry]bool{}
	if v == nil {
		return out
	}
	for _, f := range c.Fields {
		if !f.Indexed {
			continue
		}
		if raw, ok := v.Values[f.Key]; ok {
			out[entry{f.Key, indexToken(f.Type, raw)}] = true
		}
	}
	return out
}

// minus returns the entries of a that b lacks, in a stable order.
func minus(a, b map[entry]bool) []entry {
	var out []entry
	for e := range a {
		if !b[e] {
			out = append(out, e)
		}
	}
	sortEntries(out)
	return out
}

func putEntries(bot, col, rec string, es []entry) []store.Write {
	out := make([]store.Write, 0, len(es))
	for _, e := range es {
		out = append(out, store.PutOp(store.Item{Key: indexKey(bot, col, e.field, e.token, rec), Revision: 1}, store.Always))
	}
	return out
}

func deleteEntries(bot, col, rec string, es []entry) []store.Write {
	out := make([]store.Write, 0, len(es))
	for _, e := range es {
		out = append(out, store.DeleteOp(indexKey(bot, col, e.field, e.token, rec), store.Always))
	}
	return out
}

// claimItem records that an external key belongs to a record.
func claimItem(bot, col, key, rec string) store.Item {
	data, _ := json.Marshal(rec)
	return store.Item{Key: externalKey(bot, col, key), Data: data, Revision: 1}
}
