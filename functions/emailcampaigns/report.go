package emailcampaigns

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/botplatform/api/shared/store"
)

// Counts are a campaign's recipient counts. Each is kept by counters moved in the same
// transaction as the row change it counts, so they equal a count of the rows: Recipients is
// the sum of the states (planned to canceled), Skipped the sum of SkippedBy.
type Counts struct {
	Recipients int64 `json:"recipients"`
	// Planned rows are still to be sent.
	Planned     int64            `json:"planned"`
	Sending     int64            `json:"sending"`
	Sent        int64            `json:"sent"`
	Failed      int64            `json:"failed"`
	Interrupted int64            `json:"interrupted"`
	Canceled    int64            `json:"canceled"`
	Skipped     int64            `json:"skipped"`
	SkippedBy   map[string]int64 `json:"skipped_by"`
	// The events, each counting recipients (not events): Opened those with a human open (a
	// click counts as one), MachineOpened those opened by a privacy proxy, Clicked those
	// who clicked any link, MachineClicked those whose links a machine followed (a security
	// gateway), Bounced those with a bounce of either kind.
	Delivered      int64 `json:"delivered"`
	Opened         int64 `json:"opened"`
	MachineOpened  int64 `json:"machine_opened"`
	Clicked        int64 `json:"clicked"`
	MachineClicked int64 `json:"machine_clicked"`
	Bounced        int64 `json:"bounced"`
	Complained     int64 `json:"complained"`
	Unsubscribed   int64 `json:"unsubscribed"`
}

// The event counters.
const (
	evDelivered      = "ev#delivered"
	evOpened         = "ev#opened"
	evMachineOpened  = "ev#machine_opened"
	evClicked        = "ev#clicked"
	evMachineClicked = "ev#machine_clicked"
	evBounced        = "ev#bounced"
	evComplained     = "ev#complained"
	evUnsubscribed   = "ev#unsubscribed"
)

func newCounts() Counts {
	c := Counts{SkippedBy: map[string]int64{}}
	for _, r := range skipReasons {
		c.SkippedBy[r] = 0
	}
	return c
}

// set puts the counter called name at n.
func (c *Counts) set(name string, n int64) {
	switch name {
	case "state#" + string(RowPlanned):
		c.Planned = n
	case "state#" + string(RowSending):
		c.Sending = n
	case "state#" + string(RowSent):
		c.Sent = n
	case "state#" + string(RowFailed):
		c.Failed = n
	case "state#" + string(RowInterrupted):
		c.Interrupted = n
	case "state#" + string(RowCanceled):
		c.Canceled = n
	case "state#" + string(RowSkipped):
		c.Skipped = n
	case evDelivered:
		c.Delivered = n
	case evOpened:
		c.Opened = n
	case evMachineOpened:
		c.MachineOpened = n
	case evClicked:
		c.Clicked = n
	case evMachineClicked:
		c.MachineClicked = n
	case evBounced:
		c.Bounced = n
	case evComplained:
		c.Complained = n
	case evUnsubscribed:
		c.Unsubscribed = n
	default:
		if reason, ok := strings.CutPrefix(name, "skip#"); ok {
			c.SkippedBy[reason] = n
		}
	}
}

func (c *Counts) total() {
	c.Recipients = c.Planned + c.Sending + c.Sent + c.Failed + c.Interrupted + c.Canceled + c.Skipped
}

// counts reads a campaign's counters: one query (a campaign has a few dozen).
func (s *Service) counts(ctx context.Context, bot, id string) (Counts, error) {
	c := newCounts()
	page, err := s.d.Store.Query(ctx, store.Query{PK: dataPK(bot, id), Prefix: counterPrefix})
	if err != nil {
		return Counts{}, err
	}
	for _, it := range page.Items {
		c.set(strings.TrimPrefix(it.SK, counterPrefix), it.Count)
	}
	c.total()
	return c, nil
}

// counter reads one counter exactly (a Get, never an index).
func (s *Service) counter(ctx context.Context, bot, id, name string) (int64, error) {
	it, err := s.d.Store.Get(ctx, counterKey(bot, id, name))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	return it.Count, err
}

// Rates are shares of the sent messages (0 while nothing is sent).
type Rates struct {
	Delivery    float64 `json:"delivery"`
	Open        float64 `json:"open"`
	Click       float64 `json:"click"`
	Bounce      float64 `json:"bounce"`
	Complaint   float64 `json:"complaint"`
	Unsubscribe float64 `json:"unsubscribe"`
}

// Report is a campaign's report.
type Report struct {
	CampaignID string `json:"campaign_id"`
	State      State  `json:"state"`
	Counts     Counts `json:"counts"`
	Rates      Rates  `json:"rates"`
	// Truncated is set when the audience had more than MaxAudience subscribers when it was
	// planned: the rest were not planned.
	Truncated bool `json:"truncated"`
}

// Report returns a campaign's counts and rates.
func (s *Service) Report(ctx context.Context, bot, id string) (Report, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Report{}, err
	}
	c, err := s.counts(ctx, bot, id)
	if err != nil {
		return Report{}, err
	}
	r, err := s.loadRun(ctx, bot, id)
	if err != nil {
		return Report{}, err
	}
	out := Report{CampaignID: id, State: rec.State, Counts: c, Truncated: r.Truncated}
	if c.Sent > 0 {
		rate := func(n int64) float64 { return float64(n) / float64(c.Sent) }
		out.Rates = Rates{Delivery: rate(c.Delivered), Open: rate(c.Opened), Click: rate(c.Clicked), Bounce: rate(c.Bounced),
			Complaint: rate(c.Complained), Unsubscribe: rate(c.Unsubscribed)}
	}
	return out, nil
}

// Link is one tracked link of a campaign.
type Link struct {
	Index int    `json:"index"`
	URL   string `json:"url"`
	// Clicks counts every click; UniqueClickers the recipients who clicked it.
	Clicks         int64 `json:"clicks"`
	UniqueClickers int64 `json:"unique_clickers"`
}

// Links returns a campaign's tracked links with their clicks (empty before it is
// scheduled: the link table is made then).
func (s *Service) Links(ctx context.Context, bot, id string) ([]Link, error) {
	if _, err := s.load(ctx, bot, id); err != nil {
		return nil, err
	}
	urls, err := s.linkTable(ctx, bot, id)
	if err != nil {
		return nil, err
	}
	out := make([]Link, len(urls))
	for i, u := range urls {
		out[i] = Link{Index: i, URL: u}
	}
	page, err := s.d.Store.Query(ctx, store.Query{PK: dataPK(bot, id), Prefix: linkCounterPrefix})
	if err != nil {
		return nil, err
	}
	for _, it := range page.Items {
		// L#<nnn>#clicks or L#<nnn>#clickers
		parts := strings.Split(it.SK, "#")
		if len(parts) != 3 {
			return nil, fmt.Errorf("link counter %s: malformed key", it.SK)
		}
		i, err := strconv.Atoi(parts[1])
		if err != nil || i < 0 || i >= len(out) {
			continue
		}
		switch parts[2] {
		case "clicks":
			out[i].Clicks = it.Count
		case "clickers":
			out[i].UniqueClickers = it.Count
		}
	}
	return out, nil
}

// linkDoc is the stored link table.
type linkDoc struct {
	Links []string `json:"links"`
}

// linkTable reads a campaign's link table (empty when it has none yet).
func (s *Service) linkTable(ctx context.Context, bot, id string) ([]string, error) {
	it, err := s.d.Store.Get(ctx, linksKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	d, err := store.Decode[linkDoc](it)
	if d.Links == nil {
		d.Links = []string{}
	}
	return d.Links, err
}
