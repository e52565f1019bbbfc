package popups

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// Ranges of stats: UTC days, both ends included.
const (
	// MaxStatsDays is the longest range one stats or experiment call reads.
	MaxStatsDays = 366
	// DefaultStatsDays is the range when none is given: the last 30 days, today included.
	DefaultStatsDays = 30
	// StatsRetention is how long after its day a counter is kept.
	StatsRetention = 2 * 366 * 24 * time.Hour
)

const dayLayout = "2006-01-02"

// dateRange is a range of UTC days, From and To included.
type dateRange struct {
	From, To time.Time
}

// parseRange reads from and to (YYYY-MM-DD, UTC days, both optional). to defaults to
// today, from to the DefaultStatsDays that end at to, or to def when given (moved up to
// MaxStatsDays before to). A range that
// is reversed or longer than MaxStatsDays is a 400 invalid_parameter.
func parseRange(from, to string, today time.Time, def *time.Time) (dateRange, error) {
	var r dateRange
	var err error
	r.To = day(today)
	if to != "" {
		if r.To, err = time.Parse(dayLayout, to); err != nil {
			return r, httpapi.InvalidParam("to", "to must be a date YYYY-MM-DD (a UTC day)")
		}
	}
	r.From = r.To.AddDate(0, 0, -(DefaultStatsDays - 1))
	if def != nil {
		r.From = day(*def)
		if earliest := r.To.AddDate(0, 0, -(MaxStatsDays - 1)); r.From.Before(earliest) {
			r.From = earliest
		}
		if r.From.After(r.To) {
			r.From = r.To
		}
	}
	if from != "" {
		if r.From, err = time.Parse(dayLayout, from); err != nil {
			return r, httpapi.InvalidParam("from", "from must be a date YYYY-MM-DD (a UTC day)")
		}
	}
	if r.From.After(r.To) {
		return r, httpapi.InvalidParam("from", "from must not be after to")
	}
	if r.days() > MaxStatsDays {
		return r, httpapi.InvalidParam("from", "the range from "+r.From.Format(dayLayout)+" to "+r.To.Format(dayLayout)+" is "+strconv.Itoa(r.days())+" days; at most "+strconv.Itoa(MaxStatsDays))
	}
	return r, nil
}

func day(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// days is the number of days in r.
func (r dateRange) days() int { return int(r.To.Sub(r.From).Hours()/24) + 1 }

// Counts are the events of a day, a variant or a range.
type Counts struct {
	Impressions int64 `json:"impressions"`
	Closes      int64 `json:"closes"`
	Conversions int64 `json:"conversions"`
}

func (c *Counts) add(t EventType, n int64) {
	switch t {
	case EventImpression:
		c.Impressions += n
	case EventClose:
		c.Closes += n
	case EventConversion:
		c.Conversions += n
	}
}

// rate is conversions per impression, to four decimals (0 without impressions).
func rate(conversions, impressions int64) float64 {
	if impressions == 0 {
		return 0
	}
	return math.Round(float64(conversions)/float64(impressions)*10000) / 10000
}

// Totals are a range's counts with their conversion rate.
type Totals struct {
	Counts
	ConversionRate float64 `json:"conversion_rate"`
}

// Day is one UTC day of stats.
type Day struct {
	Date string `json:"date"`
	Counts
}

// Stats is the stats answer: every day of the range, days without events included.
type Stats struct {
	PopupID string `json:"popup_id"`
	From    string `json:"from"`
	To      string `json:"to"`
	Totals  Totals `json:"totals"`
	Days    []Day  `json:"days"`
}

// counter is one stored counter.
type counter struct {
	day, variant string
	typ          EventType
	n            int64
}

// counters reads the popup's counters over r: one query, paged.
func (s *Service) counters(ctx context.Context, bot, popup string, r dateRange) ([]counter, error) {
	q := store.Query{PK: statsPK(bot),
		From: popup + "#" + r.From.Format(dayLayout) + "#",
		To:   popup + "#" + r.To.Format(dayLayout) + "#~"}
	var out []counter
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			parts := strings.Split(strings.TrimPrefix(it.SK, popup+"#"), "#")
			if len(parts) != 3 {
				continue
			}
			out = append(out, counter{day: parts[0], variant: parts[1], typ: EventType(parts[2]), n: it.Count})
		}
		if page.Next == "" {
			return out, nil
		}
		q.Cursor = page.Next
	}
}

// Stats returns a popup's events per day, every variant together, over the UTC days from
// and to (YYYY-MM-DD, both included; by default the last DefaultStatsDays days).
func (s *Service) Stats(ctx context.Context, bot, id, from, to string) (Stats, error) {
	r, err := parseRange(from, to, s.now(), nil)
	if err != nil {
		return Stats{}, err
	}
	if _, err := s.load(ctx, bot, id); err != nil {
		return Stats{}, err
	}
	cs, err := s.counters(ctx, bot, id, r)
	if err != nil {
		return Stats{}, err
	}
	byDay := map[string]*Counts{}
	for _, c := range cs {
		if byDay[c.day] == nil {
			byDay[c.day] = &Counts{}
		}
		byDay[c.day].add(c.typ, c.n)
	}
	st := Stats{PopupID: id, From: r.From.Format(dayLayout), To: r.To.Format(dayLayout), Days: make([]Day, 0, r.days())}
	for d := r.From; !d.After(r.To); d = d.AddDate(0, 0, 1) {
		key := d.Format(dayLayout)
		day := Day{Date: key}
		if c := byDay[key]; c != nil {
			day.Counts = *c
		}
		st.Totals.Impressions += day.Impressions
		st.Totals.Closes += day.Closes
		st.Totals.Conversions += day.Conversions
		st.Days = append(st.Days, day)
	}
	st.Totals.ConversionRate = rate(st.Totals.Conversions, st.Totals.Impressions)
	return st, nil
}

// VariantResult is one variant's results in an experiment.
type VariantResult struct {
	Key   string `json:"key"`
	Share int    `json:"share"`
	Counts
	ConversionRate float64 `json:"conversion_rate"`
}

// ExperimentResults is the experiment answer. A popup without an experiment has no
// variants and no range.
type ExperimentResults struct {
	PopupID   string          `json:"popup_id"`
	StartedAt *time.Time      `json:"started_at"`
	From      *string         `json:"from"`
	To        *string         `json:"to"`
	Variants  []VariantResult `json:"variants"`
}

// Experiment returns each variant's results. from and to are as for stats, but the range
// starts by default when the experiment did (at most MaxStatsDays before to).
func (s *Service) Experiment(ctx context.Context, bot, id, from, to string) (ExperimentResults, error) {
	pop, err := s.load(ctx, bot, id)
	if err != nil {
		return ExperimentResults{}, err
	}
	res := ExperimentResults{PopupID: id, Variants: []VariantResult{}}
	if pop.Experiment == nil {
		return res, nil
	}
	started := pop.Experiment.StartedAt
	r, err := parseRange(from, to, s.now(), &started)
	if err != nil {
		return ExperimentResults{}, err
	}
	cs, err := s.counters(ctx, bot, id, r)
	if err != nil {
		return ExperimentResults{}, err
	}
	byVariant := map[string]*Counts{}
	for _, c := range cs {
		if byVariant[c.variant] == nil {
			byVariant[c.variant] = &Counts{}
		}
		byVariant[c.variant].add(c.typ, c.n)
	}
	f, t := r.From.Format(dayLayout), r.To.Format(dayLayout)
	res.StartedAt, res.From, res.To = &started, &f, &t
	for _, v := range pop.Experiment.Variants {
		vr := VariantResult{Key: v.Key, Share: v.Share}
		if c := byVariant[v.Key]; c != nil {
			vr.Counts = *c
		}
		vr.ConversionRate = rate(vr.Conversions, vr.Impressions)
		res.Variants = append(res.Variants, vr)
	}
	return res, nil
}
