package ai

import (
	"context"
	"slices"
	"strings"
	"time"

	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// The counters of one day, profile, provider and billing.
const (
	metricRequests = "requests"
	metricInput    = "input_tokens"
	metricOutput   = "output_tokens"
	metricCost     = "cost_nanos"
)

// usageRetention is how long a day's counters are kept: the longest range a report covers,
// and a month to spare.
const usageRetention = 400 * 24 * time.Hour

// MaxUsageDays bounds a usage report's range.
const MaxUsageDays = 366

// usageOf is what a generation used: the provider's counts, and their cost at the model's
// price for managed calls (an account's own key is billed by the provider: 0).
func (s *Service) usageOf(t Target, billing string, u aiapi.Usage) Usage {
	out := Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Cost: costOf(0)}
	if billing != BillingManaged {
		return out
	}
	p, ok := s.prices[t.Provider+":"+t.Model]
	if !ok {
		s.log.Error("ai: a managed model has no price: metered at 0", "provider", t.Provider, "model", t.Model)
	}
	out.Cost = costOf(u.InputTokens*p.InputNanos + u.OutputTokens*p.OutputNanos)
	return out
}

// meterWrites add a response's usage to its day's counters, and a managed one's to the
// platform's ledger (reconcile.go).
func (s *Service) meterWrites(account string, r Response) []store.Write {
	day := r.CreatedAt.UTC().Format(time.DateOnly)
	expires := store.SecondsPrecision(r.CreatedAt.Add(usageRetention))
	add := func(metric string, n int64) store.Write {
		return store.AddOp(usageKey(account, day, r.Profile, r.Provider, r.Billing, metric), n, expires)
	}
	return append([]store.Write{add(metricRequests, 1), add(metricInput, r.Usage.InputTokens), add(metricOutput, r.Usage.OutputTokens),
		add(metricCost, r.Usage.Cost.Nanos)}, ledgerWrites(r)...)
}

// UsageRow is one day's usage of one profile at one provider, by billing.
type UsageRow struct {
	Date         string `json:"date"`
	Profile      string `json:"profile"`
	Provider     string `json:"provider"`
	Billing      string `json:"billing"`
	Requests     int64  `json:"requests"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Cost         Cost   `json:"cost"`
}

// UsageTotal is a report's sum.
type UsageTotal struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Cost         Cost  `json:"cost"`
}

// UsageReport is the account's usage over a range of days (UTC), oldest first.
type UsageReport struct {
	From  string     `json:"from"`
	To    string     `json:"to"`
	Data  []UsageRow `json:"data"`
	Total UsageTotal `json:"total"`
}

// UsageQuery is what GET /api/v1/ai/usage asks: from and to are days (inclusive, UTC,
// YYYY-MM-DD; default the last 30 days to today), narrowed to a profile or provider.
type UsageQuery struct {
	From, To, Profile, Provider string
}

// Usage reports the account's usage.
func (s *Service) Usage(ctx context.Context, account string, q UsageQuery) (UsageReport, error) {
	today := s.now().UTC().Truncate(24 * time.Hour)
	var p httpapi.Problems
	day := func(name, v string, def time.Time) time.Time {
		if v == "" {
			return def
		}
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			p.Add(name, "must be a day, YYYY-MM-DD")
		}
		return t
	}
	to := day("to", q.To, today)
	from := day("from", q.From, to.AddDate(0, 0, -29))
	if q.Profile != "" && !slices.Contains(Profiles, q.Profile) {
		p.Add("profile", "must be one of %s", strings.Join(Profiles, ", "))
	}
	if q.Provider != "" && !slices.Contains(aiapi.Providers, q.Provider) {
		p.Add("provider", "must be one of %s", strings.Join(aiapi.Providers, ", "))
	}
	if err := p.Err(); err != nil {
		return UsageReport{}, err
	}
	if from.After(to) {
		return UsageReport{}, httpapi.InvalidParam("from", "from must not be after to")
	}
	if days := int(to.Sub(from).Hours()/24) + 1; days > MaxUsageDays {
		return UsageReport{}, httpapi.Errorf(httpapi.KindInvalid, "range_too_long", "the range is %d days; at most %d", days, MaxUsageDays)
	}
	rep := UsageReport{From: from.Format(time.DateOnly), To: to.Format(time.DateOnly), Data: []UsageRow{}}
	rows := map[string]*UsageRow{}
	var order []string
	var totalNanos int64
	qry := store.Query{PK: aiPK(account), From: usagePrefix + rep.From, To: usagePrefix + rep.To + "#~"}
	for {
		page, err := s.store.Query(ctx, qry)
		if err != nil {
			return UsageReport{}, err
		}
		for _, it := range page.Items {
			parts := strings.Split(strings.TrimPrefix(it.SK, usagePrefix), "#")
			if len(parts) != 5 || (q.Profile != "" && parts[1] != q.Profile) || (q.Provider != "" && parts[2] != q.Provider) {
				continue
			}
			id := strings.Join(parts[:4], "#")
			r, ok := rows[id]
			if !ok {
				r = &UsageRow{Date: parts[0], Profile: parts[1], Provider: parts[2], Billing: parts[3]}
				rows[id] = r
				order = append(order, id)
			}
			switch parts[4] {
			case metricRequests:
				r.Requests += it.Count
				rep.Total.Requests += it.Count
			case metricInput:
				r.InputTokens += it.Count
				rep.Total.InputTokens += it.Count
			case metricOutput:
				r.OutputTokens += it.Count
				rep.Total.OutputTokens += it.Count
			case metricCost:
				r.Cost.Nanos += it.Count
				totalNanos += it.Count
			}
		}
		if page.Next == "" {
			break
		}
		qry.Cursor = page.Next
	}
	for _, id := range order {
		r := rows[id]
		r.Cost = costOf(r.Cost.Nanos)
		rep.Data = append(rep.Data, *r)
	}
	rep.Total.Cost = costOf(totalNanos)
	return rep, nil
}
