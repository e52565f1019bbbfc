package meta

import (
	"context"
	"slices"
	"time"
)

// AssetCheck is one asset's state after a check.
type AssetCheck struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Problems are codes (docs/meta.md, "Check"): missing_permission:<permission>,
	// messaging_task_missing, phone_not_verified, quality_rating_red, not_visible.
	Problems []string `json:"problems"`
}

// CheckResult is the answer of POST .../check.
type CheckResult struct {
	ConnectionID string `json:"connection_id"`
	Status       string `json:"status"`
	// MissingPermissions are the dialog's scopes the user has not granted (declined or
	// removed since).
	MissingPermissions  []string     `json:"missing_permissions"`
	DeclinedPermissions []string     `json:"declined_permissions"`
	Assets              []AssetCheck `json:"assets"`
	CheckedAt           time.Time    `json:"checked_at"`
}

// needs are the permissions each kind of asset needs to be used as a channel.
var needs = map[string][]string{
	KindPage:      {"pages_show_list", "pages_messaging"},
	KindInstagram: {"instagram_basic", "instagram_manage_messages"},
	KindWABA:      {"whatsapp_business_management"},
	KindPhone:     {"whatsapp_business_management", "whatsapp_business_messaging"},
}

// Check re-reads the connection's permissions and assets from Graph, stores the refreshed
// asset list (selection and attachments kept) and answers each asset's problems. A token
// Graph refuses marks the connection expired (422 meta_token_rejected).
func (s *Service) Check(ctx context.Context, account, id string) (CheckResult, error) {
	rec, err := s.load(ctx, account, id)
	if err != nil {
		return CheckResult{}, err
	}
	if rec.Status != StatusActive {
		return CheckResult{}, notActive(s.view(rec).Status)
	}
	tok, _, _, err := s.token(ctx, account, id)
	if err != nil {
		return CheckResult{}, err
	}
	f, err := s.fetch(ctx, tok)
	if err != nil {
		if tokenRejected(err) {
			s.fail(ctx, account, id, StatusExpired, "token_rejected")
		}
		return CheckResult{}, graphProblem(err)
	}
	now := stamp(s.now())
	ar, _, err := s.saveAssets(ctx, account, id, func(ar *assetsRecord) {
		ar.Assets, ar.Truncated, ar.RefreshedAt = merge(ar.Assets, f.Assets), f.Truncated, now
	})
	if err != nil {
		return CheckResult{}, err
	}
	rec, err = s.update(ctx, account, id, func(r *record) bool {
		r.GrantedPermissions, r.DeclinedPermissions, r.AssetCounts = f.Granted, f.Declined, counts(ar.Assets)
		r.User = &f.User
		return true
	})
	if err != nil {
		return CheckResult{}, err
	}
	out := CheckResult{ConnectionID: id, Status: rec.Status, MissingPermissions: []string{}, DeclinedPermissions: f.Declined,
		Assets: []AssetCheck{}, CheckedAt: now}
	if out.DeclinedPermissions == nil {
		out.DeclinedPermissions = []string{}
	}
	for _, scope := range Scopes {
		if !slices.Contains(f.Granted, scope) {
			out.MissingPermissions = append(out.MissingPermissions, scope)
		}
	}
	for _, a := range ar.Assets {
		c := AssetCheck{ID: a.ID, Kind: a.Kind, Name: a.Name, Problems: []string{}}
		for _, p := range needs[a.Kind] {
			if !slices.Contains(f.Granted, p) {
				c.Problems = append(c.Problems, "missing_permission:"+p)
			}
		}
		switch {
		case a.Gone:
			c.Problems = append(c.Problems, "not_visible")
		case a.Kind == KindPage && !slices.Contains(a.Tasks, "MESSAGING"):
			c.Problems = append(c.Problems, "messaging_task_missing")
		case a.Kind == KindPhone:
			if a.CodeVerificationStatus != "" && a.CodeVerificationStatus != "VERIFIED" {
				c.Problems = append(c.Problems, "phone_not_verified")
			}
			if a.QualityRating == "RED" {
				c.Problems = append(c.Problems, "quality_rating_red")
			}
		}
		c.OK = len(c.Problems) == 0
		out.Assets = append(out.Assets, c)
	}
	return out, nil
}
