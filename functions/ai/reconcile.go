package ai

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/store"
)

// Reconciliation is the operator's check of what the platform metered on its managed keys
// against what the providers invoice for them (docs/ai.md, "Reconciliation"). Every managed
// generation also counts, in the same transaction as the account's own counters, in the
// platform's ledger: per day, provider and model, across accounts. An account's own key is
// billed by the provider to the account, so it is not in the ledger. Nothing of this is a
// customer route or an MCP tool: it is the admin CLI's `ai reconcile`.

// ledgerShards spreads a day's ledger over partitions, so that one busy day does not make one
// hot partition on DynamoDB; a read sums them.
const ledgerShards = 8

func ledgerPK(day string, shard int) string {
	return "AIPLATFORM#LEDGER#" + day + "#" + strconv.Itoa(shard)
}

// ledgerWrites add a managed response's usage to the platform's ledger.
func ledgerWrites(r Response) []store.Write {
	if r.Billing != BillingManaged {
		return nil
	}
	day := r.CreatedAt.UTC().Format(time.DateOnly)
	h := fnv.New32a()
	_, _ = h.Write([]byte(r.ID))
	pk := ledgerPK(day, int(h.Sum32()%ledgerShards))
	expires := store.SecondsPrecision(r.CreatedAt.Add(usageRetention))
	add := func(metric string, n int64) store.Write {
		return store.AddOp(store.Key{PK: pk, SK: r.Provider + "#" + r.Model + "#" + metric}, n, expires)
	}
	return []store.Write{add(metricRequests, 1), add(metricInput, r.Usage.InputTokens), add(metricOutput, r.Usage.OutputTokens),
		add(metricCost, r.Usage.Cost.Nanos)}
}

// LedgerRow is one day's managed usage of one provider model, as metered or as invoiced.
type LedgerRow struct {
	Date         string `json:"date"`
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	Requests     int64  `json:"requests,omitempty"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Cost         Cost   `json:"cost"`
}

// The statuses of a reconciled row.
const (
	ReconcileMatch     = "match"     // tokens equal, costs within CostTolerance
	ReconcileMismatch  = "mismatch"  // both sides have the row, and they differ
	ReconcileUnbilled  = "unbilled"  // metered, absent from the invoice
	ReconcileUnmetered = "unmetered" // invoiced, never metered: the platform lost usage
)

// CostTolerance is how far a row's metered cost may be from the invoiced one and still
// match: a provider rounds per request or per line, the platform per token.
const CostTolerance = 10_000_000 // one cent, in nano-USD

// ReconciledRow is a row of both sides and how they compare.
type ReconciledRow struct {
	Date     string     `json:"date"`
	Provider string     `json:"provider"`
	Model    string     `json:"model"`
	Status   string     `json:"status"`
	Metered  *LedgerRow `json:"metered"`
	Invoiced *LedgerRow `json:"invoiced"`
	// InputDelta, OutputDelta and CostDeltaNanos are invoiced less metered.
	InputDelta     int64 `json:"input_tokens_delta"`
	OutputDelta    int64 `json:"output_tokens_delta"`
	CostDeltaNanos int64 `json:"cost_delta_nanos"`
}

// Reconciliation compares the ledger with an invoice over a range of days.
type Reconciliation struct {
	From string          `json:"from"`
	To   string          `json:"to"`
	Rows []ReconciledRow `json:"rows"`
	// Differences counts the rows that are not a match.
	Differences int `json:"differences"`
}

// Ledger reads the platform's managed usage from from to to (days, inclusive, at most
// MaxUsageDays), by day, provider and model.
func (s *Service) Ledger(ctx context.Context, from, to time.Time) ([]LedgerRow, error) {
	from, to = from.UTC().Truncate(24*time.Hour), to.UTC().Truncate(24*time.Hour)
	if from.After(to) {
		return nil, errors.New("ai: from is after to")
	}
	if days := int(to.Sub(from).Hours()/24) + 1; days > MaxUsageDays {
		return nil, fmt.Errorf("ai: the range is %d days; at most %d", days, MaxUsageDays)
	}
	var out []LedgerRow
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		day := d.Format(time.DateOnly)
		rows := map[string]*LedgerRow{}
		for shard := range ledgerShards {
			q := store.Query{PK: ledgerPK(day, shard)}
			for {
				page, err := s.store.Query(ctx, q)
				if err != nil {
					return nil, err
				}
				for _, it := range page.Items {
					i := strings.LastIndex(it.SK, "#")
					j := strings.Index(it.SK, "#")
					if i <= j {
						continue
					}
					id := it.SK[:i]
					r, ok := rows[id]
					if !ok {
						r = &LedgerRow{Date: day, Provider: it.SK[:j], Model: it.SK[j+1 : i]}
						rows[id] = r
					}
					switch it.SK[i+1:] {
					case metricRequests:
						r.Requests += it.Count
					case metricInput:
						r.InputTokens += it.Count
					case metricOutput:
						r.OutputTokens += it.Count
					case metricCost:
						r.Cost.Nanos += it.Count
					}
				}
				if page.Next == "" {
					break
				}
				q.Cursor = page.Next
			}
		}
		keys := make([]string, 0, len(rows))
		for k := range rows {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			r := rows[k]
			r.Cost = costOf(r.Cost.Nanos)
			out = append(out, *r)
		}
	}
	return out, nil
}

// Reconcile compares the ledger from from to to with invoice, the providers' lines of those
// days (ReadInvoice). Every row of either side is reported, sorted by day, provider, model.
func (s *Service) Reconcile(ctx context.Context, from, to time.Time, invoice []LedgerRow) (Reconciliation, error) {
	metered, err := s.Ledger(ctx, from, to)
	if err != nil {
		return Reconciliation{}, err
	}
	rec := Reconciliation{From: from.UTC().Format(time.DateOnly), To: to.UTC().Format(time.DateOnly), Rows: []ReconciledRow{}}
	rows := map[string]*ReconciledRow{}
	row := func(r LedgerRow) *ReconciledRow {
		k := r.Date + "#" + r.Provider + "#" + r.Model
		if rows[k] == nil {
			rows[k] = &ReconciledRow{Date: r.Date, Provider: r.Provider, Model: r.Model}
		}
		return rows[k]
	}
	for _, m := range metered {
		row(m).Metered = &m
	}
	for _, in := range invoice {
		if in.Date < rec.From || in.Date > rec.To {
			continue
		}
		r := row(in)
		if r.Invoiced != nil {
			// Several lines of one model and day (per project, say) add up.
			in.InputTokens += r.Invoiced.InputTokens
			in.OutputTokens += r.Invoiced.OutputTokens
			in.Cost = costOf(in.Cost.Nanos + r.Invoiced.Cost.Nanos)
		}
		r.Invoiced = &in
	}
	for _, r := range rows {
		var m, i LedgerRow
		if r.Metered != nil {
			m = *r.Metered
		}
		if r.Invoiced != nil {
			i = *r.Invoiced
		}
		r.InputDelta, r.OutputDelta = i.InputTokens-m.InputTokens, i.OutputTokens-m.OutputTokens
		r.CostDeltaNanos = i.Cost.Nanos - m.Cost.Nanos
		switch {
		case r.Invoiced == nil:
			r.Status = ReconcileUnbilled
		case r.Metered == nil:
			r.Status = ReconcileUnmetered
		case r.InputDelta == 0 && r.OutputDelta == 0 && max(r.CostDeltaNanos, -r.CostDeltaNanos) <= CostTolerance:
			r.Status = ReconcileMatch
		default:
			r.Status = ReconcileMismatch
		}
		if r.Status != ReconcileMatch {
			rec.Differences++
		}
		rec.Rows = append(rec.Rows, *r)
	}
	slices.SortFunc(rec.Rows, func(a, b ReconciledRow) int {
		return strings.Compare(a.Date+"#"+a.Provider+"#"+a.Model, b.Date+"#"+b.Provider+"#"+b.Model)
	})
	return rec, nil
}

// invoiceHeader is the columns of an invoice file: one line per day, provider and model,
// normalized from the provider's usage export (docs/ai.md).
var invoiceHeader = []string{"date", "provider", "model", "input_tokens", "output_tokens", "cost_usd"}

// MaxInvoiceLines bounds an invoice file.
const MaxInvoiceLines = 100_000

// ReadInvoice reads an invoice file: CSV with the header date, provider, model,
// input_tokens, output_tokens, cost_usd (a decimal number of dollars, up to nine decimals).
// Every bad line is reported, with its line number.
func ReadInvoice(r io.Reader) ([]LedgerRow, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(invoiceHeader)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("invoice: %w", err)
	}
	if !slices.Equal(head, invoiceHeader) {
		return nil, fmt.Errorf("invoice: the header must be %s", strings.Join(invoiceHeader, ","))
	}
	var out []LedgerRow
	var problems []string
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("invoice: %w", err)
		}
		if len(out) >= MaxInvoiceLines {
			return nil, fmt.Errorf("invoice: more than %d lines", MaxInvoiceLines)
		}
		bad := func(format string, a ...any) {
			problems = append(problems, fmt.Sprintf("line %d: "+format, append([]any{line}, a...)...))
		}
		row := LedgerRow{Date: rec[0], Provider: rec[1], Model: rec[2]}
		if _, err := time.Parse(time.DateOnly, row.Date); err != nil {
			bad("date must be YYYY-MM-DD")
		}
		if !slices.Contains(aiapi.Providers, row.Provider) {
			bad("provider must be one of %s", strings.Join(aiapi.Providers, ", "))
		}
		if row.Model == "" {
			bad("model is required")
		}
		var err1, err2 error
		row.InputTokens, err1 = strconv.ParseInt(rec[3], 10, 64)
		row.OutputTokens, err2 = strconv.ParseInt(rec[4], 10, 64)
		if err1 != nil || err2 != nil || row.InputTokens < 0 || row.OutputTokens < 0 {
			bad("token counts must be whole numbers")
		}
		nanos, ok := dollarsToNanos(rec[5])
		if !ok {
			bad("cost_usd must be a decimal number of dollars with at most nine decimals")
		}
		row.Cost = costOf(nanos)
		out = append(out, row)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("invoice: %s", strings.Join(problems, "; "))
	}
	return out, nil
}

// dollarsToNanos parses a decimal dollar amount exactly (no float rounding).
func dollarsToNanos(s string) (int64, bool) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok || r.Sign() < 0 || strings.ContainsAny(s, "eE/") {
		return 0, false
	}
	r.Mul(r, big.NewRat(1_000_000_000, 1))
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}
