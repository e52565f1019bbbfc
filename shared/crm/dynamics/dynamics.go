// Package dynamics is the crm.Client of Microsoft Dynamics 365 through the Dataverse Web API
// (v9.2) at an environment URL, with tokens of the OAuth 2.0 client-credentials grant from
// Microsoft Entra ID ({login}/{tenant}/oauth2/v2.0/token, scope "{environment}/.default"):
// WhoAmI and the organization for the account, EntityDefinitions for fields and picklist
// options, the opportunity sales stages as the pipeline, $filter queries then PATCH or POST
// for upserts, PATCH by id for updates, modifiedon for changes, annotations for notes, and
// opportunities queried through their parentcontactid (or parentaccountid) lookup for deals.
// Subscriber records live in the connection's contacts entity set (Config.Contacts: contacts,
// leads or a custom set), which the object name "contacts" addresses.
// Dataverse has no revocation of client-credentials tokens: Revoke returns nil (the customer
// removes the application user).
package dynamics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/botplatform/api/shared/channel/httpclient"
	"github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/crmhttp"
)

// DefaultLoginURL is Microsoft Entra ID's authority host (sovereign clouds have their own).
const DefaultLoginURL = "https://login.microsoftonline.com"

// Bounds the client keeps to.
const (
	// pageSize is a page of records (odata.maxpagesize; Dataverse allows 5000).
	pageSize = 100
	// defaultRetry is the wait of a 429 without Retry-After.
	defaultRetry = 5 * time.Second
	// maxNoteText is the largest annotation notetext Dataverse keeps by default (100,000).
	maxNoteText = 100000
)

// Config configures a client.
type Config struct {
	// LoginURL is Entra ID's authority host (DefaultLoginURL when empty).
	LoginURL string
	// HTTPClient sends the Web API and token requests (nil: crmhttp.NewHTTPClient(AllowPrivate)).
	HTTPClient   *http.Client
	AllowPrivate bool
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Contacts is the connection's entity set of subscriber records (its entities.contacts):
	// contacts when empty, leads, or a custom entity set (new_subscribers) whose logical name
	// and primary key the client reads from EntityDefinitions. The object name "contacts"
	// addresses it, so that a mapping of contacts writes where the connection says.
	Contacts string
}

// Client is a Dataverse environment connection. It is safe for concurrent use.
type Client struct {
	api      string
	http     crmhttp.Client
	now      func() time.Time
	contacts string // the entity set "contacts" addresses (Config.Contacts)

	mu     sync.Mutex
	custom *entity // contacts when it is a custom entity set, once EntityDefinitions answered
}

var _ crm.Client = (*Client)(nil)

// tenantID is a directory id (a GUID) or a verified domain name.
var tenantID = regexp.MustCompile(`^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[A-Za-z0-9][A-Za-z0-9.-]{0,252}\.[A-Za-z]{2,63})$`)

// New returns a client of the environment creds.InstanceURL, authenticated as the
// application creds.TenantID / ClientID / ClientSecret. Tokens are fetched on first use and
// renewed before they expire (clientcredentials).
func New(cfg Config, creds crm.Credentials) (*Client, error) {
	env, err := crmhttp.CheckInstanceURL(creds.InstanceURL, cfg.AllowPrivate)
	if err != nil {
		return nil, fmt.Errorf("dynamics: environment %w", err)
	}
	login := strings.TrimRight(cfg.LoginURL, "/")
	if login == "" {
		login = DefaultLoginURL
	}
	if err := httpclient.CheckBaseURL(login); err != nil {
		return nil, fmt.Errorf("dynamics: login URL %w", err)
	}
	switch {
	case !tenantID.MatchString(creds.TenantID):
		return nil, errors.New("dynamics: tenant_id must be a directory id or domain")
	case strings.TrimSpace(creds.ClientID) == "" || creds.ClientSecret == "":
		return nil, errors.New("dynamics: client_id and client_secret are required")
	}
	contacts := cfg.Contacts
	if contacts == "" {
		contacts = "contacts"
	}
	if !logicalName.MatchString(contacts) {
		return nil, fmt.Errorf("dynamics: %q is not an entity set name", contacts)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = crmhttp.NewHTTPClient(cfg.AllowPrivate)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	cc := clientcredentials.Config{ClientID: creds.ClientID, ClientSecret: creds.ClientSecret,
		TokenURL: login + "/" + url.PathEscape(creds.TenantID) + "/oauth2/v2.0/token",
		Scopes:   []string{env + "/.default"}, AuthStyle: oauth2.AuthStyleInParams}
	// The token source outlives any one call, so its context is not a request's: it carries
	// only the HTTP client the token requests use (timeouts bound them).
	src := cc.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, hc))
	c := &Client{api: env + "/api/data/v9.2", now: now, contacts: contacts}
	c.http = crmhttp.Client{HTTP: hc, Auth: crmhttp.Bearer(src), Refuse: c.refuse, Now: now}
	return c, nil
}

func (c *Client) refuse(res *http.Response, body []byte) error {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if res.StatusCode == http.StatusTooManyRequests {
		wait := crmhttp.RetryAfter(res.Header, c.now())
		if wait == 0 {
			wait = defaultRetry
		}
		return &crm.RateLimitedError{RetryAfter: wait}
	}
	msg := e.Error.Message
	if msg == "" && res.StatusCode >= 500 {
		msg = "Dataverse is unavailable"
	}
	return crmhttp.Refusal(res.StatusCode, e.Error.Code, msg, 0)
}

var odataHeaders = http.Header{"OData-MaxVersion": {"4.0"}, "OData-Version": {"4.0"}}

func (c *Client) do(ctx context.Context, method, u string, body, out any, extra http.Header) error {
	h := odataHeaders.Clone()
	for k, v := range extra {
		h[k] = v
	}
	return c.http.Do(ctx, crmhttp.Request{Method: method, URL: u, JSON: body, Header: h}, out)
}

var guid = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Account reads the application user and the organization.
func (c *Client) Account(ctx context.Context) (crm.Account, error) {
	var who struct {
		UserID         string `json:"UserId"`
		OrganizationID string `json:"OrganizationId"`
	}
	if err := c.do(ctx, http.MethodGet, c.api+"/WhoAmI", nil, &who, nil); err != nil {
		return crm.Account{}, err
	}
	if !guid.MatchString(who.OrganizationID) {
		return crm.Account{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "no OrganizationId in WhoAmI"}
	}
	var org struct {
		Name string `json:"name"`
	}
	if err := c.do(ctx, http.MethodGet, c.api+"/organizations("+who.OrganizationID+")?$select=name", nil, &org, nil); err != nil {
		return crm.Account{}, err
	}
	// The user's name (its UPN, domainname) is what a connection's login names; the id is
	// kept when the environment gives no name.
	user := who.UserID
	if guid.MatchString(who.UserID) {
		var u struct {
			DomainName string `json:"domainname"`
		}
		if err := c.do(ctx, http.MethodGet, c.api+"/systemusers("+who.UserID+")?$select=domainname", nil, &u, nil); err != nil {
			return crm.Account{}, err
		}
		if u.DomainName != "" {
			user = u.DomainName
		}
	}
	return crm.Account{ID: who.OrganizationID, Name: org.Name, User: user}, nil
}

// entity is an entity set the platform writes (Object.Name), its logical name and primary key.
type entity struct {
	crm.Object
	logical, key string
}

// standard are Dynamics 365's own entity sets, known without asking the environment.
var standard = []entity{
	{crm.Object{Name: "contacts", Label: "Contacts"}, "contact", "contactid"},
	{crm.Object{Name: "leads", Label: "Leads"}, "lead", "leadid"},
	{crm.Object{Name: "accounts", Label: "Accounts"}, "account", "accountid"},
	{crm.Object{Name: "opportunities", Label: "Opportunities"}, "opportunity", "opportunityid"},
}

// entity resolves an object name to its entity set: "contacts" is the connection's contacts
// set (Config.Contacts), which may be another standard set or a custom one; other names are
// the standard sets.
func (c *Client) entity(ctx context.Context, object string) (entity, error) {
	set := object
	if object == "contacts" {
		set = c.contacts
	}
	for _, e := range standard {
		if e.Name == set {
			return e, nil
		}
	}
	if set != c.contacts {
		return entity{}, fmt.Errorf("%w: dataverse entity set %q", crm.ErrNotFound, object)
	}
	return c.customEntity(ctx)
}

// definition is what EntityDefinitions says of an entity set.
type definition struct {
	LogicalName           string `json:"LogicalName"`
	EntitySetName         string `json:"EntitySetName"`
	PrimaryIDAttribute    string `json:"PrimaryIdAttribute"`
	PrimaryNameAttribute  string `json:"PrimaryNameAttribute"`
	DisplayCollectionName label  `json:"DisplayCollectionName"`
}

// definition reads the definition of the entity set by its EntitySetName (a metadata
// query: EntityDefinitions is keyed by LogicalName only, and $filter takes any primitive
// property). A set the environment does not have answers an empty list, which is an
// *crm.UnusableObjectError wrapping crm.ErrNotFound.
func (c *Client) definition(ctx context.Context, set string) (definition, error) {
	var out struct {
		Value []definition `json:"value"`
	}
	u := c.query("EntityDefinitions", [][2]string{{"$select", "LogicalName,EntitySetName,PrimaryIdAttribute,PrimaryNameAttribute,DisplayCollectionName"},
		{"$filter", "EntitySetName eq " + literal(set)}})
	if err := c.do(ctx, http.MethodGet, u, nil, &out, nil); err != nil {
		return definition{}, err
	}
	if len(out.Value) == 0 {
		return definition{}, missingSet(set)
	}
	d := out.Value[0]
	if d.EntitySetName != set || !logicalName.MatchString(d.LogicalName) || !logicalName.MatchString(d.PrimaryIDAttribute) {
		return definition{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "an entity definition without its names"}
	}
	return d, nil
}

// missingSet is the error of an entity set the environment does not have.
func missingSet(set string) error {
	return &crm.UnusableObjectError{Object: set, Missing: true,
		Reason: fmt.Sprintf("the environment has no entity set %q (entity set names are plural logical names, such as new_subscribers)", set)}
}

// customEntity reads the definition of the custom contacts set, once per client.
func (c *Client) customEntity(ctx context.Context) (entity, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.custom != nil {
		return *c.custom, nil
	}
	d, err := c.definition(ctx, c.contacts)
	if err != nil {
		return entity{}, err
	}
	c.custom = &entity{crm.Object{Name: c.contacts, Label: d.DisplayCollectionName.text(c.contacts)}, d.LogicalName, d.PrimaryIDAttribute}
	return *c.custom, nil
}

// CheckContacts asks the environment whether the connection's contacts set (Config.Contacts)
// can hold subscriber records, as a connection is saved: that the entity set exists
// (EntityDefinitions filtered on EntitySetName), that its table has a primary name column
// (an intersect table of a many-to-many relationship has none, and cannot be written to),
// and that it has an email column a sync can write (records are matched by the
// subscriber's email unless a mapping says otherwise). Three requests at most; contacts,
// the default, is every environment's and is not asked about. What the environment refuses
// is an *crm.UnusableObjectError (wrapping crm.ErrNotFound for a set it does not have);
// other failures are the client's usual errors. A custom set's definition is kept for the
// client's later calls; syncs, with their own clients, read it again as they use it.
func (c *Client) CheckContacts(ctx context.Context) error {
	if c.contacts == "contacts" {
		return nil
	}
	d, err := c.definition(ctx, c.contacts)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(standard, func(e entity) bool { return e.Name == c.contacts }) {
		c.mu.Lock()
		c.custom = &entity{crm.Object{Name: c.contacts, Label: d.DisplayCollectionName.text(c.contacts)}, d.LogicalName, d.PrimaryIDAttribute}
		c.mu.Unlock()
	}
	attrs, err := c.attributes(ctx, d.LogicalName)
	if errors.Is(err, crm.ErrNotFound) {
		return missingSet(c.contacts) // deleted between the two requests
	}
	if err != nil {
		return err
	}
	unusable := func(format string, args ...any) error {
		return &crm.UnusableObjectError{Object: c.contacts, Reason: fmt.Sprintf(format, args...)}
	}
	if d.PrimaryNameAttribute == "" {
		return unusable("the table %s has no primary name column: it is not a table records can be written to (an intersect table, say)", d.LogicalName)
	}
	for _, a := range attrs {
		if a.field() && fieldType(a.LogicalName, a.AttributeType, a.format()) == crm.TypeEmail && a.IsValidForCreate && a.IsValidForUpdate {
			return nil
		}
	}
	return unusable("the table %s has no email column the platform can write: subscriber records are matched by their email", d.LogicalName)
}

// Objects lists the connection's contacts set (in the place of contacts), then leads,
// accounts and opportunities.
func (c *Client) Objects(ctx context.Context) ([]crm.Object, error) {
	first, err := c.entity(ctx, "contacts")
	if err != nil {
		return nil, err
	}
	out := []crm.Object{first.Object}
	for _, e := range standard {
		if e.Name != "contacts" && e.Name != first.Name {
			out = append(out, e.Object)
		}
	}
	return out, nil
}

// logicalName is an attribute's logical name: the only thing that goes into OData unquoted.
var logicalName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,99}$`)

func checkNames(names ...string) error {
	for _, n := range names {
		if !logicalName.MatchString(n) {
			return &crm.ProviderError{Status: 400, Code: "invalid_attribute", Message: fmt.Sprintf("%q is not a Dataverse attribute name", n)}
		}
	}
	return nil
}

type label struct {
	UserLocalizedLabel *struct {
		Label string `json:"Label"`
	} `json:"UserLocalizedLabel"`
}

func (l label) text(def string) string {
	if l.UserLocalizedLabel != nil && l.UserLocalizedLabel.Label != "" {
		return l.UserLocalizedLabel.Label
	}
	return def
}

// picklists reads the options of an entity's picklist attributes (values as text, which is
// what the client writes back as numbers).
func (c *Client) picklists(ctx context.Context, logical string) (map[string][]crm.Stage, error) {
	var out struct {
		Value []struct {
			LogicalName string `json:"LogicalName"`
			OptionSet   struct {
				Options []struct {
					Value int   `json:"Value"`
					Label label `json:"Label"`
				} `json:"Options"`
			} `json:"OptionSet"`
		} `json:"value"`
	}
	u := c.api + "/EntityDefinitions(LogicalName='" + logical + "')/Attributes/Microsoft.Dynamics.CRM.PicklistAttributeMetadata" +
		"?$select=LogicalName&$expand=OptionSet($select=Options)"
	if err := c.do(ctx, http.MethodGet, u, nil, &out, nil); err != nil {
		return nil, err
	}
	m := map[string][]crm.Stage{}
	for _, a := range out.Value {
		for _, o := range a.OptionSet.Options {
			m[a.LogicalName] = append(m[a.LogicalName], crm.Stage{ID: strconv.Itoa(o.Value), Label: o.Label.text(strconv.Itoa(o.Value))})
		}
	}
	return m, nil
}

// attributeDef is what EntityDefinitions says of an attribute.
type attributeDef struct {
	LogicalName      string  `json:"LogicalName"`
	AttributeType    string  `json:"AttributeType"`
	AttributeOf      *string `json:"AttributeOf"`
	DisplayName      label   `json:"DisplayName"`
	IsValidForCreate bool    `json:"IsValidForCreate"`
	IsValidForUpdate bool    `json:"IsValidForUpdate"`
	RequiredLevel    struct {
		Value string `json:"Value"`
	} `json:"RequiredLevel"`
	FormatName *struct {
		Value string `json:"Value"`
	} `json:"FormatName"`
}

// field reports whether the attribute is one a mapping may name: not one of the virtual
// ones a lookup adds.
func (a attributeDef) field() bool {
	return (a.AttributeOf == nil || *a.AttributeOf == "") && a.AttributeType != "Virtual" && a.AttributeType != "EntityName"
}

func (a attributeDef) format() string {
	if a.FormatName == nil {
		return ""
	}
	return a.FormatName.Value
}

// attributes reads the attributes of the entity with that logical name (404, ErrNotFound,
// for a table the environment does not have).
func (c *Client) attributes(ctx context.Context, logical string) ([]attributeDef, error) {
	var out struct {
		Value []attributeDef `json:"value"`
	}
	u := c.api + "/EntityDefinitions(LogicalName='" + logical + "')/Attributes" +
		"?$select=LogicalName,AttributeType,AttributeOf,DisplayName,IsValidForCreate,IsValidForUpdate,RequiredLevel"
	if err := c.do(ctx, http.MethodGet, u, nil, &out, nil); err != nil {
		return nil, err
	}
	return out.Value, nil
}

// Fields reads the entity's attributes (not the virtual ones a lookup adds) with their
// types; picklist options are their integer values.
func (c *Client) Fields(ctx context.Context, object string) ([]crm.Field, error) {
	e, err := c.entity(ctx, object)
	if err != nil {
		return nil, err
	}
	attrs, err := c.attributes(ctx, e.logical)
	if err != nil {
		return nil, err
	}
	options, err := c.picklists(ctx, e.logical)
	if err != nil {
		return nil, err
	}
	fields := make([]crm.Field, 0, len(attrs))
	for _, a := range attrs {
		if !a.field() {
			continue
		}
		f := crm.Field{Object: object, Name: a.LogicalName, Label: a.DisplayName.text(a.LogicalName),
			Type:     fieldType(a.LogicalName, a.AttributeType, a.format()),
			ReadOnly: !a.IsValidForCreate && !a.IsValidForUpdate, Required: a.RequiredLevel.Value == "SystemRequired" || a.RequiredLevel.Value == "ApplicationRequired"}
		for _, o := range options[a.LogicalName] {
			f.Options = append(f.Options, o.ID)
		}
		fields = append(fields, f)
	}
	return fields, nil
}

func fieldType(name, t, format string) crm.FieldType {
	switch {
	case format == "Email" || strings.HasPrefix(name, "emailaddress"):
		return crm.TypeEmail
	case format == "Phone" || strings.HasPrefix(name, "telephone") || name == "mobilephone":
		return crm.TypePhone
	}
	switch t {
	case "Integer", "BigInt", "Decimal", "Double", "Money":
		return crm.TypeNumber
	case "Boolean":
		return crm.TypeBool
	case "DateTime":
		if format == "DateOnly" {
			return crm.TypeDate
		}
		return crm.TypeDateTime
	case "Picklist", "State", "Status", "MultiSelectPicklist":
		return crm.TypeEnum
	}
	return crm.TypeString
}

// Pipelines is the opportunity's sales stages (salesstage) as one pipeline.
func (c *Client) Pipelines(ctx context.Context) ([]crm.Pipeline, error) {
	options, err := c.picklists(ctx, "opportunity")
	if err != nil {
		return nil, err
	}
	p := crm.Pipeline{ID: "opportunity", Label: "Opportunities", Stages: slices.Clone(options["salesstage"])}
	if p.Stages == nil {
		p.Stages = []crm.Stage{}
	}
	return []crm.Pipeline{p}, nil
}

// record normalizes an entity record: scalar attributes without OData annotations.
func record(object, key string, m map[string]any) crm.Record {
	id, _ := m[key].(string)
	r := crm.Record{Object: object, ID: id, Properties: map[string]any{}}
	for k, v := range m {
		if strings.Contains(k, "@") {
			continue
		}
		switch v.(type) {
		case string, float64, bool, nil:
			r.Properties[k] = v
		}
	}
	if s, _ := m["modifiedon"].(string); s != "" {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			r.UpdatedAt = t.UTC()
		}
	}
	return r
}

// literal is an OData string literal of s.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func selectList(key string, fields []string) string {
	list := []string{key, "modifiedon"}
	for _, f := range fields {
		if !slices.Contains(list, f) {
			list = append(list, f)
		}
	}
	return strings.Join(list, ",")
}

// query builds an entity set URL with OData options; the values are encoded as a query,
// which keeps $ and , readable as Dataverse expects.
func (c *Client) query(set string, opts [][2]string) string {
	parts := make([]string, 0, len(opts))
	for _, o := range opts {
		parts = append(parts, o[0]+"="+url.QueryEscape(o[1]))
	}
	return c.api + "/" + set + "?" + strings.Join(parts, "&")
}

// values turns props into attribute values: times in RFC 3339.
func values(props map[string]any) (map[string]any, error) {
	return crmhttp.Values(props, checkNames, time.RFC3339)
}

// Upsert finds the record with $filter on key, then PATCHes it (If-Match: * so that a record
// deleted meanwhile is not recreated) or POSTs a new one, and returns it as stored.
func (c *Client) Upsert(ctx context.Context, object, key, value string, props map[string]any) (crm.Record, error) {
	e, err := c.entity(ctx, object)
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
	found, err := c.Find(ctx, object, key, value, nil)
	if err != nil && !errors.Is(err, crm.ErrNotFound) {
		return crm.Record{}, err
	}
	if err == nil {
		if !guid.MatchString(found.ID) {
			return crm.Record{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "no record id in the answer"}
		}
		return c.update(ctx, object, e, found.ID, vals)
	}
	vals[key] = value
	var out map[string]any
	if err := c.do(ctx, http.MethodPost, c.api+"/"+e.Name, vals, &out, http.Header{"Prefer": {"return=representation"}}); err != nil {
		return crm.Record{}, err
	}
	return answered(object, e, out)
}

// Update writes props to the record with that id: one PATCH with If-Match: * (without it
// Dataverse upserts: a PATCH to an id it does not have would create the record) and Prefer:
// return=representation, which answers the record. An id Dataverse does not have (deleted)
// answers 404.
func (c *Client) Update(ctx context.Context, object, id string, props map[string]any) (crm.Record, error) {
	e, err := c.entity(ctx, object)
	if err != nil {
		return crm.Record{}, err
	}
	if !guid.MatchString(id) {
		return crm.Record{}, fmt.Errorf("%w: %q is not a Dataverse id", crm.ErrNotFound, id)
	}
	vals, err := values(props)
	if err != nil {
		return crm.Record{}, err
	}
	return c.update(ctx, object, e, id, vals)
}

// update PATCHes the existing record id of e (which object named) with vals and returns it
// as answered.
func (c *Client) update(ctx context.Context, object string, e entity, id string, vals map[string]any) (crm.Record, error) {
	var out map[string]any
	h := http.Header{"Prefer": {"return=representation"}, "If-Match": {"*"}}
	if err := c.do(ctx, http.MethodPatch, c.api+"/"+e.Name+"("+id+")", vals, &out, h); err != nil {
		return crm.Record{}, err
	}
	return answered(object, e, out)
}

// answered is the record a write of e answered (Prefer: return=representation).
func answered(object string, e entity, out map[string]any) (crm.Record, error) {
	r := record(object, e.key, out)
	if !guid.MatchString(r.ID) {
		return crm.Record{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "no record id in the answer"}
	}
	return r, nil
}

// Get reads a record by id.
func (c *Client) Get(ctx context.Context, object, id string, fields []string) (crm.Record, error) {
	e, err := c.entity(ctx, object)
	if err != nil {
		return crm.Record{}, err
	}
	if !guid.MatchString(id) {
		return crm.Record{}, fmt.Errorf("%w: %q is not a Dataverse id", crm.ErrNotFound, id)
	}
	if err := checkNames(fields...); err != nil {
		return crm.Record{}, err
	}
	var out map[string]any
	u := c.api + "/" + e.Name + "(" + id + ")?$select=" + selectList(e.key, fields)
	if err := c.do(ctx, http.MethodGet, u, nil, &out, nil); err != nil {
		return crm.Record{}, err
	}
	return record(object, e.key, out), nil
}

// Find reads the record whose key equals value.
func (c *Client) Find(ctx context.Context, object, key, value string, fields []string) (crm.Record, error) {
	e, err := c.entity(ctx, object)
	if err != nil {
		return crm.Record{}, err
	}
	if err := checkNames(append([]string{key}, fields...)...); err != nil {
		return crm.Record{}, err
	}
	var out struct {
		Value []map[string]any `json:"value"`
	}
	u := c.query(e.Name, [][2]string{{"$select", selectList(e.key, fields)}, {"$filter", key + " eq " + literal(value)},
		{"$orderby", "createdon asc"}, {"$top", "1"}})
	if err := c.do(ctx, http.MethodGet, u, nil, &out, nil); err != nil {
		return crm.Record{}, err
	}
	if len(out.Value) == 0 {
		return crm.Record{}, crm.ErrNotFound
	}
	return record(object, e.key, out.Value[0]), nil
}

// ChangedSince queries records by modifiedon (whole seconds), oldest first, in pages of
// odata.maxpagesize; the cursor is the @odata.nextLink Dataverse answered, which must stay
// under this environment's entity set.
func (c *Client) ChangedSince(ctx context.Context, object string, since time.Time, fields []string, cursor string) ([]crm.Record, string, error) {
	e, err := c.entity(ctx, object)
	if err != nil {
		return nil, "", err
	}
	if err := checkNames(fields...); err != nil {
		return nil, "", err
	}
	u := cursor
	if u == "" {
		u = c.query(e.Name, [][2]string{{"$select", selectList(e.key, fields)},
			{"$filter", "modifiedon ge " + since.UTC().Truncate(time.Second).Format(time.RFC3339)},
			{"$orderby", "modifiedon asc," + e.key + " asc"}})
	} else if !strings.HasPrefix(cursor, c.api+"/"+e.Name+"?") {
		return nil, "", &crm.ProviderError{Status: 400, Code: "invalid_cursor", Message: "the cursor is not this environment's next link"}
	}
	var out struct {
		Value    []map[string]any `json:"value"`
		NextLink string           `json:"@odata.nextLink"`
	}
	if err := c.do(ctx, http.MethodGet, u, nil, &out, http.Header{"Prefer": {fmt.Sprintf("odata.maxpagesize=%d", pageSize)}}); err != nil {
		return nil, "", err
	}
	recs := make([]crm.Record, 0, len(out.Value))
	for _, m := range out.Value {
		recs = append(recs, record(object, e.key, m))
	}
	if out.NextLink != "" && !strings.HasPrefix(out.NextLink, c.api+"/"+e.Name+"?") {
		return nil, "", &crm.ProviderError{Status: 200, Code: "bad_response", Message: "a next link outside the environment"}
	}
	return recs, out.NextLink, nil
}

// AddNote creates an annotation regarding the record; its subject is the text's first line.
func (c *Client) AddNote(ctx context.Context, object, id, text string) error {
	e, err := c.entity(ctx, object)
	if err != nil {
		return err
	}
	if !guid.MatchString(id) {
		return fmt.Errorf("%w: %q is not a Dataverse id", crm.ErrNotFound, id)
	}
	subject, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	subject = crmhttp.Truncate(strings.TrimSpace(subject), 500)
	if subject == "" {
		subject = "Conversation"
	}
	note := map[string]any{"subject": subject, "notetext": crmhttp.Truncate(text, maxNoteText),
		"objectid_" + e.logical + "@odata.bind": "/" + e.Name + "(" + id + ")"}
	return c.do(ctx, http.MethodPost, c.api+"/annotations", note, nil, nil)
}

// Revoke does nothing: Entra ID has no revocation of client-credentials tokens; access ends
// when the customer removes the application user or its secret.
func (c *Client) Revoke(context.Context) error { return nil }

// pipelineID is the one pipeline Pipelines lists: the opportunity's sales stages.
const pipelineID = "opportunity"

// dealParents are the opportunity lookups that associate a deal with a record of an entity
// set: the single-valued navigation property a create binds, whose _<name>_value a query
// filters on.
var dealParents = map[string]string{"contacts": "parentcontactid", "accounts": "parentaccountid"}

// dealOpts are what a deal is read with; the currency lookup is expanded to its ISO code in
// the same request rather than read separately.
var dealOpts = [][2]string{{"$select", "opportunityid,name,salesstage,statecode,estimatedvalue,modifiedon"},
	{"$expand", "transactioncurrencyid($select=isocurrencycode)"}}

// opportunity is an opportunity as read with dealOpts.
type opportunity struct {
	ID             string   `json:"opportunityid"`
	Name           string   `json:"name"`
	SalesStage     *int     `json:"salesstage"`
	StateCode      int      `json:"statecode"`
	EstimatedValue *float64 `json:"estimatedvalue"`
	ModifiedOn     string   `json:"modifiedon"`
	Currency       *struct {
		ISOCode string `json:"isocurrencycode"`
	} `json:"transactioncurrencyid"`
}

// deal normalizes an opportunity: statecode 0 Open, 1 Won, 2 Lost; the stage is the
// salesstage option value (empty when a user cleared it).
func (o opportunity) deal() (crm.Deal, error) {
	if !guid.MatchString(o.ID) {
		return crm.Deal{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: "no opportunityid in the answer"}
	}
	d := crm.Deal{ID: o.ID, Name: o.Name, Pipeline: pipelineID, Amount: o.EstimatedValue}
	switch o.StateCode {
	case 0:
		d.Status = crm.DealOpen
	case 1:
		d.Status = crm.DealWon
	case 2:
		d.Status = crm.DealLost
	default:
		return crm.Deal{}, &crm.ProviderError{Status: 200, Code: "bad_response", Message: fmt.Sprintf("opportunity statecode %d", o.StateCode)}
	}
	if o.SalesStage != nil {
		d.Stage = strconv.Itoa(*o.SalesStage)
	}
	// A currency without an amount says nothing: every opportunity has the base currency.
	if o.EstimatedValue != nil && o.Currency != nil {
		d.Currency = o.Currency.ISOCode
	}
	if t, err := time.Parse(time.RFC3339, o.ModifiedOn); err == nil {
		d.UpdatedAt = t.UTC()
	}
	return d, nil
}

func deals(page []opportunity) ([]crm.Deal, error) {
	out := make([]crm.Deal, 0, len(page))
	for _, o := range page {
		d, err := o.deal()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// dealParent checks the record a deal is associated with and returns its entity set and
// lookup: a connection whose contacts are leads or a custom set has no parentcontactid to
// bind.
func (c *Client) dealParent(ctx context.Context, object, id string) (entity, string, error) {
	e, err := c.entity(ctx, object)
	if err != nil {
		return entity{}, "", err
	}
	nav, ok := dealParents[e.Name]
	if !ok {
		return entity{}, "", &crm.ProviderError{Status: 400, Code: "invalid_object", Message: fmt.Sprintf("opportunities are not associated with %q", e.Name)}
	}
	if !guid.MatchString(id) {
		return entity{}, "", fmt.Errorf("%w: %q is not a Dataverse id", crm.ErrNotFound, id)
	}
	return e, nav, nil
}

// parentDeals queries the opportunities whose lookup nav is id, most recently changed first.
func (c *Client) parentDeals(ctx context.Context, nav, id, filter string, top int) ([]crm.Deal, error) {
	f := "_" + nav + "_value eq " + strings.ToLower(id)
	if filter != "" {
		f += " and " + filter
	}
	opts := append(slices.Clone(dealOpts), [2]string{"$filter", f},
		[2]string{"$orderby", "modifiedon desc,opportunityid desc"}, [2]string{"$top", strconv.Itoa(top)})
	var out struct {
		Value []opportunity `json:"value"`
	}
	if err := c.do(ctx, http.MethodGet, c.query("opportunities", opts), nil, &out, nil); err != nil {
		return nil, err
	}
	return deals(out.Value)
}

// OpenDeal queries the record's open opportunities through its lookup (parentcontactid for
// a contact, parentaccountid for an account), which Dataverse reads from its tables, not from
// a search index, and returns the most recently changed one; when there is none it creates
// one in a single POST that binds the lookup and answers the opportunity
// (return=representation). The record is not read first: a bind to a record the environment
// does not have makes the create answer 404, which is ErrNotFound. Dataverse has one
// pipeline, so every opportunity is in it. One request when an open deal exists, two when
// one is created.
func (c *Client) OpenDeal(ctx context.Context, object, contactID string, d crm.DealInput) (crm.Deal, bool, error) {
	e, nav, err := c.dealParent(ctx, object, contactID)
	if err != nil {
		return crm.Deal{}, false, err
	}
	if d.Pipeline != pipelineID {
		return crm.Deal{}, false, &crm.ProviderError{Status: 400, Code: "invalid_pipeline", Message: fmt.Sprintf("Dataverse has one pipeline, %q", pipelineID)}
	}
	stage, err := strconv.Atoi(d.Stage)
	if err != nil || stage < 0 {
		return crm.Deal{}, false, &crm.ProviderError{Status: 400, Code: "invalid_stage", Message: fmt.Sprintf("%q is not a salesstage option value", d.Stage)}
	}
	open, err := c.parentDeals(ctx, nav, contactID, "statecode eq 0", 1)
	if err != nil {
		return crm.Deal{}, false, err
	}
	if len(open) > 0 {
		return open[0], false, nil
	}
	body := map[string]any{"name": crmhttp.Truncate(d.Name, 300), "salesstage": stage,
		nav + "@odata.bind": "/" + e.Name + "(" + strings.ToLower(contactID) + ")"}
	var created opportunity
	h := http.Header{"Prefer": {"return=representation"}}
	// $select only: a new opportunity has no amount, so its currency is not shown, and a
	// create's answer is documented with $select, not $expand.
	if err := c.do(ctx, http.MethodPost, c.query("opportunities", dealOpts[:1]), body, &created, h); err != nil {
		return crm.Deal{}, false, err
	}
	deal, err := created.deal()
	return deal, err == nil, err
}

// Deals queries the record's opportunities through its lookup, at most 100, most recently
// changed first. A filter on an id the environment does not have answers an empty list, so
// an empty answer costs a second request that reads the record: ErrNotFound when it is gone.
func (c *Client) Deals(ctx context.Context, object, contactID string) ([]crm.Deal, error) {
	e, nav, err := c.dealParent(ctx, object, contactID)
	if err != nil {
		return nil, err
	}
	out, err := c.parentDeals(ctx, nav, contactID, "", 100)
	if err != nil || len(out) > 0 {
		return out, err
	}
	if err := c.do(ctx, http.MethodGet, c.api+"/"+e.Name+"("+contactID+")?$select="+e.key, nil, nil, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// DealsChangedSince queries opportunities by modifiedon (whole seconds), oldest first, in
// pages of odata.maxpagesize, with ChangedSince's cursor: the @odata.nextLink Dataverse
// answered, which must stay under this environment's opportunities. One request a page.
func (c *Client) DealsChangedSince(ctx context.Context, since time.Time, cursor string) ([]crm.Deal, string, error) {
	u := cursor
	if u == "" {
		u = c.query("opportunities", append(slices.Clone(dealOpts),
			[2]string{"$filter", "modifiedon ge " + since.UTC().Truncate(time.Second).Format(time.RFC3339)},
			[2]string{"$orderby", "modifiedon asc,opportunityid asc"}))
	} else if !strings.HasPrefix(cursor, c.api+"/opportunities?") {
		return nil, "", &crm.ProviderError{Status: 400, Code: "invalid_cursor", Message: "the cursor is not this environment's next link"}
	}
	var out struct {
		Value    []opportunity `json:"value"`
		NextLink string        `json:"@odata.nextLink"`
	}
	if err := c.do(ctx, http.MethodGet, u, nil, &out, http.Header{"Prefer": {fmt.Sprintf("odata.maxpagesize=%d", pageSize)}}); err != nil {
		return nil, "", err
	}
	if out.NextLink != "" && !strings.HasPrefix(out.NextLink, c.api+"/opportunities?") {
		return nil, "", &crm.ProviderError{Status: 200, Code: "bad_response", Message: "a next link outside the environment"}
	}
	page, err := deals(out.Value)
	if err != nil {
		return nil, "", err
	}
	return page, out.NextLink, nil
}
