// Package dynamics is a fake of Microsoft Dynamics 365 on 127.0.0.1, for tests: an Entra ID
// token endpoint for the OAuth 2.0 client-credentials grant ({tenant}/oauth2/v2.0/token) and
// the Dataverse Web API v9.2 the platform uses (WhoAmI, organizations, EntityDefinitions
// queried by EntitySetName or LogicalName or read by their key LogicalName (404 for a
// table it does not have), their attributes and picklist options,
// contacts/leads/accounts/opportunities and custom tables, new_subscribers and
// new_botevents (one without an email column), with $select,
// $filter (comparisons joined by "and"), $orderby (asc, desc), $top, $expand of a lookup and
// server-driven paging, create and update, annotations, transactioncurrencies). The
// environment URL and the login URL are the fake's one URL.
//
// It checks what they check: the tenant, client id, client secret and the scope
// "{environment}/.default" (AADSTS errors), and on every Web API call a bearer token the
// fake's Entra issued for this environment and not expired; attribute names, values against
// attribute types (an opportunity's salesstage must be one of its options), OData binds of
// annotations and of opportunity lookups (parentcontactid, parentaccountid,
// transactioncurrencyid: 404 when the bound record does not exist), what Dataverse sets on a
// create (an opportunity is open, statecode 0, in the base currency; statecode is not
// writable), and the conditions of a PATCH: If-Match makes it an update (404 for a missing
// id, 412 for another etag), If-None-Match: * a create, and neither an upsert that creates a
// missing id. It answers in the Web API's error shape
// {"error": {"code": "0x...", "message"}} and, over its limit, 429 with Retry-After
// (Dataverse's service protection limits).
package dynamics

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botplatform/api/tests/fakes/crm/crmfake"
	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// The tenant, application and organization every fake starts with.
const (
	TenantID       = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	ClientID       = "0b2a8f3c-1111-4c2d-9e8f-0123456789ab"
	ClientSecret   = "fake~dynamics~client~secret"
	OrganizationID = "b8b8c1f5-2c4e-ef11-a317-000d3a5c1234"
	OrgName        = "Demo Shop CRM"
	AppUserID      = "e2f1a0b9-3333-ef11-a317-000d3a5c9999"
	// AppUserName is the application user's domainname (systemusers), what a connection's
	// login names.
	AppUserName = "crm-bot@demoshop.onmicrosoft.com"
	// TokenTTL is how long the fake's access tokens live (Entra's are about an hour).
	TokenTTL = time.Hour
	// BaseCurrencyID is the organization's base currency (USD), the transactioncurrencyid of
	// an opportunity created without one; EURCurrencyID is a second currency (EUR) a test
	// may give an opportunity with Change("opportunities", id, {"_transactioncurrencyid_value": EURCurrencyID}).
	BaseCurrencyID = "c0a1e000-0001-ef11-a317-000d3a5c0001"
	EURCurrencyID  = "c0a1e000-0002-ef11-a317-000d3a5c0002"
	apiPath        = "/api/data/v9.2/"
	maxBody        = 1 << 20
)

type attribute struct {
	Name, Type, Label, Format string
	Options                   map[int]string
	ReadOnly                  bool
}

type entity struct {
	logical, set, key string
	attrs             []attribute
	// binds are the single-valued navigation properties a write binds ("nav@odata.bind":
	// "/set(id)") and a query expands, by the entity set they point to; the record keeps
	// the target's id as the lookup attribute _nav_value.
	binds map[string]string
	// defaults are what Dataverse sets on a create that leaves them out.
	defaults map[string]any
}

var entities = []entity{
	{"contact", "contacts", "contactid", []attribute{
		{Name: "contactid", Type: "Uniqueidentifier", Label: "Contact", ReadOnly: true},
		{Name: "firstname", Type: "String", Label: "First Name"},
		{Name: "lastname", Type: "String", Label: "Last Name"},
		{Name: "emailaddress1", Type: "String", Label: "Email", Format: "Email"},
		{Name: "telephone1", Type: "String", Label: "Business Phone", Format: "Phone"},
		{Name: "birthdate", Type: "DateTime", Label: "Birthday", Format: "DateOnly"},
		{Name: "donotemail", Type: "Boolean", Label: "Do not allow Emails"},
		{Name: "preferredcontactmethodcode", Type: "Picklist", Label: "Preferred Method of Contact", Options: map[int]string{1: "Any", 2: "Email", 3: "Phone"}},
		{Name: "new_botconversations", Type: "Integer", Label: "Bot conversations"},
		{Name: "createdon", Type: "DateTime", Label: "Created On", ReadOnly: true},
		{Name: "modifiedon", Type: "DateTime", Label: "Modified On", ReadOnly: true},
	}, nil, nil},
	{"lead", "leads", "leadid", []attribute{
		{Name: "leadid", Type: "Uniqueidentifier", Label: "Lead", ReadOnly: true},
		{Name: "firstname", Type: "String", Label: "First Name"},
		{Name: "lastname", Type: "String", Label: "Last Name"},
		{Name: "emailaddress1", Type: "String", Label: "Email", Format: "Email"},
		{Name: "createdon", Type: "DateTime", Label: "Created On", ReadOnly: true},
		{Name: "modifiedon", Type: "DateTime", Label: "Modified On", ReadOnly: true},
	}, nil, nil},
	// A custom table as a customer's maker creates it: the publisher's prefix on its names,
	// its primary key <logical>id, its primary name column new_name.
	{"new_subscriber", "new_subscribers", "new_subscriberid", []attribute{
		{Name: "new_subscriberid", Type: "Uniqueidentifier", Label: "Subscriber", ReadOnly: true},
		{Name: "new_name", Type: "String", Label: "Name"},
		{Name: "new_email", Type: "String", Label: "Email", Format: "Email"},
		{Name: "createdon", Type: "DateTime", Label: "Created On", ReadOnly: true},
		{Name: "modifiedon", Type: "DateTime", Label: "Modified On", ReadOnly: true},
	}, nil, nil},
	// A custom table no subscriber can be written to: it has no email column.
	{"new_botevent", "new_botevents", "new_boteventid", []attribute{
		{Name: "new_boteventid", Type: "Uniqueidentifier", Label: "Bot event", ReadOnly: true},
		{Name: "new_name", Type: "String", Label: "Name"},
		{Name: "createdon", Type: "DateTime", Label: "Created On", ReadOnly: true},
		{Name: "modifiedon", Type: "DateTime", Label: "Modified On", ReadOnly: true},
	}, nil, nil},
	{"account", "accounts", "accountid", []attribute{
		{Name: "accountid", Type: "Uniqueidentifier", Label: "Account", ReadOnly: true},
		{Name: "name", Type: "String", Label: "Account Name"},
		{Name: "modifiedon", Type: "DateTime", Label: "Modified On", ReadOnly: true},
	}, nil, nil},
	{"opportunity", "opportunities", "opportunityid", []attribute{
		{Name: "opportunityid", Type: "Uniqueidentifier", Label: "Opportunity", ReadOnly: true},
		{Name: "name", Type: "String", Label: "Topic"},
		{Name: "estimatedvalue", Type: "Money", Label: "Est. Revenue"},
		{Name: "salesstage", Type: "Picklist", Label: "Sales Stage", Options: map[int]string{0: "Qualify", 1: "Develop", 2: "Propose", 3: "Close"}},
		// An opportunity is closed by the WinOpportunity and LoseOpportunity actions, not by
		// a write of statecode: tests close one with Change.
		{Name: "statecode", Type: "State", Label: "Status", Options: map[int]string{0: "Open", 1: "Won", 2: "Lost"}, ReadOnly: true},
		{Name: "_parentcontactid_value", Type: "Lookup", Label: "Contact", ReadOnly: true},
		{Name: "_parentaccountid_value", Type: "Lookup", Label: "Account", ReadOnly: true},
		{Name: "_transactioncurrencyid_value", Type: "Lookup", Label: "Currency", ReadOnly: true},
		{Name: "createdon", Type: "DateTime", Label: "Created On", ReadOnly: true},
		{Name: "modifiedon", Type: "DateTime", Label: "Modified On", ReadOnly: true},
	}, map[string]string{"parentcontactid": "contacts", "parentaccountid": "accounts", "transactioncurrencyid": "transactioncurrencies"},
		map[string]any{"statecode": 0.0, "_transactioncurrencyid_value": BaseCurrencyID}},
	{"transactioncurrency", "transactioncurrencies", "transactioncurrencyid", []attribute{
		{Name: "transactioncurrencyid", Type: "Uniqueidentifier", Label: "Currency", ReadOnly: true},
		{Name: "isocurrencycode", Type: "String", Label: "Currency Code"},
		{Name: "currencyname", Type: "String", Label: "Currency Name"},
		{Name: "modifiedon", Type: "DateTime", Label: "Modified On", ReadOnly: true},
	}, nil, nil},
	{"annotation", "annotations", "annotationid", []attribute{
		{Name: "annotationid", Type: "Uniqueidentifier", Label: "Note", ReadOnly: true},
		{Name: "subject", Type: "String", Label: "Title"},
		{Name: "notetext", Type: "Memo", Label: "Description"},
		{Name: "objecttypecode", Type: "EntityName", Label: "Object Type", ReadOnly: true},
		{Name: "_objectid_value", Type: "Lookup", Label: "Regarding", ReadOnly: true},
		{Name: "modifiedon", Type: "DateTime", Label: "Modified On", ReadOnly: true},
	}, nil, nil},
}

// primaryNames are the tables' primary name columns (PrimaryNameAttribute): contacts' and
// leads' fullname is composed by Dataverse from firstname and lastname.
var primaryNames = map[string]string{"contact": "fullname", "lead": "fullname", "new_subscriber": "new_name", "new_botevent": "new_name",
	"account": "name", "opportunity": "name", "transactioncurrency": "currencyname", "annotation": "subject"}

func bySet(set string) (entity, bool) {
	for _, e := range entities {
		if e.set == set {
			return e, true
		}
	}
	return entity{}, false
}

func byLogical(name string) (entity, bool) {
	for _, e := range entities {
		if e.logical == name {
			return e, true
		}
	}
	return entity{}, false
}

func (e entity) attr(name string) (attribute, bool) {
	for _, a := range e.attrs {
		if a.Name == name {
			return a, true
		}
	}
	return attribute{}, false
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	srv     *httptest.Server
	Clock   crmfake.Clock
	traffic *crmfake.Traffic
	records *crmfake.Records

	mu       sync.Mutex
	apps     map[string]string // client id -> secret
	tokens   map[string]time.Time
	ttl      time.Duration
	issued   int
	tokenErr int
}

// New starts a fake on 127.0.0.1, closed when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := newServer()
	s.srv = fakehttp.Start(t, http.HandlerFunc(s.serve))
	return s
}

// Listen starts the fake outside a test (make demo); close stops it.
func Listen() (s *Server, close func()) {
	s = newServer()
	s.srv = fakehttp.Listen(http.HandlerFunc(s.serve))
	return s, s.srv.Close
}

func newServer() *Server {
	s := &Server{apps: map[string]string{ClientID: ClientSecret}, tokens: map[string]time.Time{}, ttl: TokenTTL}
	s.traffic = crmfake.NewTraffic(&s.Clock)
	s.records = crmfake.NewRecords(&s.Clock, func(_ string, n int) string {
		return fmt.Sprintf("%08x-0000-ef11-a317-%012x", n, n)
	})
	// Put, unlike Create, takes no sequence number: the ids tests create stay as they were.
	s.records.Put("transactioncurrencies", BaseCurrencyID, map[string]any{"isocurrencycode": "USD", "currencyname": "US Dollar"})
	s.records.Put("transactioncurrencies", EURCurrencyID, map[string]any{"isocurrencycode": "EUR", "currencyname": "Euro"})
	return s
}

// URL is the environment URL (https://<org>.crm.dynamics.com) and the login URL
// (https://login.microsoftonline.com).
func (s *Server) URL() string { return s.srv.URL }

// SetTokenTTL sets the lifetime of the tokens issued from now on.
func (s *Server) SetTokenTTL(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ttl = d
}

// ExpireTokens expires every token issued so far.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t := range s.tokens {
		s.tokens[t] = time.Time{}
	}
}

// TokensIssued counts the tokens the token endpoint issued.
func (s *Server) TokensIssued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issued
}

// SetRateLimit allows n Web API requests per window; n <= 0 lifts it.
func (s *Server) SetRateLimit(n int, window time.Duration) { s.traffic.SetLimit(n, window) }

// FailNext makes the next n Web API requests answer status.
func (s *Server) FailNext(n, status int) { s.traffic.FailNext(n, status) }

// Requests counts the Web API requests received, refused ones included.
func (s *Server) Requests() int { return s.traffic.Requests() }

// Limited counts the Web API requests refused with 429.
func (s *Server) Limited() int { return s.traffic.Limited() }

// Records returns the records of an entity set (contacts, annotations, ...) as stored.
func (s *Server) Records(set string) []crmfake.Record { return s.records.All(set) }

// Record returns one record.
func (s *Server) Record(set, id string) (crmfake.Record, bool) { return s.records.Get(set, id) }

// Count returns how many records an entity set has.
func (s *Server) Count(set string) int { return s.records.Count(set) }

// Change sets attributes of a record as a Dynamics user would, moving its modifiedon.
func (s *Server) Change(set, id string, props map[string]any) bool {
	_, ok := s.records.Update(set, id, props)
	return ok
}

// Delete deletes a record as a Dynamics user would: reads of its id answer 404, an update
// with If-Match 404, and a PATCH without If-Match creates it again.
func (s *Server) Delete(set, id string) bool { return s.records.Delete(set, id) }

// Create adds a record as a Dynamics user would, and returns its id. What Dataverse sets on
// a create is set too: an opportunity is open (statecode 0) in the base currency unless props
// say otherwise. An opportunity's contact is props["_parentcontactid_value"], its stage
// props["salesstage"] (a float64 option value); Change moves it to another stage
// ({"salesstage": 2.0}) or closes it ({"statecode": 1.0} won, {"statecode": 2.0} lost).
func (s *Server) Create(set string, props map[string]any) string {
	e, _ := bySet(set)
	return s.records.Create(set, withDefaults(e, props)).ID
}

// withDefaults is props with e's defaults for what props leaves out.
func withDefaults(e entity, props map[string]any) map[string]any {
	out := maps.Clone(props)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range e.defaults {
		if _, set := out[k]; !set {
			out[k] = v
		}
	}
	return out
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	fakehttp.WriteJSON(w, status, map[string]any{"error": map[string]any{"code": code, "message": message}})
}

var tokenPath = regexp.MustCompile(`^/([^/]+)/oauth2/v2\.0/token$`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if m := tokenPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPost {
		s.token(w, r, m[1])
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, apiPath)
	if !ok {
		http.NotFound(w, r)
		return
	}
	v := s.traffic.Admit()
	if v.Limited {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(v.RetryAfter.Seconds()))))
		writeError(w, http.StatusTooManyRequests, "0x80072322",
			fmt.Sprintf("Number of requests exceeded the limit of %d over time window of %d seconds.", v.Limit, int(v.Window.Seconds())))
		return
	}
	if v.Fail != 0 {
		writeError(w, v.Fail, "0x80040216", "An unexpected error occurred.")
		return
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	exp, known := s.tokens[token]
	s.mu.Unlock()
	if !known || !s.Clock.Now().Before(exp) {
		w.Header().Set("WWW-Authenticate", `Bearer authorization_uri=`+s.srv.URL+`/`+TenantID+`/oauth2/authorize, resource_id=`+s.srv.URL)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.Header.Get("OData-MaxVersion") != "4.0" || r.Header.Get("OData-Version") != "4.0" {
		writeError(w, http.StatusBadRequest, "0x80060888", "OData-MaxVersion and OData-Version 4.0 headers are required")
		return
	}
	s.api(w, r, rest)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request, tenant string) {
	aad := func(status int, code, desc string) {
		s.mu.Lock()
		s.tokenErr++
		s.mu.Unlock()
		fakehttp.WriteJSON(w, status, map[string]any{"error": code, "error_description": desc, "error_codes": []int{0},
			"timestamp": s.Clock.Now().Format(time.DateTime), "trace_id": fakehttp.RandomString(16), "correlation_id": fakehttp.RandomString(16)})
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") || r.ParseForm() != nil {
		aad(http.StatusBadRequest, "invalid_request", "AADSTS900144: The request body must contain the following parameter: 'grant_type'.")
		return
	}
	f := r.PostForm
	if tenant != TenantID {
		aad(http.StatusBadRequest, "invalid_request", fmt.Sprintf("AADSTS90002: Tenant '%s' not found.", tenant))
		return
	}
	if f.Get("grant_type") != "client_credentials" {
		aad(http.StatusBadRequest, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant type.")
		return
	}
	s.mu.Lock()
	secret, known := s.apps[f.Get("client_id")]
	s.mu.Unlock()
	if !known {
		aad(http.StatusBadRequest, "unauthorized_client", "AADSTS700016: Application with identifier '"+f.Get("client_id")+"' was not found in the directory.")
		return
	}
	if f.Get("client_secret") != secret {
		aad(http.StatusUnauthorized, "invalid_client", "AADSTS7000215: Invalid client secret provided.")
		return
	}
	if f.Get("scope") != s.srv.URL+"/.default" {
		aad(http.StatusBadRequest, "invalid_scope", "AADSTS1002012: The provided value for scope "+f.Get("scope")+" is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier.")
		return
	}
	t := fakehttp.RandomString(64)
	s.mu.Lock()
	ttl := s.ttl
	s.tokens[t] = s.Clock.Now().Add(ttl)
	s.issued++
	s.mu.Unlock()
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": int(ttl.Seconds()),
		"ext_expires_in": int(ttl.Seconds()), "access_token": t})
}

var (
	guid       = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
	recordPath = regexp.MustCompile(`^(\w+)\((` + guid + `)\)$`)
	orgPath    = regexp.MustCompile(`^organizations\((` + guid + `)\)$`)
	userPath   = regexp.MustCompile(`^systemusers\((` + guid + `)\)$`)
	defPath    = regexp.MustCompile(`^EntityDefinitions\(LogicalName='(\w+)'\)$`)
	attrsPath  = regexp.MustCompile(`^EntityDefinitions\(LogicalName='(\w+)'\)/Attributes(/Microsoft\.Dynamics\.CRM\.PicklistAttributeMetadata)?$`)
	// filterRE is one comparison of a $filter and the rest after " and ", if any.
	filterRE = regexp.MustCompile(`^(\w+) (eq|ne|ge|gt|le|lt) ('(?:[^']|'')*'|[\w:.\-]+)(?: and (.+))?$`)
	guidRE   = regexp.MustCompile(`^` + guid + `$`)
	expandRE = regexp.MustCompile(`^(\w+)(?:\(\$select=(\w+(?:,\w+)*)\))?$`)
	bindRE   = regexp.MustCompile(`^/(\w+)\((` + guid + `)\)$`)
)

func (s *Server) api(w http.ResponseWriter, r *http.Request, rest string) {
	switch {
	case rest == "WhoAmI" && r.Method == http.MethodGet:
		fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"@odata.context": s.srv.URL + apiPath + "$metadata#Microsoft.Dynamics.CRM.WhoAmIResponse",
			"BusinessUnitId": "0f1e2d3c-4444-ef11-a317-000d3a5c0000", "UserId": AppUserID, "OrganizationId": OrganizationID})
	case orgPath.MatchString(rest) && r.Method == http.MethodGet:
		if orgPath.FindStringSubmatch(rest)[1] != OrganizationID {
			writeError(w, http.StatusNotFound, "0x80040217", "organization Does Not Exist")
			return
		}
		fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"organizationid": OrganizationID, "name": OrgName})
	case userPath.MatchString(rest) && r.Method == http.MethodGet:
		if userPath.FindStringSubmatch(rest)[1] != AppUserID {
			writeError(w, http.StatusNotFound, "0x80040217", "systemuser With Id = "+userPath.FindStringSubmatch(rest)[1]+" Does Not Exist")
			return
		}
		fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"systemuserid": AppUserID, "domainname": AppUserName})
	case rest == "EntityDefinitions" && r.Method == http.MethodGet:
		s.definitions(w, r)
	case defPath.MatchString(rest) && r.Method == http.MethodGet:
		s.definition(w, r, defPath.FindStringSubmatch(rest)[1])
	case attrsPath.MatchString(rest) && r.Method == http.MethodGet:
		m := attrsPath.FindStringSubmatch(rest)
		s.attributes(w, r, m[1], m[2] != "")
	case recordPath.MatchString(rest):
		m := recordPath.FindStringSubmatch(rest)
		e, ok := bySet(m[1])
		if !ok {
			writeError(w, http.StatusNotFound, "0x8006088a", "Resource not found for the segment '"+m[1]+"'.")
			return
		}
		switch r.Method {
		case http.MethodGet:
			s.get(w, r, e, m[2])
		case http.MethodPatch:
			s.write(w, r, e, m[2])
		default:
			writeError(w, http.StatusMethodNotAllowed, "0x80060888", "method not allowed")
		}
	default:
		e, ok := bySet(rest)
		if !ok {
			writeError(w, http.StatusNotFound, "0x8006088a", "Resource not found for the segment '"+rest+"'.")
			return
		}
		switch r.Method {
		case http.MethodGet:
			s.list(w, r, e)
		case http.MethodPost:
			s.write(w, r, e, "")
		default:
			writeError(w, http.StatusMethodNotAllowed, "0x80060888", "method not allowed")
		}
	}
}

func label(l string) map[string]any {
	return map[string]any{"UserLocalizedLabel": map[string]any{"Label": l, "LanguageCode": 1033}}
}

// definitionProps are the properties of an entity definition the fake answers.
var definitionProps = []string{"LogicalName", "EntitySetName", "PrimaryIdAttribute", "PrimaryNameAttribute", "DisplayName", "DisplayCollectionName"}

// definitionRow is the definition of the i-th entity with the properties sel (MetadataId
// always).
func definitionRow(i int, e entity, sel []string) map[string]any {
	all := map[string]any{"LogicalName": e.logical, "EntitySetName": e.set, "PrimaryIdAttribute": e.key, "PrimaryNameAttribute": primaryNames[e.logical],
		"DisplayName": label(e.attrs[0].Label), "DisplayCollectionName": label(e.attrs[0].Label + "s")}
	row := map[string]any{"MetadataId": fmt.Sprintf("%08x-0000-0000-0000-000000000000", i+1)}
	for _, p := range sel {
		row[p] = all[p]
	}
	return row
}

// selected checks the $select of an entity definition query: nil and a 400 written for a
// property an entity definition does not have.
func selected(w http.ResponseWriter, q url.Values) []string {
	if q.Get("$select") == "" {
		return definitionProps
	}
	sel := strings.Split(q.Get("$select"), ",")
	for _, p := range sel {
		if !slices.Contains(definitionProps, p) {
			writeError(w, http.StatusBadRequest, "0x80060888", "Could not find a property named '"+p+"' on type 'Microsoft.Dynamics.CRM.EntityMetadata'.")
			return nil
		}
	}
	return sel
}

// definition answers EntityDefinitions(LogicalName='...'), the one key of entity
// definitions: a table the environment does not have is 404 in the Web API's error shape,
// as Dataverse answers it.
func (s *Server) definition(w http.ResponseWriter, r *http.Request, logical string) {
	sel := selected(w, r.URL.Query())
	if sel == nil {
		return
	}
	for i, e := range entities {
		if e.logical == logical {
			row := definitionRow(i, e, sel)
			row["@odata.context"] = s.srv.URL + apiPath + "$metadata#EntityDefinitions(" + strings.Join(sel, ",") + ")/$entity"
			fakehttp.WriteJSON(w, http.StatusOK, row)
			return
		}
	}
	notFoundEntity(w, logical)
}

// notFoundEntity is Dataverse's answer to a metadata request of a table it does not have.
func notFoundEntity(w http.ResponseWriter, logical string) {
	writeError(w, http.StatusNotFound, "0x80040217", "Could not find entity with name "+logical)
}

// definitionsFilter is the one $filter the fake takes on EntityDefinitions: a name equal to
// a literal.
var definitionsFilter = regexp.MustCompile(`^(EntitySetName|LogicalName) eq '([^']*)'$`)

// definitions answers EntityDefinitions queried by $filter on EntitySetName or LogicalName
// with a $select of definitionProps; MetadataId is always answered. Metadata queries are not paged.
func (s *Server) definitions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	m := definitionsFilter.FindStringSubmatch(q.Get("$filter"))
	if m == nil {
		writeError(w, http.StatusBadRequest, "0x80060888", "The query parameter $filter is not supported by the fake on EntityDefinitions: "+q.Get("$filter"))
		return
	}
	sel := selected(w, q)
	if sel == nil {
		return
	}
	// A filter no definition matches is an empty list, not a 404: only the key lookup
	// (definition) answers 404.
	rows := []map[string]any{}
	for i, e := range entities {
		if m[1] == "EntitySetName" && e.set != m[2] || m[1] == "LogicalName" && e.logical != m[2] {
			continue
		}
		rows = append(rows, definitionRow(i, e, sel))
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"@odata.context": s.srv.URL + apiPath + "$metadata#EntityDefinitions(" + strings.Join(sel, ",") + ")",
		"value": rows})
}

func (s *Server) attributes(w http.ResponseWriter, r *http.Request, logical string, picklists bool) {
	e, ok := byLogical(logical)
	if !ok {
		notFoundEntity(w, logical)
		return
	}
	var out []map[string]any
	for _, a := range e.attrs {
		if picklists {
			if a.Type != "Picklist" {
				continue
			}
			var opts []map[string]any
			keys := make([]int, 0, len(a.Options))
			for k := range a.Options {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				opts = append(opts, map[string]any{"Value": k, "Label": label(a.Options[k])})
			}
			out = append(out, map[string]any{"LogicalName": a.Name, "OptionSet": map[string]any{"Options": opts}})
			continue
		}
		required := "None"
		if a.Name == "lastname" {
			required = "ApplicationRequired"
		}
		out = append(out, map[string]any{"LogicalName": a.Name, "AttributeType": a.Type, "DisplayName": label(a.Label),
			"IsValidForCreate": !a.ReadOnly, "IsValidForUpdate": !a.ReadOnly, "RequiredLevel": map[string]any{"Value": required},
			"AttributeOf": nil, "FormatName": map[string]any{"Value": cmpOr(a.Format, "Text")}})
	}
	_ = r
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"value": out})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// etag is a record's version as the Web API writes it (@odata.etag, If-Match).
func etag(rec crmfake.Record) string { return fmt.Sprintf(`W/"%d"`, rec.Updated.UnixNano()) }

// view is a record with the attributes selected (all when none), as the Web API answers it.
func view(e entity, rec crmfake.Record, sel []string) map[string]any {
	if len(sel) == 0 {
		for _, a := range e.attrs {
			sel = append(sel, a.Name)
		}
	}
	out := map[string]any{"@odata.etag": etag(rec)}
	for _, name := range sel {
		out[name] = value(e, rec, name)
	}
	return out
}

// value is an attribute of a record as stored.
func value(e entity, rec crmfake.Record, name string) any {
	switch name {
	case e.key:
		return rec.ID
	case "modifiedon":
		return rec.Updated.UTC().Format(time.RFC3339)
	case "createdon":
		return rec.Created.UTC().Format(time.RFC3339)
	}
	return rec.Props[name]
}

func selection(w http.ResponseWriter, e entity, q url.Values) ([]string, bool) {
	if q.Get("$select") == "" {
		return nil, true
	}
	sel := strings.Split(q.Get("$select"), ",")
	for _, a := range sel {
		if _, ok := e.attr(a); !ok {
			notProperty(w, e, a)
			return nil, false
		}
	}
	return sel, true
}

func notProperty(w http.ResponseWriter, e entity, name string) {
	writeError(w, http.StatusBadRequest, "0x80060888", fmt.Sprintf("Could not find a property named '%s' on type 'Microsoft.Dynamics.CRM.%s'.", name, e.logical))
}

// expansion is the single-valued navigation property a query expands, with its $select.
type expansion struct {
	nav    string
	target entity
	sel    []string
}

// expanding reads $expand: one single-valued navigation property of e, with an optional
// $select of the target's attributes (what the fake needs; Dataverse allows more).
func expanding(w http.ResponseWriter, e entity, q url.Values) (*expansion, bool) {
	x := q.Get("$expand")
	if x == "" {
		return nil, true
	}
	m := expandRE.FindStringSubmatch(x)
	if m == nil {
		writeError(w, http.StatusBadRequest, "0x80060888", "The query parameter $expand is not supported by the fake: "+x)
		return nil, false
	}
	set, ok := e.binds[m[1]]
	if !ok {
		notProperty(w, e, m[1])
		return nil, false
	}
	target, _ := bySet(set)
	ex := &expansion{nav: m[1], target: target}
	if m[2] != "" {
		ex.sel = strings.Split(m[2], ",")
		for _, a := range ex.sel {
			if _, ok := target.attr(a); !ok {
				notProperty(w, target, a)
				return nil, false
			}
		}
	}
	return ex, true
}

// answer is a record as a read or write answers it: its view with the expanded record (null
// when the lookup is empty).
func (s *Server) answer(e entity, rec crmfake.Record, sel []string, ex *expansion) map[string]any {
	out := view(e, rec, sel)
	if ex == nil {
		return out
	}
	out[ex.nav] = nil
	if id, _ := rec.Props["_"+ex.nav+"_value"].(string); id != "" {
		if t, ok := s.records.Get(ex.target.set, id); ok {
			v := view(ex.target, t, ex.sel)
			v[ex.target.key] = t.ID
			out[ex.nav] = v
		}
	}
	return out
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, e entity, id string) {
	sel, ok := selection(w, e, r.URL.Query())
	if !ok {
		return
	}
	ex, ok := expanding(w, e, r.URL.Query())
	if !ok {
		return
	}
	rec, found := s.records.Get(e.set, id)
	if !found {
		writeError(w, http.StatusNotFound, "0x80040217", fmt.Sprintf("%s With Id = %s Does Not Exist", e.logical, id))
		return
	}
	fakehttp.WriteJSON(w, http.StatusOK, s.answer(e, rec, sel, ex))
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, e entity) {
	q := r.URL.Query()
	sel, ok := selection(w, e, q)
	if !ok {
		return
	}
	ex, ok := expanding(w, e, q)
	if !ok {
		return
	}
	match := func(crmfake.Record) bool { return true }
	if f := q.Get("$filter"); f != "" {
		if match, ok = filter(w, e, f); !ok {
			return
		}
	}
	recs := s.records.Find(e.set, match)
	if ob := q.Get("$orderby"); ob != "" {
		order, ok := ordering(w, e, ob)
		if !ok {
			return
		}
		slices.SortStableFunc(recs, order)
	}
	if t := q.Get("$top"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "0x80060888", "$top must be a positive integer")
			return
		}
		recs = recs[:min(n, len(recs))]
	}
	pageSize := 5000
	if p := r.Header.Get("Prefer"); strings.Contains(p, "odata.maxpagesize=") {
		n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(strings.SplitAfter(p, "odata.maxpagesize=")[1], ",", 2)[0]))
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "0x80060888", "bad odata.maxpagesize")
			return
		}
		pageSize = min(n, 5000)
		w.Header().Set("Preference-Applied", fmt.Sprintf("odata.maxpagesize=%d", pageSize))
	}
	skip := 0
	if st := q.Get("$skiptoken"); st != "" {
		n, err := strconv.Atoi(st)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "0x80060888", "bad $skiptoken")
			return
		}
		skip = n
	}
	rows := []map[string]any{}
	for i := skip; i < len(recs) && i < skip+pageSize; i++ {
		rows = append(rows, s.answer(e, recs[i], sel, ex))
	}
	out := map[string]any{"@odata.context": s.srv.URL + apiPath + "$metadata#" + e.set, "value": rows}
	if skip+pageSize < len(recs) {
		q.Set("$skiptoken", strconv.Itoa(skip+pageSize))
		out["@odata.nextLink"] = s.srv.URL + apiPath + e.set + "?" + q.Encode()
	}
	fakehttp.WriteJSON(w, http.StatusOK, out)
}

// filter reads a $filter of comparisons joined by "and": date-times against modifiedon or
// createdon (whole seconds), text with eq (case-insensitive), ids and lookups with eq or ne
// against an unquoted GUID or null, numbers, option values and states against a number.
func filter(w http.ResponseWriter, e entity, f string) (func(crmfake.Record) bool, bool) {
	var preds []func(crmfake.Record) bool
	for f != "" {
		m := filterRE.FindStringSubmatch(f)
		if m == nil {
			writeError(w, http.StatusBadRequest, "0x80060888", "The query parameter $filter is not supported by the fake: "+f)
			return nil, false
		}
		f = m[4]
		a, known := e.attr(m[1])
		if !known {
			notProperty(w, e, m[1])
			return nil, false
		}
		op, lit := m[2], m[3]
		incompatible := func(want string) (func(crmfake.Record) bool, bool) {
			writeError(w, http.StatusBadRequest, "0x80060888", "A binary operator with incompatible types was detected: "+want+" expected")
			return nil, false
		}
		compares := func(c int) bool {
			return map[string]bool{"eq": c == 0, "ne": c != 0, "ge": c >= 0, "gt": c > 0, "le": c <= 0, "lt": c < 0}[op]
		}
		switch a.Type {
		case "DateTime":
			at, err := time.Parse(time.RFC3339, lit)
			if err != nil {
				return incompatible("DateTimeOffset")
			}
			preds = append(preds, func(rec crmfake.Record) bool {
				t := rec.Updated
				if a.Name == "createdon" {
					t = rec.Created
				}
				return compares(t.Truncate(time.Second).Compare(at))
			})
		case "Uniqueidentifier", "Lookup":
			if op != "eq" && op != "ne" || !(lit == "null" || guidRE.MatchString(strings.ToLower(lit))) {
				return incompatible("Guid")
			}
			preds = append(preds, func(rec crmfake.Record) bool {
				v, _ := value(e, rec, a.Name).(string)
				if lit == "null" {
					return compares(strings.Compare(v, ""))
				}
				return compares(strings.Compare(strings.ToLower(v), strings.ToLower(lit)))
			})
		case "Integer", "Money", "Decimal", "Double", "BigInt", "Picklist", "State", "Status":
			want, err := strconv.ParseFloat(lit, 64)
			if err != nil {
				return incompatible("Edm.Int32")
			}
			preds = append(preds, func(rec crmfake.Record) bool {
				n, isNum := number(rec.Props[a.Name])
				return isNum && compares(cmp.Compare(n, want))
			})
		default:
			if op != "eq" || !strings.HasPrefix(lit, "'") {
				writeError(w, http.StatusBadRequest, "0x80060888", "the fake compares text attributes with eq only")
				return nil, false
			}
			want := strings.ReplaceAll(lit[1:len(lit)-1], "''", "'")
			preds = append(preds, func(rec crmfake.Record) bool {
				v, _ := rec.Props[a.Name].(string)
				return strings.EqualFold(v, want) // Dataverse's default collation ignores case
			})
		}
	}
	return func(rec crmfake.Record) bool {
		for _, p := range preds {
			if !p(rec) {
				return false
			}
		}
		return true
	}, true
}

// number reads a stored number: float64 as JSON decodes it, or an int a test stored.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}

// ordering reads an $orderby of attributes, each asc (the default) or desc. Every entity
// orders by createdon and modifiedon.
func ordering(w http.ResponseWriter, e entity, ob string) (func(a, b crmfake.Record) int, bool) {
	type term struct {
		name string
		desc bool
	}
	var terms []term
	for _, part := range strings.Split(ob, ",") {
		name, dir, _ := strings.Cut(strings.TrimSpace(part), " ")
		if _, known := e.attr(name); !known && name != "createdon" && name != "modifiedon" {
			notProperty(w, e, name)
			return nil, false
		}
		if dir != "" && dir != "asc" && dir != "desc" {
			writeError(w, http.StatusBadRequest, "0x80060888", "Syntax error in $orderby: "+ob)
			return nil, false
		}
		terms = append(terms, term{name, dir == "desc"})
	}
	return func(a, b crmfake.Record) int {
		for _, t := range terms {
			c := compareValues(sortValue(e, a, t.name), sortValue(e, b, t.name))
			if t.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	}, true
}

// sortValue is what a record is ordered by: its times as stored (finer than the whole
// seconds a read answers), other attributes as value reads them.
func sortValue(e entity, rec crmfake.Record, name string) any {
	switch name {
	case "modifiedon":
		return rec.Updated
	case "createdon":
		return rec.Created
	}
	return value(e, rec, name)
}

// compareValues orders stored values: null first, then times, numbers or text.
func compareValues(a, b any) int {
	na, aNum := number(a)
	nb, bNum := number(b)
	ta, aTime := a.(time.Time)
	tb, bTime := b.(time.Time)
	switch {
	case aTime && bTime:
		return ta.Compare(tb)
	case aNum && bNum:
		return cmp.Compare(na, nb)
	case a == nil || b == nil:
		return cmp.Compare(btoi(a != nil), btoi(b != nil))
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// write serves POST (id empty) and PATCH of a record.
func (s *Server) write(w http.ResponseWriter, r *http.Request, e entity, id string) {
	// A write answering the record (return=representation) takes $select and $expand.
	sel, ok := selection(w, e, r.URL.Query())
	if !ok {
		return
	}
	ex, ok := expanding(w, e, r.URL.Query())
	if !ok {
		return
	}
	var in map[string]any
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err == nil {
		err = json.Unmarshal(b, &in)
	}
	if err != nil || in == nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writeError(w, http.StatusBadRequest, "0x80048d19", "Error identified in Payload provided by the user for Entity :'"+e.set+"'")
		return
	}
	props := map[string]any{}
	for k, v := range in {
		if nav, ok := strings.CutSuffix(k, "@odata.bind"); ok && e.logical == "annotation" {
			m := bindRE.FindStringSubmatch(fmt.Sprint(v))
			target, known := byLogical(strings.TrimPrefix(nav, "objectid_"))
			if !strings.HasPrefix(nav, "objectid_") || !known || m == nil || m[1] != target.set {
				writeError(w, http.StatusBadRequest, "0x80048d19", "An undeclared property '"+nav+"' which only has property annotations in the payload.")
				return
			}
			if _, found := s.records.Get(m[1], m[2]); !found {
				writeError(w, http.StatusNotFound, "0x80040217", fmt.Sprintf("%s With Id = %s Does Not Exist", target.logical, m[2]))
				return
			}
			props["_objectid_value"] = m[2]
			props["objecttypecode"] = target.logical
			continue
		}
		if nav, ok := strings.CutSuffix(k, "@odata.bind"); ok && e.binds[nav] != "" {
			// A lookup binds a record of its target entity set, which must exist.
			target, _ := bySet(e.binds[nav])
			m := bindRE.FindStringSubmatch(fmt.Sprint(v))
			if m == nil || m[1] != target.set {
				writeError(w, http.StatusBadRequest, "0x80048d19", fmt.Sprintf("Error identified in Payload provided by the user for Entity :'%s'. The navigation property '%s' expects a reference to '%s'.", e.set, nav, target.set))
				return
			}
			if _, found := s.records.Get(m[1], m[2]); !found {
				writeError(w, http.StatusNotFound, "0x80040217", fmt.Sprintf("%s With Id = %s Does Not Exist", target.logical, m[2]))
				return
			}
			props["_"+nav+"_value"] = m[2]
			continue
		}
		a, known := e.attr(k)
		if !known {
			writeError(w, http.StatusBadRequest, "0x80048d19", fmt.Sprintf("Error identified in Payload provided by the user for Entity :'%s'. The property '%s' does not exist on type 'Microsoft.Dynamics.CRM.%s'.", e.set, k, e.logical))
			return
		}
		if a.ReadOnly {
			writeError(w, http.StatusBadRequest, "0x80048d19", fmt.Sprintf("The property '%s' cannot be set.", k))
			return
		}
		if msg := checkValue(a, v); msg != "" {
			writeError(w, http.StatusBadRequest, "0x80048d19", msg)
			return
		}
		props[k] = v
	}
	var rec crmfake.Record
	status := http.StatusCreated
	ifMatch, ifNoneMatch := r.Header.Get("If-Match"), r.Header.Get("If-None-Match")
	switch {
	case id == "":
		rec = s.records.Create(e.set, withDefaults(e, props))
	case ifMatch != "":
		// An update only: 404 for an id the environment does not have, 412 when If-Match
		// names an etag other than the record's.
		cur, found := s.records.Get(e.set, id)
		if !found {
			writeError(w, http.StatusNotFound, "0x80040217", fmt.Sprintf("%s With Id = %s Does Not Exist", e.logical, id))
			return
		}
		if ifMatch != "*" && ifMatch != etag(cur) {
			writeError(w, http.StatusPreconditionFailed, "0x80060882", "The version of the existing record doesn't match the RowVersion property provided.")
			return
		}
		if rec, found = s.records.Update(e.set, id, props); !found {
			writeError(w, http.StatusNotFound, "0x80040217", fmt.Sprintf("%s With Id = %s Does Not Exist", e.logical, id))
			return
		}
		status = http.StatusOK
	case ifNoneMatch == "*":
		// A create only: 412 when the id exists.
		if _, found := s.records.Get(e.set, id); found {
			writeError(w, http.StatusPreconditionFailed, "0x80040237", "A record with matching key values already exists.")
			return
		}
		rec, _ = s.records.Put(e.set, id, withDefaults(e, props))
	default:
		// Without If-Match a PATCH is an upsert: it creates the record with that id when the
		// environment has none (what a client updating by id must prevent).
		if _, found := s.records.Get(e.set, id); !found {
			props = withDefaults(e, props)
		}
		var created bool
		if rec, created = s.records.Put(e.set, id, props); !created {
			status = http.StatusOK
		}
	}
	w.Header().Set("OData-EntityId", s.srv.URL+apiPath+e.set+"("+rec.ID+")")
	if strings.Contains(r.Header.Get("Prefer"), "return=representation") {
		fakehttp.WriteJSON(w, status, s.answer(e, rec, sel, ex))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func checkValue(a attribute, v any) string {
	if v == nil {
		return ""
	}
	bad := false
	switch a.Type {
	case "String", "Memo":
		_, isString := v.(string)
		bad = !isString
	case "Integer", "Money", "Decimal", "Double", "BigInt":
		n, isNum := v.(float64)
		bad = !isNum || (a.Type == "Integer" && n != math.Trunc(n))
	case "Boolean":
		_, isBool := v.(bool)
		bad = !isBool
	case "Picklist":
		n, isNum := v.(float64)
		_, isOption := a.Options[int(n)]
		bad = !isNum || !isOption
	case "DateTime":
		sv, _ := v.(string)
		layout := time.RFC3339
		if a.Format == "DateOnly" {
			layout = time.DateOnly
		}
		_, err := time.Parse(layout, sv)
		bad = err != nil
	}
	if bad {
		return fmt.Sprintf("Cannot convert the literal '%v' to the expected type of attribute '%s' (%s).", v, a.Name, a.Type)
	}
	return ""
}
