// Package pipedrive is the crm.Client of Pipedrive's API v1 with an API token: persons,
// organizations and deals (search, create, update, read), their fields, pipelines and
// stages, recents for changes and notes. The token travels in the documented x-api-token
// header, never in the query string, so that it never sits in a URL (logs, errors, proxies).
package pipedrive

import (
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

	"github.com/botplatform/api/shared/channel/httpclient"
	"github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/crmhttp"
)

// DefaultBaseURL is Pipedrive's API host; a connection's company domain
// (https://<company>.pipedrive.com, crm.Credentials.InstanceURL) is used instead when set.
const DefaultBaseURL = "https://api.pipedrive.com"

// Bounds the client keeps to.
const (
	// pageSize is one page of records; Pipedrive allows 500.
	pageSize = 100
	// fieldPages bounds the pages of a fields list (500 fields each).
	fieldPages = 10
	// candidates bounds the search hits read back to confirm an exact match.
	candidates = 5
	// defaultRetry is the wait when a 429 names none (Pipedrive's windows are 2 s).
	defaultRetry = 2 * time.Second
	// maxPage is the largest page Pipedrive serves.
	maxPage = 500
	// maxDealPages bounds the pages of a person's open deals OpenDeal reads.
	maxDealPages = 10
	// timeLayout is how Pipedrive writes times (UTC).
	timeLayout = "2006-01-02 15:04:05"
)

// Config configures a client.
type Config struct {
	// BaseURL is the API's base URL (DefaultBaseURL when empty).
	BaseURL string
	// HTTPClient sends the requests (nil: crmhttp.NewHTTPClient(AllowPrivate)).
	HTTPClient   *http.Client
	AllowPrivate bool
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Client is a Pipedrive connection. It is safe for concurrent use.
type Client struct {
	base string
	http crmhttp.Client
	now  func() time.Time
}

var _ crm.Client = (*Client)(nil)

// New returns a client of the company whose API token creds holds.
func New(cfg Config, creds crm.Credentials) (*Client, error) {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	if err := httpclient.CheckBaseURL(base); err != nil {
		return nil, fmt.Errorf("pipedrive: base URL %w", err)
	}
	if creds.InstanceURL != "" {
		u, err := crmhttp.CheckInstanceURL(creds.InstanceURL, cfg.AllowPrivate)
		if err != nil {
			return nil, fmt.Errorf("pipedrive: %w", err)
		}
		base = u
	}
	if strings.TrimSpace(creds.APIKey) == "" {
		return nil, errors.New("pipedrive: no API token")
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = crmhttp.NewHTTPClient(cfg.AllowPrivate)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	key := creds.APIKey
	c := &Client{base: base, now: now}
	c.http = crmhttp.Client{HTTP: hc, Now: now, Refuse: c.refuse,
		Auth: func(_ context.Context, req *http.Request) (string, error) {
			req.Header.Set("x-api-token", key)
			return key, nil
		}}
	return c, nil
}

func (c *Client) refuse(res *http.Response, body []byte) error {
	var e struct {
		Error     string `json:"error"`
		ErrorInfo string `json:"error_info"`
	}
	_ = json.Unmarshal(body, &e)
	if res.StatusCode == http.StatusTooManyRequests {
		wait := crmhttp.RetryAfter(res.Header, c.now())
		if wait == 0 {
			if n, err := strconv.Atoi(res.Header.Get("x-ratelimit-reset")); err == nil && n > 0 {
				wait = time.Duration(n) * time.Second
			} else {
				wait = defaultRetry
			}
		}
		return &crm.RateLimitedError{RetryAfter: wait}
	}
	if res.StatusCode == http.StatusGone { // a deleted record
		return crmhttp.Refusal(http.StatusNotFound, "gone", e.Error, 0)
	}
	msg := e.Error
	if msg == "" && res.StatusCode >= 500 {
		msg = "Pipedrive is unavailable"
	}
	return crmhttp.Refusal(res.StatusCode, strconv.Itoa(res.StatusCode), msg, 0)
}

// envelope is Pipedrive's answer.
type envelope[T any] struct {
	Data           T `json:"data"`
	AdditionalData struct {
		Pagination struct {
			More      bool `json:"more_items_in_collection"`
			NextStart int  `json:"next_start"`
		} `json:"pagination"`
	} `json:"additional_data"`
}

func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	u := c.base + "/api/v1/" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return c.http.Do(ctx, crmhttp.Request{Method: http.MethodGet, URL: u}, out)
}

func (c *Client) send(ctx context.Context, method, path string, body, out any) error {
	return c.http.Do(ctx, crmhttp.Request{Method: method, URL: c.base + "/api/v1/" + path, JSON: body}, out)
}

// Account reads the user the token belongs to and its company.
func (c *Client) Account(ctx context.Context) (crm.Account, error) {
	var out envelope[struct {
		Email       string `json:"email"`
		CompanyID   int64  `json:"company_id"`
		CompanyName string `json:"company_name"`
	}]
	if err := c.get(ctx, "users/me", nil, &out); err != nil {
		return crm.Account{}, err
	}
	if out.Data.CompanyID == 0 {
		return crm.Account{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "no company in users/me"}
	}
	return crm.Account{ID: strconv.FormatInt(out.Data.CompanyID, 10), Name: out.Data.CompanyName, User: out.Data.Email}, nil
}

// objects are the object types the platform writes: their fields endpoint, recents item,
// the note's link member, and how a key is searched.
var objects = []struct {
	crm.Object
	fields, item, noteLink string
	search                 map[string]string // key -> search field (custom keys: custom_fields)
}{
	{crm.Object{Name: "persons", Label: "Persons"}, "personFields", "person", "person_id",
		map[string]string{"email": "email", "phone": "phone", "name": "name"}},
	{crm.Object{Name: "organizations", Label: "Organizations"}, "organizationFields", "organization", "org_id",
		map[string]string{"name": "name"}},
	{crm.Object{Name: "deals", Label: "Deals"}, "dealFields", "deal", "deal_id",
		map[string]string{"title": "title"}},
}

func known(object string) (int, error) {
	for i, o := range objects {
		if o.Name == object {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: pipedrive object %q", crm.ErrNotFound, object)
}

// Objects lists persons, organizations and deals.
func (c *Client) Objects(context.Context) ([]crm.Object, error) {
	out := make([]crm.Object, 0, len(objects))
	for _, o := range objects {
		out = append(out, o.Object)
	}
	return out, nil
}

// customKey is a custom field's key: 40 hex characters.
var customKey = regexp.MustCompile(`^[0-9a-f]{40}$`)

// fieldKey is any field key Pipedrive has.
var fieldKey = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// writable are the system fields a client may write (Pipedrive marks only custom fields
// with edit_flag).
var writable = map[string]bool{"name": true, "first_name": true, "last_name": true, "email": true, "phone": true,
	"label": true, "owner_id": true, "org_id": true, "visible_to": true, "title": true, "value": true, "currency": true,
	"stage_id": true, "status": true, "person_id": true, "expected_close_date": true, "probability": true,
	"pipeline_id": true, "address": true, "marketing_status": true}

// Fields lists an object's fields, custom ones by their 40-hex key. Enum options are the
// option ids, which is what Pipedrive takes as a value.
func (c *Client) Fields(ctx context.Context, object string) ([]crm.Field, error) {
	i, err := known(object)
	if err != nil {
		return nil, err
	}
	var fields []crm.Field
	start := 0
	for range fieldPages {
		var out envelope[[]struct {
			Key       string `json:"key"`
			Name      string `json:"name"`
			FieldType string `json:"field_type"`
			Mandatory any    `json:"mandatory_flag"`
			Edit      bool   `json:"edit_flag"`
			Options   []struct {
				ID    json.Number `json:"id"`
				Label string      `json:"label"`
			} `json:"options"`
		}]
		q := url.Values{"start": {strconv.Itoa(start)}, "limit": {"500"}}
		if err := c.get(ctx, objects[i].fields, q, &out); err != nil {
			return nil, err
		}
		for _, f := range out.Data {
			fl := crm.Field{Object: object, Name: f.Key, Label: f.Name, Type: fieldType(f.Key, f.FieldType),
				ReadOnly: !f.Edit && !writable[f.Key], Required: f.Mandatory == true}
			if fl.Type == crm.TypeEnum {
				for _, o := range f.Options {
					fl.Options = append(fl.Options, o.ID.String())
				}
			}
			fields = append(fields, fl)
		}
		if !out.AdditionalData.Pagination.More {
			return fields, nil
		}
		start = out.AdditionalData.Pagination.NextStart
	}
	return fields, nil
}

func fieldType(key, t string) crm.FieldType {
	switch {
	case key == "email":
		return crm.TypeEmail
	case key == "phone" || t == "phone":
		return crm.TypePhone
	}
	switch t {
	case "double", "monetary", "int", "user", "org", "people", "stage":
		return crm.TypeNumber
	case "date":
		if key == "add_time" || key == "update_time" {
			return crm.TypeDateTime
		}
		return crm.TypeDate
	case "enum", "set", "status", "visible_to":
		return crm.TypeEnum
	}
	return crm.TypeString
}

// Pipelines lists the pipelines and their stages, each in Pipedrive's order.
func (c *Client) Pipelines(ctx context.Context) ([]crm.Pipeline, error) {
	type item struct {
		ID         int    `json:"id"`
		Name       string `json:"name"`
		PipelineID int    `json:"pipeline_id"`
		Order      int    `json:"order_nr"`
	}
	var ps, ss envelope[[]item]
	if err := c.get(ctx, "pipelines", nil, &ps); err != nil {
		return nil, err
	}
	if err := c.get(ctx, "stages", nil, &ss); err != nil {
		return nil, err
	}
	byOrder := func(a, b item) int { return a.Order - b.Order }
	slices.SortStableFunc(ps.Data, byOrder)
	slices.SortStableFunc(ss.Data, byOrder)
	out := make([]crm.Pipeline, 0, len(ps.Data))
	for _, p := range ps.Data {
		pl := crm.Pipeline{ID: strconv.Itoa(p.ID), Label: p.Name, Stages: []crm.Stage{}}
		for _, s := range ss.Data {
			if s.PipelineID == p.ID {
				pl.Stages = append(pl.Stages, crm.Stage{ID: strconv.Itoa(s.ID), Label: s.Name})
			}
		}
		out = append(out, pl)
	}
	return out, nil
}

// record normalizes a Pipedrive record: a list of emails or phones becomes its primary value,
// a linked object (owner_id, org_id) its id; only fields (all when empty) are kept.
func record(object string, data map[string]any, fields []string) (crm.Record, error) {
	id, ok := data["id"].(float64)
	if !ok {
		return crm.Record{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "a record without an id"}
	}
	r := crm.Record{Object: object, ID: strconv.FormatInt(int64(id), 10), Properties: map[string]any{}}
	if u, _ := data["update_time"].(string); u != "" {
		if t, err := time.Parse(timeLayout, u); err == nil {
			r.UpdatedAt = t.UTC()
		}
	}
	for k, v := range data {
		if len(fields) > 0 && !slices.Contains(fields, k) {
			continue
		}
		switch x := v.(type) {
		case string, float64, bool, nil:
			r.Properties[k] = x
		case []any:
			r.Properties[k] = primary(x)
		case map[string]any:
			if v, ok := x["value"]; ok {
				r.Properties[k] = v
			} else {
				r.Properties[k] = x["id"]
			}
		}
	}
	for _, f := range fields {
		if _, ok := r.Properties[f]; !ok {
			r.Properties[f] = nil
		}
	}
	return r, nil
}

// primary is the primary value of a list of {value, primary} (the first when none is).
func primary(list []any) any {
	var first any
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if i == 0 {
			first = m["value"]
		}
		if p, _ := m["primary"].(bool); p {
			first = m["value"]
			break
		}
	}
	if first == "" {
		return nil
	}
	return first
}

// contains reports whether a record's field holds value (any of a list's values).
func contains(data map[string]any, key, value string) bool {
	switch x := data[key].(type) {
	case string:
		return strings.EqualFold(x, value)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64) == value
	case []any:
		for _, e := range x {
			if m, ok := e.(map[string]any); ok && strings.EqualFold(fmt.Sprint(m["value"]), value) {
				return true
			}
		}
	}
	return false
}

// find searches object's key for value and reads the candidates back to keep an exact match
// only (Pipedrive's search is by term and field group, not by field).
func (c *Client) find(ctx context.Context, i int, key, value string) (map[string]any, error) {
	if !fieldKey.MatchString(key) {
		return nil, &crm.ProviderError{Status: 400, Code: "invalid_field", Message: fmt.Sprintf("%q is not a Pipedrive field key", key)}
	}
	field, ok := objects[i].search[key]
	if !ok {
		if !customKey.MatchString(key) {
			return nil, &crm.ProviderError{Status: 400, Code: "unsearchable_field",
				Message: fmt.Sprintf("Pipedrive cannot search %s by %q", objects[i].Name, key)}
		}
		field = "custom_fields"
	}
	if strings.TrimSpace(value) == "" {
		return nil, crm.ErrNotFound
	}
	var out envelope[struct {
		Items []struct {
			Item struct {
				ID int64 `json:"id"`
			} `json:"item"`
		} `json:"items"`
	}]
	q := url.Values{"term": {value}, "fields": {field}, "exact_match": {"true"}, "limit": {strconv.Itoa(candidates)}}
	if err := c.get(ctx, objects[i].Name+"/search", q, &out); err != nil {
		return nil, err
	}
	for _, it := range out.Data.Items {
		data, err := c.read(ctx, i, strconv.FormatInt(it.Item.ID, 10))
		if errors.Is(err, crm.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if contains(data, key, value) {
			return data, nil
		}
	}
	return nil, crm.ErrNotFound
}

var recordID = regexp.MustCompile(`^[0-9]{1,19}$`)

func (c *Client) read(ctx context.Context, i int, id string) (map[string]any, error) {
	if !recordID.MatchString(id) {
		return nil, fmt.Errorf("%w: %q is not a Pipedrive id", crm.ErrNotFound, id)
	}
	var out envelope[map[string]any]
	if err := c.get(ctx, objects[i].Name+"/"+id, nil, &out); err != nil {
		return nil, err
	}
	if out.Data == nil {
		return nil, crm.ErrNotFound
	}
	return out.Data, nil
}

// body turns props into Pipedrive's write body: email and phone as a primary entry, times as
// dates, other values as they are.
func body(props map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(props))
	for k, v := range props {
		if !fieldKey.MatchString(k) {
			return nil, &crm.ProviderError{Status: 400, Code: "invalid_field", Message: fmt.Sprintf("%q is not a Pipedrive field key", k)}
		}
		switch x := v.(type) {
		case time.Time:
			v = x.UTC().Format(time.DateOnly)
		case string:
			if k == "email" || k == "phone" {
				v = []map[string]any{{"value": x, "primary": true, "label": "work"}}
			}
		}
		out[k] = v
	}
	return out, nil
}

// Upsert finds the record whose key equals value and updates it, or creates one. A person
// needs a name: without one in props, the key's value names it.
func (c *Client) Upsert(ctx context.Context, object, key, value string, props map[string]any) (crm.Record, error) {
	i, err := known(object)
	if err != nil {
		return crm.Record{}, err
	}
	b, err := body(props)
	if err != nil {
		return crm.Record{}, err
	}
	existing, err := c.find(ctx, i, key, value)
	if err != nil && !errors.Is(err, crm.ErrNotFound) {
		return crm.Record{}, err
	}
	if existing != nil {
		return c.update(ctx, object, strconv.FormatInt(int64(existing["id"].(float64)), 10), b)
	}
	kv, _ := body(map[string]any{key: value})
	b[key] = kv[key]
	if object == "persons" && b["name"] == nil {
		first, _ := props["first_name"].(string)
		last, _ := props["last_name"].(string)
		b["name"] = cmpOr(strings.TrimSpace(first+" "+last), value)
	}
	var out envelope[map[string]any]
	if err := c.send(ctx, http.MethodPost, object, b, &out); err != nil {
		return crm.Record{}, err
	}
	return record(object, out.Data, nil)
}

// Update writes props to the record with that id: one PUT, which answers the record.
// Pipedrive answers 404 for an id it does not have (refuse reads a 410 Gone as not found
// too).
func (c *Client) Update(ctx context.Context, object, id string, props map[string]any) (crm.Record, error) {
	if _, err := known(object); err != nil {
		return crm.Record{}, err
	}
	if !recordID.MatchString(id) {
		return crm.Record{}, fmt.Errorf("%w: %q is not a Pipedrive id", crm.ErrNotFound, id)
	}
	b, err := body(props)
	if err != nil {
		return crm.Record{}, err
	}
	return c.update(ctx, object, id, b)
}

// update PUTs b (Pipedrive's write body) to the record id and returns it as answered.
func (c *Client) update(ctx context.Context, object, id string, b map[string]any) (crm.Record, error) {
	var out envelope[map[string]any]
	if err := c.send(ctx, http.MethodPut, object+"/"+id, b, &out); err != nil {
		return crm.Record{}, err
	}
	if out.Data == nil {
		return crm.Record{}, crm.ErrNotFound
	}
	return record(object, out.Data, nil)
}

// Get reads a record by id.
func (c *Client) Get(ctx context.Context, object, id string, fields []string) (crm.Record, error) {
	i, err := known(object)
	if err != nil {
		return crm.Record{}, err
	}
	data, err := c.read(ctx, i, id)
	if err != nil {
		return crm.Record{}, err
	}
	return record(object, data, fields)
}

// Find reads the record whose key equals value.
func (c *Client) Find(ctx context.Context, object, key, value string, fields []string) (crm.Record, error) {
	i, err := known(object)
	if err != nil {
		return crm.Record{}, err
	}
	data, err := c.find(ctx, i, key, value)
	if err != nil {
		return crm.Record{}, err
	}
	return record(object, data, fields)
}

// ChangedSince pages Pipedrive's recents of the object's item type (whole seconds, oldest
// first); the cursor is the next start.
func (c *Client) ChangedSince(ctx context.Context, object string, since time.Time, fields []string, cursor string) ([]crm.Record, string, error) {
	i, err := known(object)
	if err != nil {
		return nil, "", err
	}
	items, next, err := c.recents(ctx, objects[i].item, since, cursor)
	if err != nil {
		return nil, "", err
	}
	records := make([]crm.Record, 0, len(items))
	for _, raw := range items {
		var data map[string]any
		if err := json.Unmarshal(raw, &data); err != nil || data == nil {
			continue
		}
		r, err := record(object, data, fields)
		if err != nil {
			return nil, "", err
		}
		records = append(records, r)
	}
	return records, next, nil
}

// recents reads one page of Pipedrive's recents of item changed at or after since (whole
// seconds, oldest first) and returns each entry's data; the cursor is the next start.
func (c *Client) recents(ctx context.Context, item string, since time.Time, cursor string) ([]json.RawMessage, string, error) {
	start := 0
	if cursor != "" {
		var err error
		if start, err = strconv.Atoi(cursor); err != nil || start < 0 {
			return nil, "", &crm.ProviderError{Status: 400, Code: "invalid_cursor", Message: "the cursor is not a Pipedrive cursor"}
		}
	}
	var out envelope[[]struct {
		Item string          `json:"item"`
		Data json.RawMessage `json:"data"`
	}]
	q := url.Values{"since_timestamp": {since.UTC().Format(timeLayout)}, "items": {item},
		"start": {strconv.Itoa(start)}, "limit": {strconv.Itoa(pageSize)}}
	if err := c.get(ctx, "recents", q, &out); err != nil {
		return nil, "", err
	}
	items := make([]json.RawMessage, 0, len(out.Data))
	for _, d := range out.Data {
		if d.Item == item && len(d.Data) > 0 {
			items = append(items, d.Data)
		}
	}
	next := ""
	if out.AdditionalData.Pagination.More {
		next = strconv.Itoa(out.AdditionalData.Pagination.NextStart)
	}
	return items, next, nil
}

// dealData is a deal as Pipedrive answers it (person_id, org_id and user_id are objects,
// which a deal does not need).
type dealData struct {
	ID         int64    `json:"id"`
	Title      string   `json:"title"`
	Value      *float64 `json:"value"`
	Currency   string   `json:"currency"`
	Status     string   `json:"status"`
	PipelineID int64    `json:"pipeline_id"`
	StageID    int64    `json:"stage_id"`
	UpdateTime string   `json:"update_time"`
}

// deal normalizes a Pipedrive deal; false for a deleted one (recents lists those too), which
// is no longer a deal the platform can move.
func deal(d dealData) (crm.Deal, bool) {
	switch d.Status {
	case crm.DealOpen, crm.DealWon, crm.DealLost:
	default:
		return crm.Deal{}, false
	}
	out := crm.Deal{ID: strconv.FormatInt(d.ID, 10), Name: d.Title, Pipeline: strconv.FormatInt(d.PipelineID, 10),
		Stage: strconv.FormatInt(d.StageID, 10), Status: d.Status, Amount: d.Value, Currency: d.Currency}
	if t, err := time.Parse(timeLayout, d.UpdateTime); err == nil {
		out.UpdatedAt = t.UTC()
	}
	return out, true
}

// personDeals reads one page of the deals linked to a person (a read of the deal's
// person_id link, not of the search index, so it sees a deal created a moment ago). Pipedrive
// answers 404 for a person it does not have and a null data for one without deals.
func (c *Client) personDeals(ctx context.Context, person, status, sort string, start, limit int) ([]dealData, int, error) {
	var out envelope[[]dealData]
	q := url.Values{"status": {status}, "sort": {sort}, "start": {strconv.Itoa(start)}, "limit": {strconv.Itoa(limit)}}
	if err := c.get(ctx, "persons/"+person+"/deals", q, &out); err != nil {
		return nil, 0, err
	}
	next := -1
	if out.AdditionalData.Pagination.More {
		next = out.AdditionalData.Pagination.NextStart
	}
	return out.Data, next, nil
}

// contact checks that a deal's contact is a person with a Pipedrive id: Pipedrive links a
// deal to one person (person_id), and the platform's contacts are persons.
func contact(object, id string) error {
	if _, err := known(object); err != nil {
		return err
	}
	if object != "persons" {
		return &crm.ProviderError{Status: 400, Code: "invalid_object", Message: "Pipedrive deals are read and opened for persons, not " + object}
	}
	if !recordID.MatchString(id) {
		return fmt.Errorf("%w: %q is not a Pipedrive id", crm.ErrNotFound, id)
	}
	return nil
}

// OpenDeal lists the person's open deals, lowest id first (the oldest, so that repeated
// calls keep choosing the same one), and returns the first in d.Pipeline: one call, more only
// past 500 open deals. Without one it creates the deal at d.Stage (the pipeline's first stage
// when d.Stage is empty) linked to the person: one more call. Pipedrive checks that the stage
// belongs to the pipeline.
func (c *Client) OpenDeal(ctx context.Context, object, contactID string, d crm.DealInput) (crm.Deal, bool, error) {
	if err := contact(object, contactID); err != nil {
		return crm.Deal{}, false, err
	}
	pipeline, err := strconv.ParseInt(d.Pipeline, 10, 64)
	if err != nil || !recordID.MatchString(d.Pipeline) {
		return crm.Deal{}, false, &crm.ProviderError{Status: 400, Code: "invalid_pipeline", Message: fmt.Sprintf("%q is not a Pipedrive pipeline id", d.Pipeline)}
	}
	start := 0
	for range maxDealPages {
		page, next, err := c.personDeals(ctx, contactID, crm.DealOpen, "id ASC", start, maxPage)
		if err != nil {
			return crm.Deal{}, false, err
		}
		for _, dd := range page {
			if dd.PipelineID != pipeline || dd.Status != crm.DealOpen {
				continue
			}
			if found, ok := deal(dd); ok {
				return found, false, nil
			}
		}
		if next < 0 {
			break
		}
		start = next
	}
	if strings.TrimSpace(d.Name) == "" {
		return crm.Deal{}, false, &crm.ProviderError{Status: 400, Code: "invalid_deal", Message: "a Pipedrive deal needs a title"}
	}
	person, _ := strconv.ParseInt(contactID, 10, 64)
	b := map[string]any{"title": d.Name, "person_id": person, "pipeline_id": pipeline}
	if d.Stage != "" {
		stage, err := strconv.ParseInt(d.Stage, 10, 64)
		if err != nil || !recordID.MatchString(d.Stage) {
			return crm.Deal{}, false, &crm.ProviderError{Status: 400, Code: "invalid_stage", Message: fmt.Sprintf("%q is not a Pipedrive stage id", d.Stage)}
		}
		b["stage_id"] = stage
	}
	var out envelope[*dealData]
	if err := c.send(ctx, http.MethodPost, "deals", b, &out); err != nil {
		return crm.Deal{}, false, err
	}
	if out.Data == nil {
		return crm.Deal{}, false, &crm.ProviderError{Status: 201, Code: "bad_response", Message: "no deal in the answer"}
	}
	created, ok := deal(*out.Data)
	if !ok {
		return crm.Deal{}, false, &crm.ProviderError{Status: 201, Code: "bad_response", Message: "the created deal is not open"}
	}
	return created, true, nil
}

// Deals lists the person's deals that are not deleted, most recently changed first: one
// call of at most 100.
func (c *Client) Deals(ctx context.Context, object, contactID string) ([]crm.Deal, error) {
	if err := contact(object, contactID); err != nil {
		return nil, err
	}
	page, _, err := c.personDeals(ctx, contactID, "all_not_deleted", "update_time DESC, id DESC", 0, pageSize)
	if err != nil {
		return nil, err
	}
	out := make([]crm.Deal, 0, len(page))
	for _, dd := range page {
		if d, ok := deal(dd); ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// DealsChangedSince pages Pipedrive's recents of deals as ChangedSince does records: one
// call a page, oldest first. A deal deleted since is left out.
func (c *Client) DealsChangedSince(ctx context.Context, since time.Time, cursor string) ([]crm.Deal, string, error) {
	items, next, err := c.recents(ctx, "deal", since, cursor)
	if err != nil {
		return nil, "", err
	}
	out := make([]crm.Deal, 0, len(items))
	for _, raw := range items {
		var dd dealData
		if err := json.Unmarshal(raw, &dd); err != nil {
			return nil, "", &crm.ProviderError{Status: 200, Code: "bad_response", Message: "a deal could not be read"}
		}
		if d, ok := deal(dd); ok {
			out = append(out, d)
		}
	}
	return out, next, nil
}

// AddNote attaches a note to the record. Pipedrive renders note content as HTML: the text is
// escaped and its line breaks kept.
func (c *Client) AddNote(ctx context.Context, object, id, text string) error {
	i, err := known(object)
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || !recordID.MatchString(id) {
		return fmt.Errorf("%w: %q is not a Pipedrive id", crm.ErrNotFound, id)
	}
	content := strings.ReplaceAll(html.EscapeString(text), "\n", "<br>")
	return c.send(ctx, http.MethodPost, "notes", map[string]any{"content": content, objects[i].noteLink: n}, nil)
}

// Revoke does nothing: an API token is revoked by its owner in Pipedrive's settings.
func (c *Client) Revoke(context.Context) error { return nil }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
