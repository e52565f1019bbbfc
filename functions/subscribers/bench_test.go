package subscribers

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// Subscriber listing with a label filter over 100,000 subscribers, one in ten labelled, on
// the local SQLite store (make bench; figures in docs/performance.md). The baseline, measured
// in the same run on the same data, is the unfiltered list: the cheapest list there is (one
// range read of the records). A label page costs one read of the membership partition plus
// one point read per member.
//
//	go test -run '^$' -bench ListByLabel -benchtime 5x ./functions/subscribers/
const (
	benchSubscribers = 100_000
	benchEvery       = 10   // one subscriber in benchEvery has the label
	benchRare        = 1000 // one in benchRare has the rare label
	benchPage        = 50
)

func BenchmarkListByLabel(b *testing.B) {
	st := sqlitetest.Open(b)
	svc := NewService(st, time.Now, nil)
	ctx := b.Context()
	bot := ids.New("bot")
	label, err := svc.CreateLabel(ctx, bot, "Tenth")
	require.NoError(b, err)
	other, err := svc.CreateLabel(ctx, bot, "Other")
	require.NoError(b, err)
	rare, err := svc.CreateLabel(ctx, bot, "Rare")
	require.NoError(b, err)

	start := time.Now()
	seed(b, st, bot, label.ID, other.ID, rare.ID)
	b.Logf("seeded %d subscribers in %s", benchSubscribers, time.Since(start).Round(time.Millisecond))

	walk := func(f Filter, maxPages int) (pages, subs int, took time.Duration) {
		t0 := time.Now()
		cursor := ""
		for pages < maxPages {
			page, next, err := svc.List(ctx, bot, f, benchPage, cursor)
			require.NoError(b, err)
			pages++
			subs += len(page)
			if next == "" {
				break
			}
			cursor = next
		}
		return pages, subs, time.Since(t0)
	}
	// Every labelled subscriber: 200 pages; and as many pages of the unfiltered list.
	labelPages := benchSubscribers / benchEvery / benchPage
	var labelTime, allTime, rareTime time.Duration
	var labelN, allN, rareN int
	for b.Loop() {
		p, n, d := walk(Filter{Label: label.ID}, labelPages+1)
		require.Equal(b, benchSubscribers/benchEvery, n, "every labelled subscriber, once")
		labelTime, labelN = labelTime+d, labelN+p
		p, _, d = walk(Filter{}, labelPages)
		allTime, allN = allTime+d, allN+p
		// A label on one subscriber in a thousand costs the same per page: the list never
		// reads the subscribers without it (a scan would read a thousand per match).
		p, n, d = walk(Filter{Label: rare.ID}, benchSubscribers)
		require.Equal(b, benchSubscribers/benchRare, n)
		rareTime, rareN = rareTime+d, rareN+p
	}
	ms := func(d time.Duration, pages int) float64 { return float64(d.Microseconds()) / 1000 / float64(pages) }
	b.ReportMetric(ms(labelTime, labelN), "ms/label-page")
	b.ReportMetric(ms(allTime, allN), "ms/unfiltered-page")
	b.ReportMetric(ms(labelTime, labelN)/ms(allTime, allN), "label/unfiltered")
	b.ReportMetric(ms(rareTime, rareN), "ms/rare-label-page")
}

// seed writes the subscribers straight to the store, 20 per transaction, with everything the
// Service would write for them (records, identities, search entries, memberships) except the
// activity counters, which every subscriber of a batch would touch at once. Every fifth
// subscriber also has another label, so label partitions are not the only ones that grow.
func seed(b *testing.B, st store.Store, bot, label, other, rare string) {
	first := []string{"Anna", "Boris", "Chen", "Dana", "Emil", "Fatima", "Georg", "Hana", "Ivan", "Julia"}
	last := []string{"Schmidt", "Ivanova", "Garcia", "Kowalski", "Nakamura", "Okafor", "Rossi", "Silva"}
	now := time.Now()
	const perTx = 20
	var writes []store.Write
	for i := range benchSubscribers {
		at := now.Add(time.Duration(i) * time.Microsecond)
		r := record{
			ID: ids.At("sub", at), Channel: Channels()[i%3], ExternalID: fmt.Sprint(100000000 + i),
			FirstName: first[i%len(first)], LastName: last[i/len(first)%len(last)],
			CreatedAt: stamp(at), UpdatedAt: stamp(at),
		}
		if i%benchEvery == 0 {
			r.Labels = append(r.Labels, label)
		}
		if i%5 == 0 {
			r.Labels = append(r.Labels, other)
		}
		if i%benchRare == 0 {
			r.Labels = append(r.Labels, rare)
		}
		pl, err := planChange(bot, nil, r, at)
		require.NoError(b, err)
		for j, w := range pl.writes {
			if w.Add == nil && pl.guards[j] != guardLabel {
				writes = append(writes, w)
			}
		}
		if (i+1)%perTx == 0 || i == benchSubscribers-1 {
			require.NoError(b, st.Transact(b.Context(), writes))
			writes = writes[:0]
		}
	}
}
