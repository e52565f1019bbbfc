// Package salesforce is the crm.Client of Salesforce's REST API (v60.0) at an org's instance
// URL: sObject describe for fields, SOQL for finding records and changes (by SystemModstamp),
// create and update by id, OpportunityStage for the pipeline, Opportunity for deals (found
// through a contact's OpportunityContactRoles, created with their role in one Composite
// call), Note for transcripts, and userinfo with the Organization for the account; an OAuth
// 2.0 access token (authorization code with PKCE) and token revocation.
//
// The token response names the org's instance: the family reads it with InstanceURL(tok)
// (oauth2.Token.Extra("instance_url")) after the code exchange and after each refresh, and
// stores it as crm.Credentials.InstanceURL.
package salesforce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/crmhttp"
)

// DefaultLoginURL is where users authorize the connected app (test.salesforce.com for
// sandboxes, or a My Domain URL).
const DefaultLoginURL = "https://login.salesforce.com"

// Version is the REST API version the client speaks.
const Version = "v60.0"

// Bounds the client keeps to.
const (
	// batchSize is a query page (Salesforce allows 200 to 2000).
	batchSize = 200
	// maxNoteBody is the largest Note body Salesforce keeps (32,000 characters).
	maxNoteBody = 32000
	// DefaultLimitWait is how long a job waits when Salesforce refuses a call for its API
	// request limit (403 REQUEST_LIMIT_EXCEEDED, a rolling 24-hour allowance, with no hint).
	DefaultLimitWait = 10 * time.Minute
	// timeLayout is how Salesforce writes date-times.
	timeLayout = "2006-01-02T15:04:05.000-0700"
)

// Endpoint is Salesforce's OAuth 2.0 endpoint under loginURL (DefaultLoginURL when empty).
// The client secret travels in the form body.
func Endpoint(loginURL string) oauth2.Endpoint {
	if loginURL == "" {
		loginURL = DefaultLoginURL
	}
	loginURL = strings.TrimRight(loginURL, "/")
	return oauth2.Endpoint{AuthURL: loginURL + "/services/oauth2/authorize", TokenURL: loginURL + "/services/oauth2/token",
		AuthStyle: oauth2.AuthStyleInParams}
}

// Scopes are the OAuth scopes the platform asks for: the REST API and a refresh token.
func Scopes() []string { return []string{"api", "refresh_token"} }

// InstanceURL returns the org's instance URL from a token response (instance_url), checked
// as a base URL; https unless allowPrivate.
func InstanceURL(tok *oauth2.Token, allowPrivate bool) (string, error) {
	s, _ := tok.Extra("instance_url").(string)
	if s == "" {
		return "", errors.New("salesforce: the token response has no instance_url")
	}
	u, err := crmhttp.CheckInstanceURL(s, allowPrivate)
	if err != nil {
		return "", fmt.Errorf("salesforce: %w", err)
	}
	return u, nil
}

// Config configures a client.
type Config struct {
	// HTTPClient sends the requests (nil: crmhttp.NewHTTPClient(AllowPrivate)).
	HTTPClient   *http.Client
	AllowPrivate bool
	// Token supplies the access token, refreshing it as needed; the family passes one that
	// persists refreshed tokens. Nil uses the credentials' tokens as they are. Salesforce's
	// tokens carry no expiry: a dead session answers ErrUnauthorized, after which the family
	// refreshes and retries once.
	Token oauth2.TokenSource
	// LimitWait is the RetryAfter of a REQUEST_LIMIT_EXCEEDED refusal (DefaultLimitWait when 0).
	LimitWait time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Client is a Salesforce org connection. It is safe for concurrent use.
type Client struct {
	instance  string
	api       string
	http      crmhttp.Client
	token     oauth2.TokenSource
	limitWait time.Duration
	now       func() time.Time
}

var _ crm.Client = (*Client)(nil)

// New returns a client of the org at creds.InstanceURL.
func New(cfg Config, creds crm.Credentials) (*Client, error) {
	instance, err := crmhttp.CheckInstanceURL(creds.InstanceURL, cfg.AllowPrivate)
	if err != nil {
		return nil, fmt.Errorf("salesforce: %w", err)
	}
	if cfg.Token == nil && creds.AccessToken == "" {
		return nil, errors.New("salesforce: no access token")
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = crmhttp.NewHTTPClient(cfg.AllowPrivate)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	wait := cfg.LimitWait
	if wait <= 0 {
		wait = DefaultLimitWait
	}
	src := crmhttp.TokenSource(cfg.Token, creds)
	c := &Client{instance: instance, api: instance + "/services/data/" + Version, token: src, limitWait: wait, now: now}
	c.http = crmhttp.Client{HTTP: hc, Auth: crmhttp.Bearer(src), Refuse: c.refuse, Now: now}
	return c, nil
}

func (c *Client) refuse(res *http.Response, body []byte) error {
	var list []struct {
		Message   string `json:"message"`
		ErrorCode string `json:"errorCode"`
	}
	var code, msg string
	if json.Unmarshal(body, &list) == nil && len(list) > 0 {
		code, msg = list[0].ErrorCode, list[0].Message
	} else {
		var oe struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(body, &oe)
		code, msg = oe.Error, oe.Description
	}
	switch {
	case code == "REQUEST_LIMIT_EXCEEDED":
		wait := crmhttp.RetryAfter(res.Header, c.now())
		if wait == 0 {
			wait = c.limitWait
		}
		return &crm.RateLimitedError{RetryAfter: wait}
	case res.StatusCode == http.StatusTooManyRequests:
		return &crm.RateLimitedError{RetryAfter: max(crmhttp.RetryAfter(res.Header, c.now()), time.Second)}
	case code == "INVALID_SESSION_ID":
		return crmhttp.Refusal(http.StatusUnauthorized, code, msg, 0)
	case code == "INSUFFICIENT_ACCESS" || code == "API_DISABLED_FOR_ORG" || code == "INSUFFICIENT_ACCESS_OR_READONLY":
		return crmhttp.Refusal(http.StatusForbidden, code, msg, 0)
	case code == "NOT_FOUND" || code == "ENTITY_IS_DELETED":
		return crmhttp.Refusal(http.StatusNotFound, code, msg, 0)
	}
	if msg == "" && res.StatusCode >= 500 {
		msg = "Salesforce is unavailable"
	}
	return crmhttp.Refusal(res.StatusCode, code, msg, 0)
}

func (c *Client) do(ctx context.Context, method, u string, body, out any, header http.Header) error {
	return c.http.Do(ctx, crmhttp.Request{Method: method, URL: u, JSON: body, Header: header}, out)
}

// queryResult is a SOQL answer.
type queryResult struct {
	Done           bool              `json:"done"`
	Records        []json.RawMessage `json:"records"`
	NextRecordsURL string            `json:"nextRecordsUrl"`
}

func (c *Client) query(ctx context.Context, soql string) (queryResult, error) {
	var out queryResult
	err := c.do(ctx, http.MethodGet, c.api+"/query?q="+url.QueryEscape(soql), nil, &out,
		http.Header{"Sforce-Query-Options": {fmt.Sprintf("batchSize=%d", batchSize)}})
	return out, err
}

// Account reads the user the token acts as and the org's name.
func (c *Client) Account(ctx context.Context) (crm.Account, error) {
	var info struct {
		OrganizationID    string `json:"organization_id"`
		PreferredUsername string `json:"preferred_username"`
	}
	if err := c.do(ctx, http.MethodGet, c.instance+"/services/oauth2/userinfo", nil, &info, nil); err != nil {
		return crm.Account{}, err
	}
	if info.OrganizationID == "" {
		return crm.Account{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "no organization_id in userinfo"}
	}
	acct := crm.Account{ID: info.OrganizationID, User: info.PreferredUsername}
	res, err := c.query(ctx, "SELECT Id, Name FROM Organization")
	if err != nil {
		return crm.Account{}, err
	}
	if len(res.Records) > 0 {
		var org struct {
			Name string `json:"Name"`
		}
		_ = json.Unmarshal(res.Records[0], &org)
		acct.Name = org.Name
	}
	return acct, nil
}

// objects are the sObjects the platform writes, with the fields a new record needs that a
// mapping may not give (Salesforce's own placeholder for them is "[not provided]").
var objects = []struct {
	crm.Object
	placeholders []string
}{
	{crm.Object{Name: "Contact", Label: "Contacts"}, []string{"LastName"}},
	{crm.Object{Name: "Lead", Label: "Leads"}, []string{"LastName", "Company"}},
	{crm.Object{Name: "Account", Label: "Accounts"}, []string{"Name"}},
	{crm.Object{Name: "Opportunity", Label: "Opportunities"}, nil},
}

func known(object string) (int, error) {
	for i, o := range objects {
		if o.Name == object {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: salesforce object %q", crm.ErrNotFound, object)
}

// Objects lists contacts, leads, accounts and opportunities.
func (c *Client) Objects(context.Context) ([]crm.Object, error) {
	out := make([]crm.Object, 0, len(objects))
	for _, o := range objects {
		out = append(out, o.Object)
	}
	return out, nil
}

// apiName is a field's API name (custom ones end in __c): the only thing that goes into
// SOQL unquoted.
var apiName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,79}$`)

func checkNames(names ...string) error {
	for _, n := range names {
		if !apiName.MatchString(n) {
			return &crm.ProviderError{Status: 400, Code: "INVALID_FIELD", Message: fmt.Sprintf("%q is not a Salesforce field name", n)}
		}
	}
	return nil
}

// locator is a query locator with its position.
var locator = regexp.MustCompile(`^[A-Za-z0-9]+-[0-9]+$`)

// recordID is a 15- or 18-character Salesforce id.
var recordID = regexp.MustCompile(`^[A-Za-z0-9]{15}(?:[A-Za-z0-9]{3})?$`)

// Fields describes an object's fields.
func (c *Client) Fields(ctx context.Context, object string) ([]crm.Field, error) {
	if _, err := known(object); err != nil {
		return nil, err
	}
	var out struct {
		Fields []struct {
			Name              string `json:"name"`
			Label             string `json:"label"`
			Type              string `json:"type"`
			Updateable        bool   `json:"updateable"`
			Createable        bool   `json:"createable"`
			Nillable          bool   `json:"nillable"`
			DefaultedOnCreate bool   `json:"defaultedOnCreate"`
			PicklistValues    []struct {
				Value  string `json:"value"`
				Active bool   `json:"active"`
			} `json:"picklistValues"`
		} `json:"fields"`
	}
	if err := c.do(ctx, http.MethodGet, c.api+"/sobjects/"+object+"/describe", nil, &out, nil); err != nil {
		return nil, err
	}
	fields := make([]crm.Field, 0, len(out.Fields))
	for _, f := range out.Fields {
		fl := crm.Field{Object: object, Name: f.Name, Label: f.Label, Type: fieldType(f.Type),
			ReadOnly: !f.Updateable && !f.Createable, Required: f.Createable && !f.Nillable && !f.DefaultedOnCreate}
		if fl.Type == crm.TypeEnum {
			for _, p := range f.PicklistValues {
				if p.Active {
					fl.Options = append(fl.Options, p.Value)
				}
			}
		}
		fields = append(fields, fl)
	}
	return fields, nil
}

func fieldType(t string) crm.FieldType {
	switch t {
	case "email":
		return crm.TypeEmail
	case "phone":
		return crm.TypePhone
	case "double", "currency", "percent", "int", "long":
		return crm.TypeNumber
	case "boolean":
		return crm.TypeBool
	case "date":
		return crm.TypeDate
	case "datetime":
		return crm.TypeDateTime
	case "picklist", "multipicklist":
		return crm.TypeEnum
	}
	return crm.TypeString
}

// Pipelines reads the active opportunity stages, in their order, as one pipeline.
func (c *Client) Pipelines(ctx context.Context) ([]crm.Pipeline, error) {
	res, err := c.query(ctx, "SELECT ApiName, MasterLabel, SortOrder FROM OpportunityStage WHERE IsActive = true ORDER BY SortOrder")
	if err != nil {
		return nil, err
	}
	p := crm.Pipeline{ID: pipelineID, Label: "Opportunities", Stages: []crm.Stage{}}
	for _, raw := range res.Records {
		var st struct {
			ApiName     string `json:"ApiName"`
			MasterLabel string `json:"MasterLabel"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			return nil, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "unreadable OpportunityStage"}
		}
		p.Stages = append(p.Stages, crm.Stage{ID: st.ApiName, Label: st.MasterLabel})
	}
	return []crm.Pipeline{p}, nil
}

// record normalizes an sObject: scalar fields, without attributes or related objects.
func record(object string, raw json.RawMessage) (crm.Record, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return crm.Record{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "unreadable record"}
	}
	id, _ := m["Id"].(string)
	r := crm.Record{Object: object, ID: id, Properties: map[string]any{}}
	for k, v := range m {
		switch v.(type) {
		case string, float64, bool, nil:
			r.Properties[k] = v
		}
	}
	if s, _ := m["SystemModstamp"].(string); s != "" {
		if t, err := time.Parse(timeLayout, s); err == nil {
			r.UpdatedAt = t.UTC()
		}
	}
	return r, nil
}

// quote is a SOQL string literal of s.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\r", `\r`, "\t", `\t`, `"`, `\"`)
	return "'" + r.Replace(s) + "'"
}

func selectList(fields []string) string {
	list := []string{"Id", "SystemModstamp"}
	for _, f := range fields {
		if f != "Id" && f != "SystemModstamp" {
			list = append(list, f)
		}
	}
	return strings.Join(list, ", ")
}

// values turns props into sObject field values: times as dates or date-times.
func values(props map[string]any) (map[string]any, error) {
	return crmhttp.Values(props, checkNames, "2006-01-02T15:04:05.000Z")
}

// Upsert finds the record by a SOQL query on key, then updates it by id or creates it
// (Salesforce's own upsert by field works only for external-id fields). A new Contact or Lead
// without a last name (or company) gets Salesforce's "[not provided]".
func (c *Client) Upsert(ctx context.Context, object, key, value string, props map[string]any) (crm.Record, error) {
	i, err := known(object)
	if err != nil {
		return crm.Record{}, err
	}
	if err := checkNames(key); err != nil {
		return crm.Record{}, err
	}
	vals, err := values(props)
	if err != nil {
		return crm.Record{}, err
	}
	res, err := c.query(ctx, fmt.Sprintf("SELECT Id FROM %s WHERE %s = %s ORDER BY CreatedDate LIMIT 1", object, key, quote(value)))
	if err != nil {
		return crm.Record{}, err
	}
	if len(res.Records) > 0 {
		var r struct {
			ID string `json:"Id"`
		}
		_ = json.Unmarshal(res.Records[0], &r)
		if !recordID.MatchString(r.ID) {
			return crm.Record{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "no record id in the answer"}
		}
		return c.update(ctx, object, r.ID, vals, key)
	}
	vals[key] = value
	for _, p := range objects[i].placeholders {
		if s, _ := vals[p].(string); s == "" {
			vals[p] = "[not provided]"
		}
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := c.do(ctx, http.MethodPost, c.api+"/sobjects/"+object, vals, &created, nil); err != nil {
		return crm.Record{}, err
	}
	if !recordID.MatchString(created.ID) {
		return crm.Record{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "no record id in the answer"}
	}
	return c.Get(ctx, object, created.ID, fieldsOf(vals, key))
}

// Update writes props to the record with that id: a PATCH (204, no body) and a read of the
// fields written, since Salesforce answers an update without the record: two requests (one
// when props is empty: the read alone, which also tells whether the record exists). A deleted
// or merged-away record answers 404 ENTITY_IS_DELETED, an unknown id 404 NOT_FOUND.
func (c *Client) Update(ctx context.Context, object, id string, props map[string]any) (crm.Record, error) {
	if _, err := known(object); err != nil {
		return crm.Record{}, err
	}
	if !recordID.MatchString(id) {
		return crm.Record{}, fmt.Errorf("%w: %q is not a Salesforce id", crm.ErrNotFound, id)
	}
	vals, err := values(props)
	if err != nil {
		return crm.Record{}, err
	}
	return c.update(ctx, object, id, vals)
}

// update PATCHes the record id with vals, when there are any, and reads back the fields
// written and extra.
func (c *Client) update(ctx context.Context, object, id string, vals map[string]any, extra ...string) (crm.Record, error) {
	if len(vals) > 0 {
		if err := c.do(ctx, http.MethodPatch, c.api+"/sobjects/"+object+"/"+id, vals, nil, nil); err != nil {
			return crm.Record{}, err
		}
	}
	return c.Get(ctx, object, id, fieldsOf(vals, extra...))
}

// fieldsOf lists first and then the other fields of vals, sorted (a stable read-back).
func fieldsOf(vals map[string]any, first ...string) []string {
	fields := slices.Clone(first)
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		if !slices.Contains(fields, k) {
			fields = append(fields, k)
		}
	}
	return fields
}

// Get reads a record by id with the fields named.
func (c *Client) Get(ctx context.Context, object, id string, fields []string) (crm.Record, error) {
	if _, err := known(object); err != nil {
		return crm.Record{}, err
	}
	if !recordID.MatchString(id) {
		return crm.Record{}, fmt.Errorf("%w: %q is not a Salesforce id", crm.ErrNotFound, id)
	}
	if err := checkNames(fields...); err != nil {
		return crm.Record{}, err
	}
	var raw json.RawMessage
	u := c.api + "/sobjects/" + object + "/" + id + "?fields=" + url.QueryEscape(strings.ReplaceAll(selectList(fields), " ", ""))
	if err := c.do(ctx, http.MethodGet, u, nil, &raw, nil); err != nil {
		return crm.Record{}, err
	}
	return record(object, raw)
}

// Find reads the record whose key equals value (SOQL compares text case-insensitively).
func (c *Client) Find(ctx context.Context, object, key, value string, fields []string) (crm.Record, error) {
	if _, err := known(object); err != nil {
		return crm.Record{}, err
	}
	if err := checkNames(append([]string{key}, fields...)...); err != nil {
		return crm.Record{}, err
	}
	res, err := c.query(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s ORDER BY CreatedDate LIMIT 1", selectList(fields), object, key, quote(value)))
	if err != nil {
		return crm.Record{}, err
	}
	if len(res.Records) == 0 {
		return crm.Record{}, crm.ErrNotFound
	}
	return record(object, res.Records[0])
}

// ChangedSince queries records by SystemModstamp (whole seconds: SOQL's date-time literals
// have no fraction, so records of since's second come too), oldest first; the cursor is the
// query locator path Salesforce answered (nextRecordsUrl).
func (c *Client) ChangedSince(ctx context.Context, object string, since time.Time, fields []string, cursor string) ([]crm.Record, string, error) {
	if _, err := known(object); err != nil {
		return nil, "", err
	}
	if err := checkNames(fields...); err != nil {
		return nil, "", err
	}
	res, next, err := c.changes(ctx, selectList(fields), object, since, cursor)
	if err != nil {
		return nil, "", err
	}
	out := make([]crm.Record, 0, len(res.Records))
	for _, raw := range res.Records {
		r, err := record(object, raw)
		if err != nil {
			return nil, "", err
		}
		out = append(out, r)
	}
	return out, next, nil
}

// changes runs the query of object's records changed at or after since, or, with a cursor,
// reads its next batch; next is the cursor of the batch after, empty after the last.
func (c *Client) changes(ctx context.Context, list, object string, since time.Time, cursor string) (res queryResult, next string, err error) {
	if cursor == "" {
		res, err = c.query(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE SystemModstamp >= %s ORDER BY SystemModstamp ASC, Id ASC",
			list, object, since.UTC().Truncate(time.Second).Format("2006-01-02T15:04:05Z")))
	} else {
		// Only a query locator of this API version: the cursor comes back from a caller and
		// must not steer the token elsewhere.
		loc, ok := strings.CutPrefix(cursor, "/services/data/"+Version+"/query/")
		if !ok || !locator.MatchString(loc) {
			return queryResult{}, "", &crm.ProviderError{Status: 400, Code: "invalid_cursor", Message: "the cursor is not a Salesforce query locator"}
		}
		err = c.do(ctx, http.MethodGet, c.api+"/query/"+loc, nil, &res, http.Header{"Sforce-Query-Options": {fmt.Sprintf("batchSize=%d", batchSize)}})
	}
	if err != nil {
		return queryResult{}, "", err
	}
	if res.Done {
		return res, "", nil
	}
	return res, res.NextRecordsURL, nil
}

// pipelineID is the one pipeline Pipelines lists: the org's opportunities, whose stages are
// OpportunityStage ApiNames (the StageName values).
const pipelineID = "Opportunity"

// Deal bounds.
const (
	// dealFields is what a deal is read with. CurrencyIsoCode is left out: it exists only in
	// multi-currency orgs and any other org refuses a query naming it (INVALID_FIELD), so a
	// deal's Currency stays empty.
	dealFields = "Id, Name, StageName, Amount, IsClosed, IsWon, SystemModstamp"
	// maxDeals is how many of a contact's deals Deals lists.
	maxDeals = 100
	// closeDays is how far ahead a new opportunity's CloseDate is: Salesforce requires an
	// expected close date and the platform has none, so it sets today (UTC) plus 30 days,
	// which the sales team moves as the deal goes on.
	closeDays = 30
)

// deal normalizes an Opportunity read with dealFields.
func deal(raw json.RawMessage) (crm.Deal, error) {
	var o struct {
		ID             string   `json:"Id"`
		Name           string   `json:"Name"`
		StageName      string   `json:"StageName"`
		Amount         *float64 `json:"Amount"`
		IsClosed       bool     `json:"IsClosed"`
		IsWon          bool     `json:"IsWon"`
		SystemModstamp string   `json:"SystemModstamp"`
	}
	if err := json.Unmarshal(raw, &o); err != nil || !recordID.MatchString(o.ID) {
		return crm.Deal{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "unreadable Opportunity"}
	}
	d := crm.Deal{ID: o.ID, Name: o.Name, Pipeline: pipelineID, Stage: o.StageName, Status: crm.DealOpen, Amount: o.Amount}
	switch {
	case o.IsWon:
		d.Status = crm.DealWon
	case o.IsClosed:
		d.Status = crm.DealLost
	}
	if t, err := time.Parse(timeLayout, o.SystemModstamp); err == nil {
		d.UpdatedAt = t.UTC()
	}
	return d, nil
}

// contactDeals reads the deals of a contact through its OpportunityContactRoles, which are
// read from the database (no search index to lag behind a create), most recently changed
// first. Deals attach to contacts only: OpportunityContactRole has no lead or account side.
func (c *Client) contactDeals(ctx context.Context, object, contactID string) ([]crm.Deal, error) {
	if _, err := known(object); err != nil {
		return nil, err
	}
	if object != "Contact" {
		return nil, &crm.ProviderError{Status: 400, Code: "unsupported_object", Message: "Salesforce deals attach to Contact records, not " + object}
	}
	if !recordID.MatchString(contactID) {
		return nil, fmt.Errorf("%w: %q is not a Salesforce id", crm.ErrNotFound, contactID)
	}
	res, err := c.query(ctx, fmt.Sprintf("SELECT %s FROM Opportunity WHERE Id IN (SELECT OpportunityId FROM OpportunityContactRole WHERE ContactId = %s) ORDER BY SystemModstamp DESC LIMIT %d",
		dealFields, quote(contactID), maxDeals))
	if err != nil {
		return nil, err
	}
	out := make([]crm.Deal, 0, len(res.Records))
	for _, raw := range res.Records {
		d, err := deal(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// OpenDeal returns the contact's most recently changed open opportunity (one query), or
// creates one at d.Stage with the contact as its primary contact role in one Composite call
// (allOrNone: no opportunity without its role), which also reads the new opportunity back:
// its stage decides whether it is open. An unknown or deleted contact is ErrNotFound, and
// then nothing is created.
func (c *Client) OpenDeal(ctx context.Context, object, contactID string, d crm.DealInput) (crm.Deal, bool, error) {
	if d.Pipeline != pipelineID {
		return crm.Deal{}, false, &crm.ProviderError{Status: 400, Code: "unknown_pipeline", Message: fmt.Sprintf("Salesforce has one pipeline, %q, not %q", pipelineID, d.Pipeline)}
	}
	deals, err := c.contactDeals(ctx, object, contactID)
	if err != nil {
		return crm.Deal{}, false, err
	}
	for _, dl := range deals {
		if dl.Status == crm.DealOpen {
			return dl, false, nil
		}
	}
	base := "/services/data/" + Version
	closeDate := c.now().UTC().AddDate(0, 0, closeDays).Format(time.DateOnly)
	req := map[string]any{"allOrNone": true, "compositeRequest": []map[string]any{
		{"method": http.MethodPost, "url": base + "/sobjects/Opportunity", "referenceId": "deal",
			"body": map[string]any{"Name": d.Name, "StageName": d.Stage, "CloseDate": closeDate}},
		{"method": http.MethodPost, "url": base + "/sobjects/OpportunityContactRole", "referenceId": "role",
			"body": map[string]any{"OpportunityId": "@{deal.id}", "ContactId": contactID, "IsPrimary": true}},
		{"method": http.MethodGet, "referenceId": "read",
			"url": base + "/sobjects/Opportunity/@{deal.id}?fields=" + url.QueryEscape(strings.ReplaceAll(dealFields, " ", ""))},
	}}
	var out struct {
		CompositeResponse []struct {
			Body           json.RawMessage `json:"body"`
			HTTPStatusCode int             `json:"httpStatusCode"`
			ReferenceID    string          `json:"referenceId"`
		} `json:"compositeResponse"`
	}
	if err := c.do(ctx, http.MethodPost, c.api+"/composite", req, &out, nil); err != nil {
		return crm.Deal{}, false, err
	}
	// Composite answers 200 whatever its parts did: the part that failed carries the error,
	// the others PROCESSING_HALTED (rolled back or never run), which is all there is to say
	// only when no part says more.
	var read json.RawMessage
	var halted error
	for _, sub := range out.CompositeResponse {
		if sub.HTTPStatusCode >= 200 && sub.HTTPStatusCode <= 299 {
			if sub.ReferenceID == "read" {
				read = sub.Body
			}
			continue
		}
		var list []struct {
			ErrorCode string `json:"errorCode"`
		}
		_ = json.Unmarshal(sub.Body, &list)
		if len(list) > 0 && list[0].ErrorCode == "PROCESSING_HALTED" {
			if halted == nil {
				halted = c.refuse(&http.Response{StatusCode: sub.HTTPStatusCode, Header: http.Header{}}, sub.Body)
			}
			continue
		}
		// The role's only reference a caller gave is the contact.
		if sub.ReferenceID == "role" && len(list) > 0 && (list[0].ErrorCode == "INVALID_CROSS_REFERENCE_KEY" || list[0].ErrorCode == "ENTITY_IS_DELETED") {
			return crm.Deal{}, false, fmt.Errorf("%w: Salesforce contact %s (%s)", crm.ErrNotFound, contactID, list[0].ErrorCode)
		}
		return crm.Deal{}, false, c.refuse(&http.Response{StatusCode: sub.HTTPStatusCode, Header: http.Header{}}, sub.Body)
	}
	if halted != nil {
		return crm.Deal{}, false, halted
	}
	if read == nil {
		return crm.Deal{}, false, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "the composite answer has no Opportunity"}
	}
	created, err := deal(read)
	if err != nil {
		return crm.Deal{}, false, err
	}
	return created, true, nil
}

// Deals lists the contact's opportunities, most recently changed first, at most 100: one
// query, and a read of the contact when there are none, since the query cannot tell a
// contact without deals from one that does not exist (ErrNotFound).
func (c *Client) Deals(ctx context.Context, object, contactID string) ([]crm.Deal, error) {
	deals, err := c.contactDeals(ctx, object, contactID)
	if err != nil {
		return nil, err
	}
	if len(deals) == 0 {
		if _, err := c.Get(ctx, object, contactID, nil); err != nil {
			return nil, err
		}
	}
	return deals, nil
}

// DealsChangedSince queries opportunities by SystemModstamp, oldest first, a batch at a time,
// as ChangedSince does (whole seconds; the cursor is the query locator path).
func (c *Client) DealsChangedSince(ctx context.Context, since time.Time, cursor string) ([]crm.Deal, string, error) {
	res, next, err := c.changes(ctx, dealFields, "Opportunity", since, cursor)
	if err != nil {
		return nil, "", err
	}
	out := make([]crm.Deal, 0, len(res.Records))
	for _, raw := range res.Records {
		d, err := deal(raw)
		if err != nil {
			return nil, "", err
		}
		out = append(out, d)
	}
	return out, next, nil
}

// AddNote attaches a Note (plain text, 32,000 characters) to the record; its title is the
// text's first line.
func (c *Client) AddNote(ctx context.Context, object, id, text string) error {
	if _, err := known(object); err != nil {
		return err
	}
	if !recordID.MatchString(id) {
		return fmt.Errorf("%w: %q is not a Salesforce id", crm.ErrNotFound, id)
	}
	title, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	title = crmhttp.Truncate(strings.TrimSpace(title), 80)
	if title == "" {
		title = "Conversation"
	}
	note := map[string]any{"ParentId": id, "Title": title, "Body": crmhttp.Truncate(text, maxNoteBody)}
	return c.do(ctx, http.MethodPost, c.api+"/sobjects/Note", note, nil, nil)
}

// Revoke revokes the refresh token (and with it the sessions it made), or the access token
// when there is none. A token Salesforce no longer knows counts as revoked.
func (c *Client) Revoke(ctx context.Context) error {
	tok, err := c.token.Token()
	if err != nil {
		return crmhttp.TokenError(ctx, err)
	}
	t := tok.RefreshToken
	if t == "" {
		t = tok.AccessToken
	}
	if t == "" {
		return nil
	}
	plain := c.http
	plain.Auth = func(context.Context, *http.Request) (string, error) { return t, nil }
	err = plain.Do(ctx, crmhttp.Request{Method: http.MethodPost, URL: c.instance + "/services/oauth2/revoke", Form: url.Values{"token": {t}}}, nil)
	var pe *crm.ProviderError
	if errors.As(err, &pe) && pe.Status == http.StatusBadRequest && (pe.Code == "unsupported_token_type" || pe.Code == "invalid_token") {
		return nil
	}
	return err
}
