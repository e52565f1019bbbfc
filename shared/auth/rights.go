package auth

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Right is a per-bot permission a user holds, checked in addition to token scopes.
type Right string

// The bot rights of the specification.
const (
	RightReactions Right = "reactions"
	RightDialogs   Right = "dialogs"
	RightAnalytics Right = "analytics"
)

// allRights lists every right in a stable order; a right's bit is its index.
var allRights = [...]Right{RightReactions, RightDialogs, RightAnalytics}

// RightSet is a set of rights; it serializes as a sorted JSON array of names.
type RightSet uint8

// AllRightsSet holds every right.
const AllRightsSet RightSet = 1<<len(allRights) - 1

func (r Right) bit() RightSet {
	for i, x := range allRights {
		if x == r {
			return 1 << i
		}
	}
	return 0
}

// Has reports whether the set holds r.
func (s RightSet) Has(r Right) bool { b := r.bit(); return b != 0 && s&b == b }

// HasAll reports whether the set holds every right in want.
func (s RightSet) HasAll(want RightSet) bool { return s&want == want }

// With returns the set plus r.
func (s RightSet) With(r Right) RightSet { return s | r.bit() }

// Names lists the rights in the set.
func (s RightSet) Names() []Right {
	out := []Right{}
	for _, r := range allRights {
		if s.Has(r) {
			out = append(out, r)
		}
	}
	return out
}

// Missing lists the rights of want that s lacks.
func (s RightSet) Missing(want RightSet) []Right { return (want &^ s).Names() }

// RightsOf builds a set from rights.
func RightsOf(rs ...Right) RightSet {
	var s RightSet
	for _, r := range rs {
		s |= r.bit()
	}
	return s
}

// ParseRights parses a comma-separated list ("" is the empty set).
func ParseRights(list string) (RightSet, error) {
	var s RightSet
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		b := Right(name).bit()
		if b == 0 {
			return 0, fmt.Errorf("unknown right %q (want %s)", name, joinRights(allRights[:]))
		}
		s |= b
	}
	return s, nil
}

func joinRights(rs []Right) string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// MarshalJSON writes the set as an array of names.
func (s RightSet) MarshalJSON() ([]byte, error) { return json.Marshal(s.Names()) }

// UnmarshalJSON reads an array of names.
func (s *RightSet) UnmarshalJSON(b []byte) error {
	var names []Right
	if err := json.Unmarshal(b, &names); err != nil {
		return err
	}
	var out RightSet
	for _, n := range names {
		bit := n.bit()
		if bit == 0 {
			return fmt.Errorf("unknown right %q", n)
		}
		out |= bit
	}
	*s = out
	return nil
}

// String lists the rights, comma-separated.
func (s RightSet) String() string { return joinRights(s.Names()) }
