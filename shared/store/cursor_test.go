package store_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/botplatform/api/shared/store"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	pos := []string{"2031-05", "BOT#b1", "é\u2713"}
	got, err := store.DecodeCursor(store.EncodeCursor("shape", pos), "shape", 3)
	if err != nil || !slices.Equal(got, pos) {
		t.Fatalf("got %q, %v", got, err)
	}
	for name, c := range map[string]string{
		"another shape":  store.EncodeCursor("other", pos),
		"another length": store.EncodeCursor("shape", pos[:1]),
		"not base64url":  "!!",
		"not an array":   "eyJhIjoxfQ",                                                                                                                         // {"a":1}
		"too deep":       "W1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbWw", // 97 [
		"lone surrogate": "WyJcdWQ4MDAiXQ",                                                                                                                     // ["\ud800"]
	} {
		if _, err := store.DecodeCursor(c, "shape", 3); !errors.Is(err, store.ErrInvalidCursor) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzDecodeCursor: the stores' cursor codec opens only what it sealed for the same shape
// and length, and never panics.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(store.EncodeCursor("shape", []string{"a"}), 1)
	f.Add(store.EncodeCursor("shape", []string{"a", "b", "c"}), 3)
	f.Add("WyJcdWQ4MDAiXQ", 1)
	f.Add("", 0)
	f.Add("W10", -1) // [] with a negative length once indexed an empty array
	f.Fuzz(func(t *testing.T, cursor string, n int) {
		pos, err := store.DecodeCursor(cursor, "shape", n)
		if err != nil {
			if !errors.Is(err, store.ErrInvalidCursor) {
				t.Fatalf("%q: %v", cursor, err)
			}
			return
		}
		if len(pos) != n {
			t.Fatalf("%q opened to %d keys, want %d", cursor, len(pos), n)
		}
		if again, err := store.DecodeCursor(store.EncodeCursor("shape", pos), "shape", n); err != nil || !slices.Equal(again, pos) {
			t.Fatalf("%q does not survive a round trip: %q, %v", cursor, again, err)
		}
	})
}
