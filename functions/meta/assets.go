package meta

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// The kinds of assets.
const (
	KindPage      = "facebook_page"
	KindInstagram = "instagram_account"
	KindWABA      = "whatsapp_business_account"
	KindPhone     = "whatsapp_phone_number"
)

// idPrefixes are the asset ids' prefixes by kind: an asset id is <prefix>:<Graph id>.
var idPrefixes = map[string]string{KindPage: "page", KindInstagram: "ig", KindWABA: "waba", KindPhone: "phone"}

func assetID(kind, graphID string) string { return idPrefixes[kind] + ":" + graphID }

// Asset is one customer-owned asset the connection sees. Never a token: a page's access
// token is not even read (nothing here needs it; see docs/meta.md).
type Asset struct {
	// ID is the platform's id of the asset: its kind's prefix and its Graph id (phone:1065...).
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	GraphID string `json:"graph_id"`
	Name    string `json:"name"`
	// ParentID is the asset it belongs to: an Instagram account's page, a phone number's
	// WhatsApp Business account.
	ParentID string `json:"parent_id,omitempty"`
	// Tasks are what the user may do on a page (MESSAGING, MODERATE, ...).
	Tasks []string `json:"tasks,omitempty"`
	// Username is an Instagram account's.
	Username string `json:"username,omitempty"`
	// BusinessID is the business (Business Manager) that owns a WhatsApp Business account.
	BusinessID string `json:"business_id,omitempty"`
	// The phone number's facts.
	DisplayPhoneNumber     string `json:"display_phone_number,omitempty"`
	VerifiedName           string `json:"verified_name,omitempty"`
	QualityRating          string `json:"quality_rating,omitempty"`
	CodeVerificationStatus string `json:"code_verification_status,omitempty"`
	// Selected says the customer uses the asset (PUT .../selection).
	Selected bool `json:"selected"`
	// ChannelID and BotID are the channel the asset was attached as, and its bot.
	ChannelID string `json:"channel_id,omitempty"`
	BotID     string `json:"bot_id,omitempty"`
	// Gone is true for an attached asset Graph no longer shows the connection (kept for its
	// attachment).
	Gone bool `json:"gone,omitempty"`
}

// assetsRecord is a connection's stored assets.
type assetsRecord struct {
	Assets      []Asset   `json:"assets"`
	Truncated   bool      `json:"truncated,omitempty"`
	RefreshedAt time.Time `json:"refreshed_at"`
	// ChannelTokens is, per attached asset id, the revision of the connection's token its
	// channel holds: a refresh replaces the channels' tokens older than the current one.
	ChannelTokens map[string]int64 `json:"channel_tokens,omitempty"`
}

// WABA is a WhatsApp Business account with its phone numbers.
type WABA struct {
	Asset
	PhoneNumbers []Asset `json:"phone_numbers"`
}

// Assets is the answer of GET .../assets: the assets grouped by kind.
type Assets struct {
	ConnectionID string `json:"connection_id"`
	// Revision is the selection's: PUT .../selection sends it as expected_revision.
	Revision    int64     `json:"revision"`
	RefreshedAt time.Time `json:"refreshed_at"`
	// Truncated is true when Graph had more assets than the platform reads (the paging bound).
	Truncated                bool    `json:"truncated"`
	Pages                    []Asset `json:"pages"`
	InstagramAccounts        []Asset `json:"instagram_accounts"`
	WhatsAppBusinessAccounts []WABA  `json:"whatsapp_business_accounts"`
}

func (s *Service) assetsView(id string, rev int64, ar assetsRecord) Assets {
	out := Assets{ConnectionID: id, Revision: rev, RefreshedAt: ar.RefreshedAt, Truncated: ar.Truncated,
		Pages: []Asset{}, InstagramAccounts: []Asset{}, WhatsAppBusinessAccounts: []WABA{}}
	for _, a := range ar.Assets {
		switch a.Kind {
		case KindPage:
			out.Pages = append(out.Pages, a)
		case KindInstagram:
			out.InstagramAccounts = append(out.InstagramAccounts, a)
		case KindWABA:
			w := WABA{Asset: a, PhoneNumbers: []Asset{}}
			for _, p := range ar.Assets {
				if p.Kind == KindPhone && p.ParentID == a.ID {
					w.PhoneNumbers = append(w.PhoneNumbers, p)
				}
			}
			out.WhatsAppBusinessAccounts = append(out.WhatsAppBusinessAccounts, w)
		}
	}
	return out
}

func counts(assets []Asset) Counts {
	var c Counts
	for _, a := range assets {
		if a.Gone {
			continue
		}
		switch a.Kind {
		case KindPage:
			c.Pages++
		case KindInstagram:
			c.InstagramAccounts++
		case KindWABA:
			c.WhatsAppBusinessAccounts++
		case KindPhone:
			c.WhatsAppPhoneNumbers++
		}
	}
	return c
}

// fetched is what the callback and a check read from Graph.
type fetched struct {
	User      User
	Granted   []string
	Declined  []string
	Assets    []Asset
	Truncated bool
}

// graphID is a Graph node id: digits only, which also keeps it from changing a path it is
// put in.
var graphID = regexp.MustCompile(`^[0-9]{1,32}$`)

// maxText bounds a name Graph gives.
const maxText = 256

func clip(s string) string {
	r := []rune(s)
	if len(r) > maxText {
		return string(r[:maxText])
	}
	return s
}

// fetch reads who the token is, its permissions and the assets it sees.
func (s *Service) fetch(ctx context.Context, token string) (fetched, error) {
	var f fetched
	var me struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if err := s.graph.get(ctx, token, "me", url.Values{"fields": {"id,name"}}, &me); err != nil {
		return fetched{}, err
	}
	f.User = User{ID: me.ID, Name: clip(me.Name)}
	var err error
	if f.Granted, f.Declined, err = s.graph.permissions(ctx, token, s.maxPages); err != nil {
		return fetched{}, err
	}
	type igAccount struct {
		ID       string `json:"id"`
		Username string `json:"username"`
		Name     string `json:"name"`
	}
	type pageNode struct {
		ID    string     `json:"id"`
		Name  string     `json:"name"`
		Tasks []string   `json:"tasks"`
		IG    *igAccount `json:"instagram_business_account"`
	}
	pages, trunc, err := getAll[pageNode](ctx, s.graph, token, "me/accounts",
		url.Values{"fields": {"id,name,tasks,instagram_business_account{id,username,name}"}, "limit": {"100"}}, s.maxPages)
	if err != nil {
		return fetched{}, err
	}
	f.Truncated = f.Truncated || trunc
	for _, p := range pages {
		if !graphID.MatchString(p.ID) {
			continue
		}
		page := Asset{ID: assetID(KindPage, p.ID), Kind: KindPage, GraphID: p.ID, Name: clip(p.Name), Tasks: p.Tasks}
		f.Assets = append(f.Assets, page)
		if p.IG != nil && graphID.MatchString(p.IG.ID) {
			f.Assets = append(f.Assets, Asset{ID: assetID(KindInstagram, p.IG.ID), Kind: KindInstagram, GraphID: p.IG.ID,
				Name: clip(cmpOr(p.IG.Name, p.IG.Username)), Username: clip(p.IG.Username), ParentID: page.ID})
		}
	}
	type node struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	businesses, trunc, err := getAll[node](ctx, s.graph, token, "me/businesses", url.Values{"fields": {"id,name"}, "limit": {"100"}}, s.maxPages)
	if err != nil {
		return fetched{}, err
	}
	f.Truncated = f.Truncated || trunc
	seen := map[string]bool{}
	for _, b := range businesses {
		if !graphID.MatchString(b.ID) {
			continue
		}
		wabas, trunc, err := getAll[node](ctx, s.graph, token, b.ID+"/owned_whatsapp_business_accounts",
			url.Values{"fields": {"id,name"}, "limit": {"100"}}, s.maxPages)
		if err != nil {
			return fetched{}, err
		}
		f.Truncated = f.Truncated || trunc
		for _, w := range wabas {
			if !graphID.MatchString(w.ID) || seen[w.ID] {
				continue
			}
			seen[w.ID] = true
			waba := Asset{ID: assetID(KindWABA, w.ID), Kind: KindWABA, GraphID: w.ID, Name: clip(w.Name), BusinessID: b.ID}
			f.Assets = append(f.Assets, waba)
			type phoneNode struct {
				ID                     string `json:"id"`
				DisplayPhoneNumber     string `json:"display_phone_number"`
				VerifiedName           string `json:"verified_name"`
				QualityRating          string `json:"quality_rating"`
				CodeVerificationStatus string `json:"code_verification_status"`
			}
			phones, trunc, err := getAll[phoneNode](ctx, s.graph, token, w.ID+"/phone_numbers",
				url.Values{"fields": {"id,display_phone_number,verified_name,quality_rating,code_verification_status"}, "limit": {"100"}}, s.maxPages)
			if err != nil {
				return fetched{}, err
			}
			f.Truncated = f.Truncated || trunc
			for _, p := range phones {
				if !graphID.MatchString(p.ID) {
					continue
				}
				f.Assets = append(f.Assets, Asset{ID: assetID(KindPhone, p.ID), Kind: KindPhone, GraphID: p.ID,
					Name: clip(cmpOr(p.VerifiedName, p.DisplayPhoneNumber)), ParentID: waba.ID,
					DisplayPhoneNumber: clip(p.DisplayPhoneNumber), VerifiedName: clip(p.VerifiedName),
					QualityRating: safeCode(p.QualityRating), CodeVerificationStatus: safeCode(p.CodeVerificationStatus)})
			}
		}
	}
	return f, nil
}

// merge is fresh with what the customer decided on old's assets kept (selection,
// attachment); an attached asset Graph no longer shows is kept, marked gone.
func merge(old, fresh []Asset) []Asset {
	byID := map[string]Asset{}
	for _, a := range old {
		byID[a.ID] = a
	}
	out := make([]Asset, 0, len(fresh))
	seen := map[string]bool{}
	for _, a := range fresh {
		if o, ok := byID[a.ID]; ok {
			a.Selected, a.ChannelID, a.BotID = o.Selected, o.ChannelID, o.BotID
		}
		seen[a.ID] = true
		out = append(out, a)
	}
	for _, o := range old {
		if !seen[o.ID] && o.ChannelID != "" {
			o.Gone = true
			out = append(out, o)
		}
	}
	return out
}

// errNoAssets is what loadAssets wraps when a connection has no assets: one never active
// (pending, or failed before its callback stored them), or one deleted meanwhile.
var errNoAssets = errors.New("meta: the connection has no assets")

// loadAssets reads a connection's assets (errNoAssets, a 409 connection_not_active, when it
// has none).
func (s *Service) loadAssets(ctx context.Context, account, id string) (assetsRecord, int64, error) {
	it, err := s.store.Get(ctx, assetsKey(account, id))
	if errors.Is(err, store.ErrNotFound) {
		return assetsRecord{}, 0, httpapi.E(httpapi.KindConflict, "connection_not_active",
			"the connection has no assets yet: finish the Facebook Login first").Wrap(errNoAssets)
	}
	if err != nil {
		return assetsRecord{}, 0, err
	}
	ar, err := store.Decode[assetsRecord](it)
	return ar, it.Revision, err
}

// assetsOf reads the caller's connection id (404 outside the account) and its assets: a
// connection that never had any answers 409 connection_not_active with its state.
func (s *Service) assetsOf(ctx context.Context, account, id string) (assetsRecord, int64, error) {
	rec, err := s.load(ctx, account, id)
	if err != nil {
		return assetsRecord{}, 0, err
	}
	ar, rev, err := s.loadAssets(ctx, account, id)
	if errors.Is(err, errNoAssets) {
		return assetsRecord{}, 0, notActive(s.view(rec).Status)
	}
	return ar, rev, err
}

// GetAssets returns a connection's assets.
func (s *Service) GetAssets(ctx context.Context, account, id string) (Assets, error) {
	ar, rev, err := s.assetsOf(ctx, account, id)
	if err != nil {
		return Assets{}, err
	}
	return s.assetsView(id, rev, ar), nil
}

// SelectionRequest is the body of PUT .../selection.
type SelectionRequest struct {
	// AssetIDs are every asset the customer uses; the others are deselected.
	AssetIDs         []string `json:"asset_ids"`
	ExpectedRevision *int64   `json:"expected_revision"`
}

// maxSelection bounds the ids of one selection.
const maxSelection = 500

// Validate checks the body's shape.
func (r *SelectionRequest) Validate() error {
	var p httpapi.Problems
	if r.AssetIDs == nil {
		p.Add("asset_ids", "is required (an empty list deselects everything)")
	}
	if len(r.AssetIDs) > maxSelection {
		p.Add("asset_ids", "at most %d ids", maxSelection)
	}
	if r.ExpectedRevision == nil {
		p.Add("expected_revision", "is required: the assets' revision read")
	}
	return p.Err()
}

// Select sets which assets the customer uses. The selection is the customer's own
// bookkeeping: it is kept on a connection that has expired since (its assets stay
// readable), and refused (409 connection_not_active) only on one that never had assets.
func (s *Service) Select(ctx context.Context, account, id string, req SelectionRequest) (Assets, error) {
	ar, rev, err := s.assetsOf(ctx, account, id)
	if err != nil {
		return Assets{}, err
	}
	if *req.ExpectedRevision != rev {
		return Assets{}, httpapi.StaleRevision(rev)
	}
	var p httpapi.Problems
	for i, want := range req.AssetIDs {
		j := slices.IndexFunc(ar.Assets, func(a Asset) bool { return a.ID == want })
		if j < 0 || ar.Assets[j].Gone {
			p.Add("asset_ids["+itoa(i)+"]", "is not an asset of this connection (GET .../assets lists them)")
		}
	}
	if err := p.Err(); err != nil {
		return Assets{}, err
	}
	for i := range ar.Assets {
		ar.Assets[i].Selected = slices.Contains(req.AssetIDs, ar.Assets[i].ID)
	}
	it, err := item(assetsKey(account, id), rev+1, ar)
	if err != nil {
		return Assets{}, err
	}
	if err := s.store.Put(ctx, it, store.RevisionIs(rev)); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			_, cur, lerr := s.loadAssets(ctx, account, id)
			if lerr != nil {
				return Assets{}, lerr
			}
			return Assets{}, httpapi.StaleRevision(cur)
		}
		return Assets{}, err
	}
	return s.assetsView(id, rev+1, ar), nil
}

// saveAssets writes ar over revision rev, applying change to the current assets again when
// another write came first.
func (s *Service) saveAssets(ctx context.Context, account, id string, change func(*assetsRecord)) (assetsRecord, int64, error) {
	for range updateAttempts {
		ar, rev, err := s.loadAssets(ctx, account, id)
		if err != nil {
			return assetsRecord{}, 0, err
		}
		change(&ar)
		it, err := item(assetsKey(account, id), rev+1, ar)
		if err != nil {
			return assetsRecord{}, 0, err
		}
		err = s.store.Put(ctx, it, store.RevisionIs(rev))
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		return ar, rev + 1, err
	}
	return assetsRecord{}, 0, httpapi.E(httpapi.KindConflict, "concurrent_update", "the assets changed concurrently too often; retry")
}
