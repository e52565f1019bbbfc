// Package hubspot is the crm.Client of HubSpot: the CRM v3 objects API (search, batch read and
// upsert, create and update by id), the v4 associations API (a contact's deals), properties,
// deal pipelines, notes with associations and the account's details, with an OAuth 2.0 access token (authorization code with PKCE; Endpoint and Scopes
// are what the family's oauth2.Config needs) and refresh-token revocation.
package hubspot

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/botplatform/api/shared/channel/httpclient"
	"github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/crmhttp"
)

// Default base URLs: the API (and token endpoint) and the page where users authorize apps.
const (
	DefaultBaseURL     = "https://api.hubapi.com"
	DefaultAuthBaseURL = "https://app.hubspot.com"
)

// Bounds of HubSpot's API the client keeps to.
const (
	// pageSize is a search page: HubSpot allows 200.
	pageSize = 100
	// searchWindow is the most results one search reaches by paging; ChangedSince starts a
	// new search from the last modification time it saw before reaching it.
	searchWindow = 10000
	// associationPage is a page of a v4 associations list: HubSpot allows 500.
	associationPage = 500
	// batchSize is the most inputs of a batch read.
	batchSize = 100
	// maxDeals is the most deals Deals returns.
	maxDeals = 100
	// maxNoteBody is the largest hs_note_body HubSpot keeps (65,536 characters).
	maxNoteBody = 65536
	// defaultRetry is the rate-limit window of HubSpot's TEN_SECONDLY_ROLLING policy, when an
	// answer names none.
	defaultRetry = 10 * time.Second
)

// Endpoint is HubSpot's OAuth 2.0 endpoint: the authorization page under authBaseURL
// (app.hubspot.com, or app-eu1.hubspot.com) and the token endpoint under apiBaseURL; empty
// means the defaults. HubSpot reads the client secret from the form body.
func Endpoint(authBaseURL, apiBaseURL string) oauth2.Endpoint {
	authBaseURL = strings.TrimRight(cmpOr(authBaseURL, DefaultAuthBaseURL), "/")
	apiBaseURL = strings.TrimRight(cmpOr(apiBaseURL, DefaultBaseURL), "/")
	return oauth2.Endpoint{AuthURL: authBaseURL + "/oauth/authorize", TokenURL: apiBaseURL + "/oauth/v1/token",
		AuthStyle: oauth2.AuthStyleInParams}
}

// Scopes are the OAuth scopes the platform asks for: read and write contacts, companies and
// deals (notes ride on these) and read their schemas.
func Scopes() []string {
	return []string{"oauth",
		"crm.objects.contacts.read", "crm.objects.contacts.write",
		"crm.objects.companies.read", "crm.objects.companies.write",
		"crm.objects.deals.read", "crm.objects.deals.write",
		"crm.schemas.contacts.read", "crm.schemas.companies.read", "crm.schemas.deals.read"}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Config configures a client.
type Config struct {
	// BaseURL is the API's base URL (DefaultBaseURL when empty).
	BaseURL string
	// HTTPClient sends the requests (nil: crmhttp.NewHTTPClient(AllowPrivate)).
	HTTPClient   *http.Client
	AllowPrivate bool
	// Token supplies the access token, refreshing it as needed; the family passes one that
	// persists refreshed tokens. Nil uses the credentials' tokens as they are.
	Token oauth2.TokenSource
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Client is a HubSpot connection. It is safe for concurrent use.
type Client struct {
	base  string
	http  crmhttp.Client
	token oauth2.TokenSource
	now   func() time.Time
}

var _ crm.Client = (*Client)(nil)

// New returns a client of the account creds act for.
func New(cfg Config, creds crm.Credentials) (*Client, error) {
	base := strings.TrimRight(cmpOr(cfg.BaseURL, DefaultBaseURL), "/")
	if err := httpclient.CheckBaseURL(base); err != nil {
		return nil, fmt.Errorf("hubspot: base URL %w", err)
	}
	if cfg.Token == nil && creds.AccessToken == "" {
		return nil, errors.New("hubspot: no access token")
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = crmhttp.NewHTTPClient(cfg.AllowPrivate)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	src := crmhttp.TokenSource(cfg.Token, creds)
	c := &Client{base: base, token: src, now: now}
	c.http = crmhttp.Client{HTTP: hc, Auth: crmhttp.Bearer(src), Refuse: c.refuse, Now: now}
	return c, nil
}

// apiError is HubSpot's error envelope.
type apiError struct {
	Status     string `json:"status"`
	Message    string `json:"message"`
	Category   string `json:"category"`
	ErrorType  string `json:"errorType"`
	PolicyName string `json:"policyName"`
}

func (c *Client) refuse(res *http.Response, body []byte) error {
	var e apiError
	_ = json.Unmarshal(body, &e)
	code := cmpOr(e.Category, e.ErrorType)
	switch {
	case res.StatusCode == http.StatusTooManyRequests:
		wait := crmhttp.RetryAfter(res.Header, c.now())
		if wait == 0 {
			if ms, err := strconv.Atoi(res.Header.Get("X-HubSpot-RateLimit-Interval-Milliseconds")); err == nil && ms > 0 {
				wait = time.Duration(ms) * time.Millisecond
			} else {
				wait = defaultRetry
			}
		}
		if e.PolicyName == "DAILY" {
			wait = max(wait, time.Hour)
		}
		return &crm.RateLimitedError{RetryAfter: wait}
	case e.Category == "EXPIRED_AUTHENTICATION" || e.Category == "INVALID_AUTHENTICATION":
		return crmhttp.Refusal(http.StatusUnauthorized, code, e.Message, 0)
	case e.Category == "MISSING_SCOPES":
		return crmhttp.Refusal(http.StatusForbidden, code, e.Message, 0)
	}
	if e.Message == "" && res.StatusCode >= 500 {
		e.Message = "HubSpot is unavailable"
	}
	return crmhttp.Refusal(res.StatusCode, code, e.Message, 0)
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	return c.http.Do(ctx, crmhttp.Request{Method: method, URL: c.base + path, JSON: body}, out)
}

// Account reads the portal's details.
func (c *Client) Account(ctx context.Context) (crm.Account, error) {
	var out struct {
		PortalID int64  `json:"portalId"`
		UIDomain string `json:"uiDomain"`
	}
	if err := c.do(ctx, http.MethodGet, "/account-info/v3/details", nil, &out); err != nil {
		return crm.Account{}, err
	}
	if out.PortalID == 0 {
		return crm.Account{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "no portalId in the account details"}
	}
	id := strconv.FormatInt(out.PortalID, 10)
	return crm.Account{ID: id, Name: "HubSpot portal " + id}, nil
}

// objects are the object types the platform writes, with the association type id of a note
// to each (HUBSPOT_DEFINED) and the property holding its last modification time.
var objects = []struct {
	crm.Object
	noteType int
	modified string
}{
	{crm.Object{Name: "contacts", Label: "Contacts"}, 202, "lastmodifieddate"},
	{crm.Object{Name: "companies", Label: "Companies"}, 190, "hs_lastmodifieddate"},
	{crm.Object{Name: "deals", Label: "Deals"}, 214, "hs_lastmodifieddate"},
}

// Objects lists contacts, companies and deals.
func (c *Client) Objects(context.Context) ([]crm.Object, error) {
	out := make([]crm.Object, 0, len(objects))
	for _, o := range objects {
		out = append(out, o.Object)
	}
	return out, nil
}

func known(object string) (noteType int, modified string, err error) {
	for _, o := range objects {
		if o.Name == object {
			return o.noteType, o.modified, nil
		}
	}
	return 0, "", fmt.Errorf("%w: hubspot object %q", crm.ErrNotFound, object)
}

// propertyName is what HubSpot accepts as an internal property name.
var propertyName = regexp.MustCompile(`^[a-z0-9_]{1,100}$`)

func checkProperties(names ...string) error {
	for _, n := range names {
		if !propertyName.MatchString(n) {
			return &crm.ProviderError{Status: 400, Code: "invalid_property", Message: fmt.Sprintf("%q is not a HubSpot property name", n)}
		}
	}
	return nil
}

type property struct {
	Name      string `json:"name"`
	Label     string `json:"label"`
	Type      string `json:"type"`
	FieldType string `json:"fieldType"`
	Hidden    bool   `json:"hidden"`
	Options   []struct {
		Value  string `json:"value"`
		Hidden bool   `json:"hidden"`
	} `json:"options"`
	Calculated           bool `json:"calculated"`
	ModificationMetadata struct {
		ReadOnlyValue bool `json:"readOnlyValue"`
	} `json:"modificationMetadata"`
}

// Fields lists an object's properties.
func (c *Client) Fields(ctx context.Context, object string) ([]crm.Field, error) {
	if _, _, err := known(object); err != nil {
		return nil, err
	}
	var out struct {
		Results []property `json:"results"`
	}
	if err := c.do(ctx, http.MethodGet, "/crm/v3/properties/"+object+"?archived=false", nil, &out); err != nil {
		return nil, err
	}
	fields := make([]crm.Field, 0, len(out.Results))
	for _, p := range out.Results {
		if p.Hidden {
			continue
		}
		f := crm.Field{Object: object, Name: p.Name, Label: p.Label, Type: fieldType(p),
			ReadOnly: p.ModificationMetadata.ReadOnlyValue || p.Calculated}
		if f.Type == crm.TypeEnum {
			for _, o := range p.Options {
				if !o.Hidden {
					f.Options = append(f.Options, o.Value)
				}
			}
		}
		fields = append(fields, f)
	}
	return fields, nil
}

// fieldType normalizes a property's type and field type.
func fieldType(p property) crm.FieldType {
	switch {
	case p.FieldType == "phonenumber":
		return crm.TypePhone
	case p.Name == "email" || p.Name == "work_email" || p.FieldType == "email":
		return crm.TypeEmail
	case p.Type == "number":
		return crm.TypeNumber
	case p.Type == "bool" || p.FieldType == "booleancheckbox":
		return crm.TypeBool
	case p.Type == "date":
		return crm.TypeDate
	case p.Type == "datetime":
		return crm.TypeDateTime
	case p.Type == "enumeration":
		return crm.TypeEnum
	}
	return crm.TypeString
}

// Pipelines lists the deal pipelines and their stages, in display order.
func (c *Client) Pipelines(ctx context.Context) ([]crm.Pipeline, error) {
	type stage struct {
		ID           string `json:"id"`
		Label        string `json:"label"`
		DisplayOrder int    `json:"displayOrder"`
		Archived     bool   `json:"archived"`
	}
	var out struct {
		Results []struct {
			stage
			Stages []stage `json:"stages"`
		} `json:"results"`
	}
	if err := c.do(ctx, http.MethodGet, "/crm/v3/pipelines/deals", nil, &out); err != nil {
		return nil, err
	}
	byOrder := func(a, b stage) int { return a.DisplayOrder - b.DisplayOrder }
	slices.SortStableFunc(out.Results, func(a, b struct {
		stage
		Stages []stage `json:"stages"`
	}) int {
		return byOrder(a.stage, b.stage)
	})
	var pipelines []crm.Pipeline
	for _, p := range out.Results {
		if p.Archived {
			continue
		}
		slices.SortStableFunc(p.Stages, byOrder)
		pl := crm.Pipeline{ID: p.ID, Label: p.Label, Stages: []crm.Stage{}}
		for _, s := range p.Stages {
			if !s.Archived {
				pl.Stages = append(pl.Stages, crm.Stage{ID: s.ID, Label: s.Label})
			}
		}
		pipelines = append(pipelines, pl)
	}
	return pipelines, nil
}

// object is a record as HubSpot answers it.
type object struct {
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties"`
	UpdatedAt  time.Time      `json:"updatedAt"`
}

func (o object) record(name string) crm.Record {
	props := map[string]any{}
	for k, v := range o.Properties {
		switch v.(type) {
		case string, float64, bool, nil:
			props[k] = v
		}
	}
	return crm.Record{Object: name, ID: o.ID, Properties: props, UpdatedAt: o.UpdatedAt.UTC()}
}

// values turns props into HubSpot's property values, which are strings.
func values(props map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(props))
	for k, v := range props {
		if err := checkProperties(k); err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case nil:
			out[k] = ""
		case string:
			out[k] = x
		case bool:
			out[k] = strconv.FormatBool(x)
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		case int:
			out[k] = strconv.Itoa(x)
		case int64:
			out[k] = strconv.FormatInt(x, 10)
		case time.Time:
			out[k] = x.UTC().Format("2006-01-02T15:04:05.000Z")
		default:
			return nil, &crm.ProviderError{Status: 400, Code: "invalid_value", Message: fmt.Sprintf("property %q: unsupported value type %T", k, v)}
		}
	}
	return out, nil
}

// Upsert writes a record identified by key. Contacts by email go through batch upsert, which
// HubSpot makes atomic on the email's uniqueness; other keys are searched, then updated or
// created.
func (c *Client) Upsert(ctx context.Context, objectName, key, value string, props map[string]any) (crm.Record, error) {
	if _, _, err := known(objectName); err != nil {
		return crm.Record{}, err
	}
	if err := checkProperties(key); err != nil {
		return crm.Record{}, err
	}
	vals, err := values(props)
	if err != nil {
		return crm.Record{}, err
	}
	if objectName == "contacts" && key == "email" {
		delete(vals, "email")
		var out struct {
			Results []object `json:"results"`
		}
		body := map[string]any{"inputs": []map[string]any{{"idProperty": "email", "id": value, "properties": vals}}}
		if err := c.do(ctx, http.MethodPost, "/crm/v3/objects/contacts/batch/upsert", body, &out); err != nil {
			return crm.Record{}, err
		}
		if len(out.Results) != 1 {
			return crm.Record{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "batch upsert answered no record"}
		}
		return out.Results[0].record(objectName), nil
	}
	found, err := c.search(ctx, objectName, []map[string]any{{"propertyName": key, "operator": "EQ", "value": value}}, "", nil, 1, "")
	if err != nil {
		return crm.Record{}, err
	}
	if len(found.Results) > 0 {
		return c.update(ctx, objectName, found.Results[0].ID, vals)
	}
	vals[key] = value
	var out object
	if err := c.do(ctx, http.MethodPost, "/crm/v3/objects/"+objectName, map[string]any{"properties": vals}, &out); err != nil {
		return crm.Record{}, err
	}
	return out.record(objectName), nil
}

// recordID is a HubSpot record id (hs_object_id): a number.
var recordID = regexp.MustCompile(`^[0-9]{1,19}$`)

// Update writes props to the record with that id: one PATCH, which answers the record.
// HubSpot answers 404 for an id it does not have (an archived record included).
func (c *Client) Update(ctx context.Context, objectName, id string, props map[string]any) (crm.Record, error) {
	if _, _, err := known(objectName); err != nil {
		return crm.Record{}, err
	}
	if !recordID.MatchString(id) {
		return crm.Record{}, fmt.Errorf("%w: %q is not a HubSpot record id", crm.ErrNotFound, id)
	}
	vals, err := values(props)
	if err != nil {
		return crm.Record{}, err
	}
	return c.update(ctx, objectName, id, vals)
}

// update PATCHes the record id with vals (HubSpot's values) and returns it as answered.
func (c *Client) update(ctx context.Context, objectName, id string, vals map[string]any) (crm.Record, error) {
	var out object
	if err := c.do(ctx, http.MethodPatch, "/crm/v3/objects/"+objectName+"/"+crmhttp.PathEscape(id),
		map[string]any{"properties": vals}, &out); err != nil {
		return crm.Record{}, err
	}
	return out.record(objectName), nil
}

// Get reads a record by id.
func (c *Client) Get(ctx context.Context, objectName, id string, fields []string) (crm.Record, error) {
	if _, _, err := known(objectName); err != nil {
		return crm.Record{}, err
	}
	if err := checkProperties(fields...); err != nil {
		return crm.Record{}, err
	}
	path := "/crm/v3/objects/" + objectName + "/" + crmhttp.PathEscape(id)
	if len(fields) > 0 {
		path += "?properties=" + strings.Join(fields, ",")
	}
	var out object
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return crm.Record{}, err
	}
	return out.record(objectName), nil
}

type searchResult struct {
	Results []object `json:"results"`
	Paging  struct {
		Next struct {
			After string `json:"after"`
		} `json:"next"`
	} `json:"paging"`
}

func (c *Client) search(ctx context.Context, objectName string, filters []map[string]any, sortBy string, fields []string,
	limit int, after string) (searchResult, error) {
	body := map[string]any{"filterGroups": []map[string]any{{"filters": filters}}, "limit": limit}
	if sortBy != "" {
		body["sorts"] = []map[string]any{{"propertyName": sortBy, "direction": "ASCENDING"}}
	}
	if len(fields) > 0 {
		body["properties"] = fields
	}
	if after != "" {
		body["after"] = after
	}
	var out searchResult
	err := c.do(ctx, http.MethodPost, "/crm/v3/objects/"+objectName+"/search", body, &out)
	return out, err
}

// Find reads the record whose key equals value (HubSpot compares case-insensitively).
func (c *Client) Find(ctx context.Context, objectName, key, value string, fields []string) (crm.Record, error) {
	if _, _, err := known(objectName); err != nil {
		return crm.Record{}, err
	}
	if err := checkProperties(append([]string{key}, fields...)...); err != nil {
		return crm.Record{}, err
	}
	found, err := c.search(ctx, objectName, []map[string]any{{"propertyName": key, "operator": "EQ", "value": value}}, "", fields, 1, "")
	if err != nil {
		return crm.Record{}, err
	}
	if len(found.Results) == 0 {
		return crm.Record{}, crm.ErrNotFound
	}
	return found.Results[0].record(objectName), nil
}

// ChangedSince searches records by their last modification time, ascending. The cursor is
// "<from epoch ms>:<after>": HubSpot pages one search up to 10,000 results, so before
// reaching that the next cursor starts a new search at the last time seen (records of that
// same millisecond come again, which a sync tolerates).
func (c *Client) ChangedSince(ctx context.Context, objectName string, since time.Time, fields []string, cursor string) ([]crm.Record, string, error) {
	_, modified, err := known(objectName)
	if err != nil {
		return nil, "", err
	}
	if err := checkProperties(fields...); err != nil {
		return nil, "", err
	}
	from, after := since.UnixMilli(), 0
	if cursor != "" {
		f, a, ok := strings.Cut(cursor, ":")
		fi, err1 := strconv.ParseInt(f, 10, 64)
		ai, err2 := strconv.Atoi(a)
		if !ok || err1 != nil || err2 != nil || ai < 0 || ai >= searchWindow {
			return nil, "", &crm.ProviderError{Status: 400, Code: "invalid_cursor", Message: "the cursor is not a HubSpot cursor"}
		}
		from, after = fi, ai
	}
	if !slices.Contains(fields, modified) {
		fields = append(slices.Clone(fields), modified)
	}
	var afterText string
	if after > 0 {
		afterText = strconv.Itoa(after)
	}
	found, err := c.search(ctx, objectName, []map[string]any{{"propertyName": modified, "operator": "GTE", "value": strconv.FormatInt(from, 10)}},
		modified, fields, pageSize, afterText)
	if err != nil {
		return nil, "", err
	}
	records := make([]crm.Record, 0, len(found.Results))
	for _, o := range found.Results {
		records = append(records, o.record(objectName))
	}
	next := found.Paging.Next.After
	if next == "" || len(records) == 0 {
		return records, "", nil
	}
	n, err := strconv.Atoi(next)
	if err != nil {
		return nil, "", &crm.ProviderError{Status: 200, Code: "bad_response", Message: "unreadable paging cursor"}
	}
	if n+pageSize > searchWindow {
		last := records[len(records)-1].UpdatedAt.UnixMilli()
		if last == from {
			return nil, "", &crm.ProviderError{Status: 400, Code: "too_many_changes",
				Message: "more than 10,000 records changed within one millisecond"}
		}
		return records, strconv.FormatInt(last, 10) + ":0", nil
	}
	return records, strconv.FormatInt(from, 10) + ":" + next, nil
}

// AddNote creates a note associated with the record. HubSpot renders hs_note_body as HTML:
// the text is escaped and its line breaks kept.
func (c *Client) AddNote(ctx context.Context, objectName, id, text string) error {
	noteType, _, err := known(objectName)
	if err != nil {
		return err
	}
	body := strings.ReplaceAll(html.EscapeString(text), "\n", "<br>")
	body = crmhttp.Truncate(body, maxNoteBody)
	note := map[string]any{
		"properties": map[string]any{"hs_timestamp": c.now().UTC().Format("2006-01-02T15:04:05.000Z"), "hs_note_body": body},
		"associations": []map[string]any{{"to": map[string]any{"id": id},
			"types": []map[string]any{{"associationCategory": "HUBSPOT_DEFINED", "associationTypeId": noteType}}}},
	}
	return c.do(ctx, http.MethodPost, "/crm/v3/objects/notes", note, nil)
}

// Revoke deletes the refresh token, which ends the app's access to the portal. A refresh token
// HubSpot no longer knows counts as revoked.
func (c *Client) Revoke(ctx context.Context) error {
	tok, err := c.token.Token()
	if err != nil || tok.RefreshToken == "" {
		return crmhttp.TokenError(ctx, err)
	}
	// The refresh token travels in the path (HubSpot's API): the request carries no other
	// credential and crmhttp keeps URLs out of errors.
	noAuth := c.http
	noAuth.Auth = func(context.Context, *http.Request) (string, error) { return tok.RefreshToken, nil }
	err = noAuth.Do(ctx, crmhttp.Request{Method: http.MethodDelete, URL: c.base + "/oauth/v1/refresh-tokens/" + crmhttp.PathEscape(tok.RefreshToken)}, nil)
	if errors.Is(err, crm.ErrNotFound) {
		return nil
	}
	return err
}

// dealProperties are the deal properties a Deal is made of. HubSpot derives hs_is_closed and
// hs_is_closed_won from the stage's metadata (isClosed; probability 1 for won), so a custom
// pipeline's closed stages need no mapping here.
var dealProperties = []string{"dealname", "pipeline", "dealstage", "amount", "deal_currency_code",
	"hs_lastmodifieddate", "hs_is_closed", "hs_is_closed_won"}

// dealAssociation is the HUBSPOT_DEFINED association type id of a deal to each object a deal is
// opened for.
var dealAssociation = map[string]int{"contacts": 3, "companies": 5}

// deal normalizes a deal's properties as HubSpot answers them (strings).
func deal(id string, props map[string]any, updatedAt time.Time) crm.Deal {
	str := func(name string) string {
		v, _ := props[name].(string)
		return v
	}
	d := crm.Deal{ID: id, Name: str("dealname"), Pipeline: str("pipeline"), Stage: str("dealstage"),
		Status: crm.DealOpen, Currency: str("deal_currency_code"), UpdatedAt: updatedAt.UTC()}
	switch {
	case str("hs_is_closed_won") == "true":
		d.Status = crm.DealWon
	case str("hs_is_closed") == "true":
		d.Status = crm.DealLost
	}
	if a, err := strconv.ParseFloat(str("amount"), 64); err == nil {
		d.Amount = &a
	}
	if t, err := time.Parse(time.RFC3339, str("hs_lastmodifieddate")); err == nil {
		d.UpdatedAt = t.UTC()
	}
	return d
}

// compareIDs orders HubSpot ids (numbers without leading zeros) numerically.
func compareIDs(a, b string) int {
	return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
}

// dealIDs lists the ids of the deals associated with a record through the v4 associations
// API, which reads the associations themselves rather than a search index that lags writes.
func (c *Client) dealIDs(ctx context.Context, objectName, id string) ([]string, error) {
	var ids []string
	after := ""
	for {
		path := "/crm/v4/objects/" + objectName + "/" + crmhttp.PathEscape(id) + "/associations/deals?limit=" + strconv.Itoa(associationPage)
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		var out struct {
			Results []struct {
				ToObjectID int64 `json:"toObjectId"`
			} `json:"results"`
			Paging struct {
				Next struct {
					After string `json:"after"`
				} `json:"next"`
			} `json:"paging"`
		}
		if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
			return nil, err
		}
		for _, r := range out.Results {
			ids = append(ids, strconv.FormatInt(r.ToObjectID, 10))
		}
		if out.Paging.Next.After == "" || out.Paging.Next.After == after || len(out.Results) == 0 {
			return ids, nil
		}
		after = out.Paging.Next.After
	}
}

// readDeals reads deals by id, 100 per batch read. A deal archived since it was listed is
// left out (HubSpot answers the others with a 207).
func (c *Client) readDeals(ctx context.Context, ids []string) ([]crm.Deal, error) {
	deals := make([]crm.Deal, 0, len(ids))
	for chunk := range slices.Chunk(ids, batchSize) {
		inputs := make([]map[string]string, 0, len(chunk))
		for _, id := range chunk {
			inputs = append(inputs, map[string]string{"id": id})
		}
		var out struct {
			Results []object `json:"results"`
		}
		if err := c.do(ctx, http.MethodPost, "/crm/v3/objects/deals/batch/read?archived=false",
			map[string]any{"properties": dealProperties, "inputs": inputs}, &out); err != nil {
			return nil, err
		}
		for _, o := range out.Results {
			deals = append(deals, deal(o.ID, o.Properties, o.UpdatedAt))
		}
	}
	return deals, nil
}

// checkDealTarget checks that deals can be opened for objectName and that id is a HubSpot id
// before either reaches a URL.
func checkDealTarget(objectName, id string) (associationType int, err error) {
	associationType, ok := dealAssociation[objectName]
	if !ok {
		return 0, fmt.Errorf("%w: hubspot object %q has no deals", crm.ErrNotFound, objectName)
	}
	if !recordID.MatchString(id) {
		return 0, fmt.Errorf("%w: %q is not a HubSpot record id", crm.ErrNotFound, id)
	}
	return associationType, nil
}

// OpenDeal lists the record's deals through its associations and reads them in one batch
// (two calls), and returns the open deal of d.Pipeline with the lowest id: the oldest, so that
// every call picks the same one should two exist. When there is none it creates the deal with
// its association in one more call.
func (c *Client) OpenDeal(ctx context.Context, objectName, contactID string, d crm.DealInput) (crm.Deal, bool, error) {
	associationType, err := checkDealTarget(objectName, contactID)
	if err != nil {
		return crm.Deal{}, false, err
	}
	if d.Pipeline == "" || d.Stage == "" {
		return crm.Deal{}, false, &crm.ProviderError{Status: 400, Code: "invalid_deal", Message: "a deal needs a pipeline and a stage"}
	}
	ids, err := c.dealIDs(ctx, objectName, contactID)
	if err != nil {
		return crm.Deal{}, false, err
	}
	deals, err := c.readDeals(ctx, ids)
	if err != nil {
		return crm.Deal{}, false, err
	}
	var open *crm.Deal
	for i, dl := range deals {
		if dl.Pipeline == d.Pipeline && dl.Status == crm.DealOpen && (open == nil || compareIDs(dl.ID, open.ID) < 0) {
			open = &deals[i]
		}
	}
	if open != nil {
		return *open, false, nil
	}
	body := map[string]any{
		"properties": map[string]any{"dealname": d.Name, "pipeline": d.Pipeline, "dealstage": d.Stage},
		"associations": []map[string]any{{"to": map[string]any{"id": contactID},
			"types": []map[string]any{{"associationCategory": "HUBSPOT_DEFINED", "associationTypeId": associationType}}}},
	}
	var out object
	if err := c.do(ctx, http.MethodPost, "/crm/v3/objects/deals", body, &out); err != nil {
		// HubSpot lists no associations for a record it does not have, and refuses an
		// association to it with the 400 of any invalid input: only a read of the record tells
		// a missing contact from a refused stage.
		var pe *crm.ProviderError
		if errors.As(err, &pe) && pe.Status == http.StatusBadRequest && len(ids) == 0 {
			if _, gerr := c.Get(ctx, objectName, contactID, []string{"hs_object_id"}); errors.Is(gerr, crm.ErrNotFound) {
				return crm.Deal{}, false, gerr
			}
		}
		return crm.Deal{}, false, err
	}
	return deal(out.ID, out.Properties, out.UpdatedAt), true, nil
}

// Deals lists the record's deals through its associations and reads them 100 per batch read,
// then keeps the 100 most recently changed. A record without deals is read to tell it from a
// record HubSpot does not have, whose associations list is empty too.
func (c *Client) Deals(ctx context.Context, objectName, contactID string) ([]crm.Deal, error) {
	if _, err := checkDealTarget(objectName, contactID); err != nil {
		return nil, err
	}
	ids, err := c.dealIDs(ctx, objectName, contactID)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		if _, err := c.Get(ctx, objectName, contactID, []string{"hs_object_id"}); err != nil {
			return nil, err
		}
		return []crm.Deal{}, nil
	}
	deals, err := c.readDeals(ctx, ids)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(deals, func(a, b crm.Deal) int {
		return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), compareIDs(b.ID, a.ID))
	})
	if len(deals) > maxDeals {
		deals = deals[:maxDeals]
	}
	return deals, nil
}

// DealsChangedSince searches deals by hs_lastmodifieddate as ChangedSince does, with its
// cursor.
func (c *Client) DealsChangedSince(ctx context.Context, since time.Time, cursor string) ([]crm.Deal, string, error) {
	records, next, err := c.ChangedSince(ctx, "deals", since, dealProperties, cursor)
	if err != nil {
		return nil, "", err
	}
	deals := make([]crm.Deal, 0, len(records))
	for _, r := range records {
		deals = append(deals, deal(r.ID, r.Properties, r.UpdatedAt))
	}
	return deals, next, nil
}
