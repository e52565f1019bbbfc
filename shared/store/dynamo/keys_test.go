package dynamo

import (
	"cmp"
	"encoding/base64"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
)

// randomKey draws short strings over an alphabet that stresses the encoding: NUL and the
// two bytes the escapes use, next to ordinary and multi-byte characters.
func randomKey(r *rand.Rand, minLen int) string {
	alphabet := []string{"\x00", "\x01", "\x02", "a", "b", "é", "\U0010FFFF"}
	var b strings.Builder
	for range minLen + r.IntN(4) {
		b.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

type tuple struct{ isk, pk, sk string }

func compareTuples(x, y tuple) int {
	return cmp.Or(strings.Compare(x.isk, y.isk), strings.Compare(x.pk, y.pk), strings.Compare(x.sk, y.sk))
}

// TestCombinedKeyOrder checks the property the index tie order rests on: the byte order of
// combined keys (DynamoDB's order for strings) is the order of (index SK, PK, SK).
func TestCombinedKeyOrder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	tuples := make([]tuple, 3000)
	for i := range tuples {
		tuples[i] = tuple{randomKey(r, 0), randomKey(r, 1), randomKey(r, 1)}
	}
	byTuple := slices.Clone(tuples)
	slices.SortFunc(byTuple, compareTuples)
	byCombined := slices.Clone(tuples)
	slices.SortFunc(byCombined, func(x, y tuple) int {
		return strings.Compare(combine(x.isk, x.pk, x.sk), combine(y.isk, y.pk, y.sk))
	})
	require.Equal(t, byTuple, byCombined)

	for _, tu := range tuples {
		c := combine(tu.isk, tu.pk, tu.sk)
		isk, pk, sk, err := split(c)
		require.NoError(t, err)
		require.Equal(t, tu, tuple{isk, pk, sk}, "round trip of %q", c)
	}
	for _, bad := range []string{"a", "a\x00\x01b", "a\x00\x01b\x00\x01c\x00\x01d", "a\x00", "a\x00\x03b\x00\x01c\x00\x01d"} {
		_, _, _, err := split(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// TestIndexBounds checks that a prefix or range on the index SK, translated onto the
// combined key, selects exactly the items whose raw index SK it selects.
func TestIndexBounds(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		isk := randomKey(r, 1)
		c := combine(isk, randomKey(r, 1), randomKey(r, 1))
		var q store.Query
		switch r.IntN(4) {
		case 0:
			q.Prefix = randomKey(r, 1)
		case 1:
			q.From = randomKey(r, 1)
		case 2:
			q.To = randomKey(r, 1)
		default:
			q.From, q.To = randomKey(r, 1), randomKey(r, 1)
			if q.From > q.To {
				q.From, q.To = q.To, q.From
			}
		}
		q.Index = store.GSI1
		b := bounds(q)
		got := (b.prefix == "" || strings.HasPrefix(c, b.prefix)) &&
			(!b.hasLo || c >= b.lo) && (!b.hasHi || c <= b.hi)
		require.Equal(t, inRange(q, isk), got, "index SK %q, query %+v, combined %q", isk, q, c)
	}
}

func TestDecodeCursor(t *testing.T) {
	t.Parallel()
	q := store.Query{PK: "p", Prefix: "b"}
	good := store.EncodeCursor(queryShape(q), []string{"b1"})
	q.Cursor = good
	pos, err := decodeCursor(q)
	require.NoError(t, err)
	assert.Equal(t, []string{"b1"}, pos)

	gq := store.Query{PK: "g", Index: store.GSI1, From: "2031", To: "2032"}
	gq.Cursor = store.EncodeCursor(queryShape(gq), []string{"2031-05", "p", "s"})
	_, err = decodeCursor(gq)
	require.NoError(t, err)

	cases := map[string]store.Query{
		"not base64":             {PK: "p", Prefix: "b", Cursor: "!!"},
		"not JSON":               {PK: "p", Prefix: "b", Cursor: base64.RawURLEncoding.EncodeToString([]byte("[x"))},
		"other prefix":           {PK: "p", Prefix: "c", Cursor: good},
		"other partition":        {PK: "q", Prefix: "b", Cursor: good},
		"other direction":        {PK: "p", Prefix: "b", Reverse: true, Cursor: good},
		"other index":            {PK: "p", Prefix: "b", Index: store.GSI2, Cursor: good},
		"outside the prefix":     {PK: "p", Prefix: "b", Cursor: store.EncodeCursor(queryShape(store.Query{PK: "p", Prefix: "b"}), []string{"c"})},
		"outside the range":      {PK: "g", Index: store.GSI1, From: "2031", To: "2032", Cursor: store.EncodeCursor(queryShape(gq), []string{"2033", "p", "s"})},
		"empty key in position":  {PK: "g", Index: store.GSI1, From: "2031", To: "2032", Cursor: store.EncodeCursor(queryShape(gq), []string{"2031-05", "", "s"})},
		"too short for an index": {PK: "g", Index: store.GSI1, From: "2031", To: "2032", Cursor: store.EncodeCursor(queryShape(gq), []string{"2031-05"})},
		"the SQLite store's":     {PK: "p", Cursor: "WyJzaGFwZSIsImIxIl0"},
	}
	for name, q := range cases {
		_, err := decodeCursor(q)
		assert.ErrorIs(t, err, store.ErrInvalidCursor, name)
	}
}

func TestEncodeRefusesWhatDynamoDBWould(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 600)
	for name, it := range map[string]store.Item{
		"empty SK":          {Key: store.Key{PK: "p"}},
		"SK over 1024":      {Key: store.Key{PK: "p", SK: strings.Repeat("x", 1025)}},
		"PK over 2048":      {Key: store.Key{PK: strings.Repeat("x", 2049), SK: "s"}},
		"combined too long": {Key: store.Key{PK: long, SK: long}, GSI2: store.IndexKey{PK: "g", SK: "s"}},
		"half index key":    {Key: store.Key{PK: "p", SK: "s"}, GSI1: store.IndexKey{SK: "s"}},
		"not UTF-8":         {Key: store.Key{PK: "p", SK: "s"}, GSI1: store.IndexKey{PK: "g", SK: "\xff"}},
	} {
		_, err := encodeItem(it)
		assert.Error(t, err, name)
	}
	// The limits themselves are allowed.
	_, err := encodeItem(store.Item{Key: store.Key{PK: strings.Repeat("x", 2048), SK: strings.Repeat("y", 1024)}})
	assert.NoError(t, err)
}

func TestPlaceholders(t *testing.T) {
	t.Parallel()
	e := expr{condition: "attribute_not_exists(#pk) OR #exp <= :now", expressions: []string{"ADD #cnt :d"}}
	assert.Equal(t, map[string]string{"#pk": AttrPK, "#exp": AttrExpires, "#cnt": AttrCount}, e.names())
	assert.Nil(t, (&expr{}).names(), "DynamoDB refuses an empty name map")
	assert.Nil(t, (&expr{}).vals(), "DynamoDB refuses an empty value map")
}
