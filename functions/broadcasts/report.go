package broadcasts

import (
	"context"
	"slices"
	"strings"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/store"
)

// ChannelReport is one channel's counts in a broadcast's report. Delivered and read are null
// where the provider does not report them (Telegram and VK; WhatsApp reports both through its
// webhook). Clicked counts the recipients who clicked at least one tracked link button; it
// is null for a legacy broadcast (a reaction's messages are not tracked) and in a deployment
// without link tracking (docs/broadcasts.md).
type ChannelReport struct {
	Channel string `json:"channel"`
	// Planned counts every recipient row of the channel; the others split it.
	Planned     int64            `json:"planned"`
	Pending     int64            `json:"pending"`
	Sent        int64            `json:"sent"`
	Delivered   *int64           `json:"delivered"`
	Read        *int64           `json:"read"`
	Clicked     *int64           `json:"clicked"`
	Failed      map[string]int64 `json:"failed"`
	Skipped     map[string]int64 `json:"skipped"`
	Interrupted int64            `json:"interrupted"`
	Canceled    int64            `json:"canceled"`
}

// Report is a broadcast's report.
type Report struct {
	BroadcastID string          `json:"broadcast_id"`
	Status      Status          `json:"status"`
	Channels    []ChannelReport `json:"channels"`
}

// Report reads a broadcast's counters: one query.
func (s *Service) Report(ctx context.Context, bot, id string) (Report, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Report{}, err
	}
	return s.report(ctx, rec)
}

func (s *Service) report(ctx context.Context, rec record) (Report, error) {
	page, err := s.d.Store.Query(ctx, store.Query{PK: dataPK(rec.bot, rec.ID), Prefix: counterPrefix})
	if err != nil {
		return Report{}, err
	}
	byCh := map[string]*ChannelReport{}
	get := func(ch string) *ChannelReport {
		if c, ok := byCh[ch]; ok {
			return c
		}
		c := &ChannelReport{Channel: ch, Failed: map[string]int64{}, Skipped: map[string]int64{}}
		if ch == string(channel.WhatsApp) {
			c.Delivered, c.Read = new(int64), new(int64)
		}
		if !rec.Legacy && s.tracksLinks() {
			c.Clicked = new(int64)
		}
		byCh[ch] = c
		return c
	}
	if !rec.Legacy {
		for _, k := range rec.Channels {
			get(string(k))
		}
	}
	for _, it := range page.Items {
		ch, name, ok := strings.Cut(strings.TrimPrefix(it.SK, counterPrefix), "#")
		if !ok || it.Count == 0 {
			continue
		}
		c := get(ch)
		kind, what, _ := strings.Cut(name, "#")
		switch kind {
		case "state":
			c.Planned += it.Count
			switch RowState(what) {
			case RowPlanned, RowSending:
				c.Pending += it.Count
			case RowSent:
				c.Sent += it.Count
			case RowInterrupted:
				c.Interrupted += it.Count
			case RowCanceled:
				c.Canceled += it.Count
			}
		case "fail":
			c.Failed[what] += it.Count
		case "skip":
			c.Skipped[what] += it.Count
		case strings.TrimSuffix(engagedCounter, "#"):
			switch what {
			case string(Delivered):
				bump(c.Delivered, it.Count)
			case string(Read):
				bump(c.Read, it.Count)
			case clicked:
				bump(c.Clicked, it.Count)
			}
		}
	}
	out := Report{BroadcastID: rec.ID, Status: rec.Status, Channels: []ChannelReport{}}
	for _, ch := range slicesSorted(byCh) {
		out.Channels = append(out.Channels, *byCh[ch])
	}
	return out, nil
}

func slicesSorted(m map[string]*ChannelReport) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// bump adds n to a count the report shows (nil: one it does not).
func bump(p *int64, n int64) {
	if p != nil {
		*p += n
	}
}
