package playbooks

import (
	"context"
	"fmt"
	"time"

	"github.com/botplatform/api/functions/playbooks/catalog"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
)

// KPI ranges.
const (
	// MaxKPIDays bounds a KPI read's range, as the analytics families bound theirs.
	MaxKPIDays = 366
	// DefaultKPIDays is the range when none is given: the last 30 days.
	DefaultKPIDays = 30
)

// KPIs is the answer of GET .../kpis.
type KPIs struct {
	InstallID  string      `json:"install_id"`
	PlaybookID string      `json:"playbook_id"`
	Version    int         `json:"version"`
	From       time.Time   `json:"from"`
	To         time.Time   `json:"to"`
	KPIs       []KPIResult `json:"kpis"`
	ComputedAt time.Time   `json:"computed_at"`
}

// KPIResult is one KPI over the range: its total and its daily series (every UTC day the
// range touches, zeros included).
type KPIResult struct {
	catalog.KPI
	Value  int64      `json:"value"`
	Series []DayValue `json:"series"`
}

// DayValue is one day of a series.
type DayValue struct {
	Day   string `json:"day"`
	Value int64  `json:"value"`
}

// ParseRange reads a KPI range: from and to are RFC 3339 times or dates (a date is its UTC
// midnight; a date as to includes that day), to defaults to now and from to DefaultKPIDays
// before to.
func ParseRange(now time.Time, from, to string) (time.Time, time.Time, error) {
	parse := func(name, v string, end bool) (time.Time, error) {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return t.UTC(), nil
		}
		if d, err := time.Parse(time.DateOnly, v); err == nil {
			if end {
				d = d.AddDate(0, 0, 1)
			}
			return d, nil
		}
		return time.Time{}, httpapi.InvalidParam(name, name+" must be an RFC 3339 time or a date (2026-01-31)")
	}
	t := now.UTC().Truncate(time.Second)
	var err error
	if to != "" {
		if t, err = parse("to", to, true); err != nil {
			return time.Time{}, time.Time{}, err
		}
	}
	f := t.AddDate(0, 0, -DefaultKPIDays)
	if from != "" {
		if f, err = parse("from", from, false); err != nil {
			return time.Time{}, time.Time{}, err
		}
	}
	if !f.Before(t) {
		return time.Time{}, time.Time{}, httpapi.InvalidParam("from", "from must be before to")
	}
	if t.Sub(f) > MaxKPIDays*24*time.Hour {
		return time.Time{}, time.Time{}, httpapi.RangeTooLong(t.Sub(f), MaxKPIDays)
	}
	return f, t, nil
}

// KPIs computes the KPIs of the caller's installed install over [from, to) from the bot's
// event log: each the count of its event, narrowed to the install's reaction, label or
// step, with a daily series.
func (s *Service) KPIs(ctx context.Context, p *auth.Principal, id string, from, to time.Time) (KPIs, error) {
	rec, err := s.locate(ctx, p, botKPIs, id)
	if err != nil {
		return KPIs{}, err
	}
	if rec.Status != StatusInstalled {
		return KPIs{}, stateError(rec, "read its KPIs")
	}
	if s.events == nil {
		return KPIs{}, httpapi.E(httpapi.KindUnavailable, "temporarily_unavailable", "KPIs are not available in this process")
	}
	pb, ok := s.catalog.Get(rec.PlaybookID, rec.Version)
	if !ok {
		return KPIs{}, fmt.Errorf("playbooks: install %s names %s v%d, not in the catalog", rec.ID, rec.PlaybookID, rec.Version)
	}
	ids := map[string]string{}
	for _, r := range rec.Resources {
		ids[catalog.Ref(r.Kind, r.Key)] = r.ID
	}
	var days []string
	for d := from.UTC().Truncate(24 * time.Hour); d.Before(to); d = d.AddDate(0, 0, 1) {
		days = append(days, d.Format(time.DateOnly))
	}
	out := KPIs{InstallID: rec.ID, PlaybookID: pb.ID, Version: pb.Version, From: from, To: to, KPIs: []KPIResult{}, ComputedAt: stamp(s.now())}
	names := []string{}
	for _, k := range pb.KPIs {
		if !contains(names, k.Event) {
			names = append(names, k.Event)
		}
	}
	perDay := make([]map[string]int64, len(pb.KPIs))
	for i := range perDay {
		perDay[i] = map[string]int64{}
	}
	err = s.events.Scan(ctx, eventlog.Query{BotID: rec.BotID, Names: names, From: from, To: to}, func(e eventlog.Event) error {
		for i, k := range pb.KPIs {
			if k.Event == e.Name && matches(k, e, ids) {
				perDay[i][e.At.UTC().Format(time.DateOnly)]++
			}
		}
		return nil
	})
	if err != nil {
		return KPIs{}, fmt.Errorf("playbooks: read events: %w", err)
	}
	for i, k := range pb.KPIs {
		r := KPIResult{KPI: k, Series: make([]DayValue, 0, len(days))}
		for _, d := range days {
			r.Series = append(r.Series, DayValue{Day: d, Value: perDay[i][d]})
			r.Value += perDay[i][d]
		}
		out.KPIs = append(out.KPIs, r)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// matches reports whether e counts for k: its reaction, label, popup and step, when k names
// them.
func matches(k catalog.KPI, e eventlog.Event, ids map[string]string) bool {
	prop := func(name string) string { s, _ := e.Properties[name].(string); return s }
	if k.Reaction != "" && prop("reaction_id") != ids[catalog.Ref(catalog.KindReaction, k.Reaction)] {
		return false
	}
	if k.Label != "" && prop("label_id") != ids[catalog.Ref(catalog.KindLabel, k.Label)] {
		return false
	}
	if k.Popup != "" && prop("popup_id") != ids[catalog.Ref(catalog.KindPopup, k.Popup)] {
		return false
	}
	if k.Step != "" && prop("step_id") != k.Step {
		return false
	}
	return true
}
