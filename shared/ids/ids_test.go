package ids

import (
	"testing"
	"time"
)

func TestAtIsTimeOrderedAndValid(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	prev := ""
	for i := 0; i < 1000; i++ {
		id := At("bot", base.Add(time.Duration(i)*time.Microsecond))
		if !Valid("bot", id) {
			t.Fatalf("At produced invalid id %q", id)
		}
		if id <= prev {
			t.Fatalf("ids not ordered by time: %q after %q", id, prev)
		}
		prev = id
	}
}

func TestNewIsUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for i := 0; i < 10000; i++ {
		id := New("x")
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestValid(t *testing.T) {
	t.Parallel()
	good := New("pat")
	cases := map[string]bool{
		good:                     true,
		"bot" + good[3:]:         false, // other prefix
		good[:len(good)-1]:       false, // short
		good + "0":               false, // long
		good[:len(good)-1] + "u": false, // not in alphabet
		"":                       false,
	}
	for id, want := range cases {
		if got := Valid("pat", id); got != want {
			t.Errorf("Valid(pat, %q) = %v, want %v", id, got, want)
		}
	}
}
