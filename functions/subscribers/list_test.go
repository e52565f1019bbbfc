package subscribers

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walk reads every page of a list and returns the subscribers' external ids in order, and
// how many pages it took.
func (f *fixture) walk(t *testing.T, flt Filter, limit int) ([]string, int) {
	t.Helper()
	var out []string
	cursor, pages := "", 0
	for {
		page, next, err := f.svc.List(t.Context(), f.bot, flt, limit, cursor)
		require.NoError(t, err)
		for _, s := range page {
			out = append(out, s.ExternalID)
		}
		pages++
		require.Less(t, pages, 1000)
		if next == "" {
			return out, pages
		}
		cursor = next
	}
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	vip := f.label(t, "VIP")
	people := []struct {
		channel, first, last string
		vip                  bool
	}{
		{"telegram", "José", "Müller", true},        // 0
		{"whatsapp", "Anna", "Jones", false},        // 1
		{"vk", "Anna Annabel", "Smith", true},       // 2: two words match "ann"
		{"telegram", "ANNETTE", "", false},          // 3
		{"telegram", "Bob", "Johnson-Anders", true}, // 4
		{"whatsapp", "", "", true},                  // 5: no name
		{"vk", "Zoë", "Ångström", false},            // 6
	}
	created := make([]time.Time, len(people))
	for i, p := range people {
		f.clock.Advance(time.Hour)
		created[i] = f.clock.Now().Truncate(time.Second)
		s, _, err := f.svc.Upsert(t.Context(), f.bot, p.channel, fmt.Sprint(i), Changes{FirstName: &p.first, LastName: &p.last})
		require.NoError(t, err)
		if p.vip {
			_, err = f.svc.AddLabel(t.Context(), f.bot, s.ID, vip.ID)
			require.NoError(t, err)
		}
	}
	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"all, oldest first", Filter{}, []string{"0", "1", "2", "3", "4", "5", "6"}},
		{"label", Filter{Label: vip.ID}, []string{"0", "2", "4", "5"}},
		{"unknown label", Filter{Label: "lbl_00000000000000000000000000"}, nil},
		{"channel", Filter{Channel: "telegram"}, []string{"0", "3", "4"}},
		{"label and channel", Filter{Label: vip.ID, Channel: "whatsapp"}, []string{"5"}},
		{"identity", Filter{Channel: "vk", ExternalID: "2"}, []string{"2"}},
		{"identity on another channel", Filter{Channel: "telegram", ExternalID: "2"}, nil},
		{"identity and label", Filter{Channel: "vk", ExternalID: "6", Label: vip.ID}, nil},
		{"q: prefix of any word, once per subscriber, by word", Filter{Query: "ann"}, []string{"1", "2", "3"}},
		{"q: case and accents ignored", Filter{Query: "MULL"}, []string{"0"}},
		{"q: accents in the query too", Filter{Query: "jóse"}, []string{"0"}},
		{"q: every word must match", Filter{Query: "anna sm"}, []string{"2"}},
		{"q: hyphenated names are two words", Filter{Query: "anders"}, []string{"4"}},
		{"q: a whole word", Filter{Query: "jones"}, []string{"1"}},
		{"q: no match", Filter{Query: "xavier"}, nil},
		{"q: ångström", Filter{Query: "angs zo"}, []string{"6"}},
		{"q with channel", Filter{Query: "ann", Channel: "telegram"}, []string{"3"}},
		{"q with label", Filter{Query: "ann", Label: vip.ID}, []string{"2"}},
		{"q: words by their order", Filter{Query: "jo"}, []string{"4", "1", "0"}},
		{"created from", Filter{CreatedFrom: created[4]}, []string{"4", "5", "6"}},
		{"created to (exclusive)", Filter{CreatedTo: created[2]}, []string{"0", "1"}},
		{"created range", Filter{CreatedFrom: created[1], CreatedTo: created[3]}, []string{"1", "2"}},
		{"created range, fraction rounds up", Filter{CreatedFrom: created[1].Add(-time.Millisecond), CreatedTo: created[3].Add(time.Millisecond)}, []string{"1", "2", "3"}},
		{"created range within one second", Filter{CreatedFrom: created[1].Add(100 * time.Millisecond), CreatedTo: created[1].Add(900 * time.Millisecond)}, nil},
		{"created range with label", Filter{Label: vip.ID, CreatedFrom: created[1], CreatedTo: created[5]}, []string{"2", "4"}},
		{"created range with channel", Filter{Channel: "vk", CreatedFrom: created[3]}, []string{"6"}},
		{"created range with q", Filter{Query: "ann", CreatedTo: created[3]}, []string{"1", "2"}},
	}
	for _, tt := range tests {
		for _, limit := range []int{1, 2, 50} {
			got, _ := f.walk(t, tt.f, limit)
			assert.Equal(t, tt.want, got, "%s (limit %d)", tt.name, limit)
		}
	}
}

// A label filter reads only the label's members, a page at a time, whatever the others.
func TestListByLabelPagesThroughMembers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	l := f.label(t, "Tenth")
	var want []string
	for i := range 300 {
		s := f.subscriber(t, fmt.Sprintf("%04d", i), "P", fmt.Sprint(i))
		if i%10 == 0 {
			_, err := f.svc.AddLabel(t.Context(), f.bot, s.ID, l.ID)
			require.NoError(t, err)
			want = append(want, s.ExternalID)
		}
	}
	got, pages := f.walk(t, Filter{Label: l.ID}, 7)
	assert.Equal(t, want, got)
	assert.Equal(t, 5, pages, "30 members in pages of 7: every page full but the last")
	all, pages := f.walk(t, Filter{}, 200)
	assert.Len(t, all, 300)
	assert.Equal(t, 2, pages)
	assert.True(t, slices.IsSorted(all), "oldest first")
}

// With a filter checked on the subscribers read, one request reads at most maxScan entries:
// a rare match far down comes after short pages that still carry a cursor.
func TestListScanIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	l := f.label(t, "Everyone")
	n := maxScan + 20
	for i := range n {
		ch := ChannelTelegram
		if i == n-1 {
			ch = ChannelVK
		}
		_, _, err := f.svc.Upsert(t.Context(), f.bot, ch, fmt.Sprint(i), Changes{AddLabels: []string{l.ID}})
		require.NoError(t, err)
	}
	page, next, err := f.svc.List(t.Context(), f.bot, Filter{Label: l.ID, Channel: ChannelVK}, 50, "")
	require.NoError(t, err)
	assert.Empty(t, page, "nothing among the first maxScan members")
	require.NotEmpty(t, next, "but the list is not over")
	page, next, err = f.svc.List(t.Context(), f.bot, Filter{Label: l.ID, Channel: ChannelVK}, 50, next)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, fmt.Sprint(n-1), page[0].ExternalID)
	assert.Empty(t, next)
}

// Renaming moves a subscriber's search entries in the same transaction.
func TestSearchFollowsRenames(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	s := f.subscriber(t, "1", "Anna", "Schmidt")
	_, err := f.svc.Update(t.Context(), f.bot, s.ID, 1, Changes{LastName: ptr("Weber")})
	require.NoError(t, err)
	got, _ := f.walk(t, Filter{Query: "schm"}, 50)
	assert.Empty(t, got)
	got, _ = f.walk(t, Filter{Query: "web"}, 50)
	assert.Equal(t, []string{"1"}, got)
	got, _ = f.walk(t, Filter{Query: "anna"}, 50)
	assert.Equal(t, []string{"1"}, got)
	assert.Equal(t, []string{"anna#" + s.ID, "weber#" + s.ID}, f.partition(t, namePartition(f.bot)))
}

func TestIndexWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		first, last string
		want        []string
	}{
		{"Anna", "Schmidt", []string{"anna", "schmidt"}},
		{"  José-María ", "O'Neil", []string{"jose", "maria", "o", "neil"}},
		{"Anna", "anna", []string{"anna"}},
		{"Straße", "", []string{"strasse"}},
		{"a b c d e f g h i j", "", []string{"a", "b", "c", "d", "e", "f", "g", "h"}},
		{"", "", nil},
		{"🙂", "", nil},
		{"李", "小龙", []string{"李", "小龙"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, record{FirstName: tt.first, LastName: tt.last}.indexWords(), "%q %q", tt.first, tt.last)
	}
}
