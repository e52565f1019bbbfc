// Package salesforce is a fake of Salesforce on 127.0.0.1, for tests: its OAuth 2.0
// authorization server (/services/oauth2/authorize, token, revoke, userinfo) and the REST
// API v60.0 the platform uses (sObject describe, create, read, update; SOQL queries with
// query locators; Note; Opportunity and OpportunityContactRole, and the Composite API that
// creates them together). It serves the login host and the org's instance on one URL, which
// the token response names as instance_url.
//
// It checks what Salesforce checks: the session (Authorization: Bearer) on every API call
// (401 INVALID_SESSION_ID), the connected app's consumer key, secret and exact callback URL,
// PKCE S256 and single-use codes; field names (INVALID_FIELD), required fields
// (REQUIRED_FIELD_MISSING), values against field types, read-only fields, references to
// records of the right object (INVALID_CROSS_REFERENCE_KEY), an opportunity's StageName
// against the active stages (INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST), deleted records
// (ENTITY_IS_DELETED), a composite request's references and its allOrNone rollback, and the
// small part of SOQL it understands (MALFORMED_QUERY otherwise). An opportunity's IsClosed
// and IsWon follow its stage, as Salesforce derives them.
// It answers in Salesforce's error shape [{"message","errorCode"}] and, over its request
// limit, 403 REQUEST_LIMIT_EXCEEDED with the Sforce-Limit-Info header, as Salesforce does (it
// sends no Retry-After).
package salesforce

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/mail"
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

// The connected app, org and user every fake starts with.
const (
	ClientID     = "3MVG9fakeSalesforceConsumerKey0123456789"
	ClientSecret = "fake-salesforce-consumer-secret"
	RedirectURI  = "https://api.example.test/api/integrations/crm/salesforce/callback"
	OrgID        = "00D5g000004FakeEAA"
	OrgName      = "Demo Shop Inc."
	UserID       = "0055g00000FakeUAAA"
	Username     = "admin@demoshop.example"
	Version      = "v60.0"
	// DailyLimit is the api-usage maximum the Sforce-Limit-Info header reports.
	DailyLimit = 15000
	maxBody    = 1 << 20
	timeLayout = "2006-01-02T15:04:05.000-0700"
)

type sfield struct {
	Name, Label, Type string
	Picklist          []string
	Required          bool // not nillable, createable, not defaulted
	ReadOnly          bool
	RefTo             string // the object a reference points to (empty: any)
}

var schema = map[string][]sfield{
	"Contact": {
		{Name: "Id", Label: "Contact ID", Type: "id", ReadOnly: true},
		{Name: "FirstName", Label: "First Name", Type: "string"},
		{Name: "LastName", Label: "Last Name", Type: "string", Required: true},
		{Name: "Email", Label: "Email", Type: "email"},
		{Name: "Phone", Label: "Business Phone", Type: "phone"},
		{Name: "Birthdate", Label: "Birthdate", Type: "date"},
		{Name: "LeadSource", Label: "Lead Source", Type: "picklist", Picklist: []string{"Web", "Phone Inquiry", "Chat"}},
		{Name: "HasOptedOutOfEmail", Label: "Email Opt Out", Type: "boolean"},
		{Name: "Bot_Conversations__c", Label: "Bot conversations", Type: "double"},
		{Name: "Bot_Channel__c", Label: "Bot channel", Type: "string"},
		{Name: "CreatedDate", Label: "Created Date", Type: "datetime", ReadOnly: true},
		{Name: "LastModifiedDate", Label: "Last Modified Date", Type: "datetime", ReadOnly: true},
		{Name: "SystemModstamp", Label: "System Modstamp", Type: "datetime", ReadOnly: true},
	},
	"Lead": {
		{Name: "Id", Label: "Lead ID", Type: "id", ReadOnly: true},
		{Name: "LastName", Label: "Last Name", Type: "string", Required: true},
		{Name: "Company", Label: "Company", Type: "string", Required: true},
		{Name: "Email", Label: "Email", Type: "email"},
		{Name: "SystemModstamp", Label: "System Modstamp", Type: "datetime", ReadOnly: true},
	},
	"Account": {
		{Name: "Id", Label: "Account ID", Type: "id", ReadOnly: true},
		{Name: "Name", Label: "Account Name", Type: "string", Required: true},
		{Name: "SystemModstamp", Label: "System Modstamp", Type: "datetime", ReadOnly: true},
	},
	"Opportunity": {
		{Name: "Id", Label: "Opportunity ID", Type: "id", ReadOnly: true},
		{Name: "Name", Label: "Name", Type: "string", Required: true},
		{Name: "StageName", Label: "Stage", Type: "picklist", Required: true, Picklist: []string{"Prospecting", "Qualification", "Closed Won", "Closed Lost"}},
		{Name: "CloseDate", Label: "Close Date", Type: "date", Required: true},
		{Name: "Amount", Label: "Amount", Type: "currency"},
		{Name: "IsClosed", Label: "Closed", Type: "boolean", ReadOnly: true},
		{Name: "IsWon", Label: "Won", Type: "boolean", ReadOnly: true},
		{Name: "SystemModstamp", Label: "System Modstamp", Type: "datetime", ReadOnly: true},
	},
	"OpportunityContactRole": {
		{Name: "Id", Label: "Contact Role ID", Type: "id", ReadOnly: true},
		{Name: "OpportunityId", Label: "Opportunity ID", Type: "reference", Required: true, RefTo: "Opportunity"},
		{Name: "ContactId", Label: "Contact ID", Type: "reference", Required: true, RefTo: "Contact"},
		{Name: "IsPrimary", Label: "Primary", Type: "boolean"},
		{Name: "Role", Label: "Role", Type: "picklist", Picklist: []string{"Business User", "Decision Maker", "Economic Buyer", "Evaluator", "Influencer", "Other"}},
		{Name: "SystemModstamp", Label: "System Modstamp", Type: "datetime", ReadOnly: true},
	},
	"Note": {
		{Name: "Id", Label: "Note ID", Type: "id", ReadOnly: true},
		{Name: "ParentId", Label: "Parent ID", Type: "reference", Required: true},
		{Name: "Title", Label: "Title", Type: "string", Required: true},
		{Name: "Body", Label: "Body", Type: "textarea"},
		{Name: "SystemModstamp", Label: "System Modstamp", Type: "datetime", ReadOnly: true},
	},
}

// prefix is the key prefix of each object's ids.
var prefix = map[string]string{"Contact": "003", "Lead": "00Q", "Account": "001", "Opportunity": "006", "Note": "002",
	"OpportunityContactRole": "00K"}

type stageRow struct {
	ApiName, MasterLabel string
	SortOrder            int
	IsActive             bool
	IsClosed, IsWon      bool
}

var stages = []stageRow{
	{ApiName: "Qualification", MasterLabel: "Qualification", SortOrder: 2, IsActive: true},
	{ApiName: "Prospecting", MasterLabel: "Prospecting", SortOrder: 1, IsActive: true},
	{ApiName: "Retired", MasterLabel: "Retired stage", SortOrder: 3},
	{ApiName: "Closed Won", MasterLabel: "Closed Won", SortOrder: 4, IsActive: true, IsClosed: true, IsWon: true},
	{ApiName: "Closed Lost", MasterLabel: "Closed Lost", SortOrder: 5, IsActive: true, IsClosed: true},
}

// stageOf returns the stage whose ApiName is a StageName value.
func stageOf(v any) (stageRow, bool) {
	name, _ := v.(string)
	for _, st := range stages {
		if st.ApiName == name {
			return st, true
		}
	}
	return stageRow{}, false
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	srv     *httptest.Server
	Clock   crmfake.Clock
	oauth   *crmfake.OAuth
	traffic *crmfake.Traffic
	records *crmfake.Records
	queries fakehttp.Log[string]

	mu      sync.Mutex
	cursors map[string][]crmfake.Record // query locator -> the rest of a query's records
	fields  map[string][]string         // query locator -> its fields
	object  map[string]string           // query locator -> its object
	batch   map[string]int
	nextCur int
	deleted map[string]bool // object/id of the records in the recycle bin
}

// New starts a fake on 127.0.0.1, closed when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := newServer()
	s.srv = fakehttp.Start(t, s.handler())
	return s
}

// Listen starts the fake outside a test (make demo); close stops it.
func Listen() (s *Server, close func()) {
	s = newServer()
	s.srv = fakehttp.Listen(s.handler())
	return s, s.srv.Close
}

func newServer() *Server {
	s := &Server{cursors: map[string][]crmfake.Record{}, fields: map[string][]string{}, object: map[string]string{}, batch: map[string]int{},
		deleted: map[string]bool{}}
	// Salesforce access tokens carry no expires_in: they die with the session (ExpireAccessTokens).
	s.oauth = crmfake.NewOAuth(&s.Clock, 0)
	s.oauth.AddApp(crmfake.App{ClientID: ClientID, ClientSecret: ClientSecret, RedirectURI: RedirectURI})
	s.traffic = crmfake.NewTraffic(&s.Clock)
	s.records = crmfake.NewRecords(&s.Clock, func(object string, n int) string {
		return fmt.Sprintf("%s5g%010dAAA", prefix[object], n) // 18 characters
	})
	return s
}

// URL is both the login URL (login.salesforce.com) and the org's instance URL.
func (s *Server) URL() string { return s.srv.URL }

// IssueToken returns a valid access and refresh token without the code flow.
func (s *Server) IssueToken() (access, refresh string) {
	t := s.oauth.Issue(ClientID)
	return t.AccessToken, t.RefreshToken
}

// ExpireAccessTokens ends every session issued so far.
func (s *Server) ExpireAccessTokens() { s.oauth.ExpireAccessTokens() }

// RefreshTokenValid reports whether a refresh token is still valid.
func (s *Server) RefreshTokenValid(token string) bool { return s.oauth.RefreshValid(token) }

// Revocations counts the grants revoked at the fake (a disconnect's revocation).
func (s *Server) Revocations() int { return s.oauth.Revocations() }

// SetRateLimit allows n API requests per window; n <= 0 lifts it.
func (s *Server) SetRateLimit(n int, window time.Duration) { s.traffic.SetLimit(n, window) }

// FailNext makes the next n API requests answer status.
func (s *Server) FailNext(n, status int) { s.traffic.FailNext(n, status) }

// Requests counts the API requests received, refused ones included.
func (s *Server) Requests() int { return s.traffic.Requests() }

// Limited counts the API requests refused for the limit.
func (s *Server) Limited() int { return s.traffic.Limited() }

// Queries returns the SOQL queries received, in order.
func (s *Server) Queries() []string { return s.queries.All() }

// Records returns the records of object as stored.
func (s *Server) Records(object string) []crmfake.Record { return s.records.All(object) }

// Record returns one record.
func (s *Server) Record(object, id string) (crmfake.Record, bool) { return s.records.Get(object, id) }

// Count returns how many records of object there are.
func (s *Server) Count(object string) int { return s.records.Count(object) }

// Change sets fields of a record as a Salesforce user would, moving its SystemModstamp.
func (s *Server) Change(object, id string, props map[string]any) bool {
	_, ok := s.records.Update(object, id, props)
	return ok
}

// Create adds a record as a Salesforce user would, and returns its id.
func (s *Server) Create(object string, props map[string]any) string {
	return s.records.Create(object, props).ID
}

// DealContacts returns the ids of the contacts an opportunity is associated with (its
// OpportunityContactRoles), in the order they were added. An opportunity's stage and amount
// are Record("Opportunity", id).Props["StageName"] and ["Amount"] (its pipeline is always
// "Opportunity"); Change("Opportunity", id, {"StageName": "Closed Lost"}) moves or closes
// it as a user would, and Count("Opportunity") counts them.
func (s *Server) DealContacts(dealID string) []string {
	var out []string
	for _, r := range s.records.Find("OpportunityContactRole", func(r crmfake.Record) bool { return r.Props["OpportunityId"] == dealID }) {
		out = append(out, fmt.Sprint(r.Props["ContactId"]))
	}
	return out
}

// Delete deletes a record as a Salesforce user would (or a merge does to the records merged
// away): it goes to the recycle bin, and reads and updates of its id answer 404
// ENTITY_IS_DELETED.
func (s *Server) Delete(object, id string) bool {
	if !s.records.Delete(object, id) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted[object+"/"+id] = true
	return true
}

// notFound answers a read or update of an id the org does not have, as Salesforce does: 404
// ENTITY_IS_DELETED for a record in the recycle bin, 404 NOT_FOUND for any other.
func (s *Server) notFound(object, id string) (int, any) {
	if s.isDeleted(object, id) {
		return http.StatusNotFound, errorBody("ENTITY_IS_DELETED", "entity is deleted")
	}
	return http.StatusNotFound, errorBody("NOT_FOUND", "Provided external ID field does not exist or is not accessible: "+id)
}

func (s *Server) isDeleted(object, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleted[object+"/"+id]
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /services/oauth2/authorize", s.authorize)
	mux.HandleFunc("POST /services/oauth2/token", s.token)
	mux.HandleFunc("POST /services/oauth2/revoke", s.revoke)
	mux.HandleFunc("GET /services/oauth2/userinfo", s.api(s.userinfo))
	p := "/services/data/" + Version
	mux.HandleFunc("GET "+p+"/query", s.api(s.query))
	mux.HandleFunc("GET "+p+"/query/{locator}", s.api(s.more))
	mux.HandleFunc("GET "+p+"/sobjects/{object}/describe", s.api(s.describe))
	mux.HandleFunc("POST "+p+"/sobjects/{object}", s.api(s.create))
	mux.HandleFunc("GET "+p+"/sobjects/{object}/{id}", s.api(s.get))
	mux.HandleFunc("PATCH "+p+"/sobjects/{object}/{id}", s.api(s.update))
	mux.HandleFunc("POST "+p+"/composite", s.api(s.composite))
	mux.HandleFunc("/", s.api(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
	}))
	return mux
}

// errorBody is Salesforce's error envelope.
func errorBody(code, message string) []map[string]any {
	return []map[string]any{{"message": message, "errorCode": code}}
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	fakehttp.WriteJSON(w, status, errorBody(code, message))
}

func (s *Server) api(h func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := s.traffic.Admit()
		if v.Limit > 0 {
			w.Header().Set("Sforce-Limit-Info", fmt.Sprintf("api-usage=%d/%d", s.traffic.Requests(), DailyLimit))
		}
		if v.Limited {
			writeError(w, http.StatusForbidden, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded.")
			return
		}
		if v.Fail != 0 {
			code := "UNKNOWN_EXCEPTION"
			if v.Fail == http.StatusServiceUnavailable {
				code = "SERVER_UNAVAILABLE"
			}
			writeError(w, v.Fail, code, "An unexpected error occurred. Please include this ErrorId if you contact support: 1234567890-1 (-1)")
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if valid, _ := s.oauth.Check(token); !ok || !valid {
			writeError(w, http.StatusUnauthorized, "INVALID_SESSION_ID", "Session expired or invalid")
			return
		}
		h(w, r)
	}
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	to, oerr := s.oauth.Authorize(r.URL.Query())
	if oerr != nil {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(oerr.Status)
		fmt.Fprintf(w, "<html><body>error=%s</body></html>", oerr.Code)
		return
	}
	http.Redirect(w, r, to, http.StatusFound)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") || r.ParseForm() != nil {
		fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request", "error_description": "form body expected"})
		return
	}
	tok, oerr := s.oauth.Exchange(r.PostForm)
	if oerr != nil {
		desc := oerr.Description
		if oerr.Code == "invalid_grant" {
			desc = "authentication failure"
		}
		// Salesforce answers 400 for every refusal of its token endpoint.
		fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": oerr.Code, "error_description": desc})
		return
	}
	issued := strconv.FormatInt(s.Clock.Now().UnixMilli(), 10)
	id := s.srv.URL + "/id/" + OrgID + "/" + UserID
	mac := hmac.New(sha256.New, []byte(ClientSecret))
	mac.Write([]byte(id + issued))
	out := map[string]any{"access_token": tok.AccessToken, "signature": base64.StdEncoding.EncodeToString(mac.Sum(nil)),
		"scope": "api refresh_token", "instance_url": s.srv.URL, "id": id, "token_type": "Bearer", "issued_at": issued}
	if tok.RefreshToken != "" {
		out["refresh_token"] = tok.RefreshToken
	}
	fakehttp.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if r.ParseForm() != nil || !s.oauth.Revoke(r.PostForm.Get("token")) {
		fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_token_type", "error_description": "this token type is not supported"})
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) userinfo(w http.ResponseWriter, _ *http.Request) {
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"sub": s.srv.URL + "/id/" + OrgID + "/" + UserID, "user_id": UserID,
		"organization_id": OrgID, "preferred_username": Username, "nickname": "admin", "name": "Demo Admin",
		"email": Username, "email_verified": true, "zoneinfo": "America/Los_Angeles", "active": true})
}

func field(object, name string) (sfield, bool) {
	for _, f := range schema[object] {
		if strings.EqualFold(f.Name, name) {
			return f, true
		}
	}
	return sfield{}, false
}

func objectOf(w http.ResponseWriter, r *http.Request) (string, bool) {
	o := r.PathValue("object")
	if _, ok := schema[o]; !ok {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
		return "", false
	}
	return o, true
}

func (s *Server) describe(w http.ResponseWriter, r *http.Request) {
	o, ok := objectOf(w, r)
	if !ok {
		return
	}
	var fields []map[string]any
	for _, f := range schema[o] {
		var picklist []map[string]any
		for _, p := range f.Picklist {
			picklist = append(picklist, map[string]any{"value": p, "label": p, "active": true, "defaultValue": false})
		}
		if f.Type == "picklist" {
			picklist = append(picklist, map[string]any{"value": "Legacy", "label": "Legacy", "active": false})
		}
		fields = append(fields, map[string]any{"name": f.Name, "label": f.Label, "type": f.Type, "updateable": !f.ReadOnly,
			"createable": !f.ReadOnly, "nillable": !f.Required && !f.ReadOnly, "defaultedOnCreate": f.ReadOnly,
			"custom": strings.HasSuffix(f.Name, "__c"), "picklistValues": picklist, "length": 255})
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"name": o, "label": o, "keyPrefix": prefix[o], "createable": true,
		"updateable": true, "queryable": true, "fields": fields})
}

// view is a record with the fields asked for (all when none), as Salesforce answers it.
func view(object string, rec crmfake.Record, fields []string) map[string]any {
	out := map[string]any{"attributes": map[string]any{"type": object, "url": "/services/data/" + Version + "/sobjects/" + object + "/" + rec.ID}}
	if len(fields) == 0 {
		for _, f := range schema[object] {
			fields = append(fields, f.Name)
		}
	}
	for _, name := range fields {
		f, _ := field(object, name)
		switch f.Name {
		case "Id":
			out["Id"] = rec.ID
		case "SystemModstamp", "LastModifiedDate":
			out[f.Name] = rec.Updated.UTC().Format(timeLayout)
		case "CreatedDate":
			out[f.Name] = rec.Created.UTC().Format(timeLayout)
		case "IsClosed":
			st, _ := stageOf(rec.Props["StageName"])
			out[f.Name] = st.IsClosed
		case "IsWon":
			st, _ := stageOf(rec.Props["StageName"])
			out[f.Name] = st.IsWon
		default:
			out[f.Name] = rec.Props[f.Name]
		}
	}
	return out
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	o, ok := objectOf(w, r)
	if !ok {
		return
	}
	status, body := s.read(o, r.PathValue("id"), r.URL.Query().Get("fields"))
	fakehttp.WriteJSON(w, status, body)
}

// read is a GET of a record with the fields listed (comma-separated; all when empty).
func (s *Server) read(object, id, list string) (int, any) {
	var fields []string
	if list != "" {
		fields = strings.Split(list, ",")
		for _, name := range fields {
			if _, ok := field(object, name); !ok {
				return http.StatusBadRequest, errorBody("INVALID_FIELD", fmt.Sprintf("No such column '%s' on sobject of type %s", name, object))
			}
		}
	}
	rec, found := s.records.Get(object, id)
	if !found {
		return s.notFound(object, id)
	}
	return http.StatusOK, view(object, rec, fields)
}

// check validates written fields; create also checks the required ones.
func (s *Server) check(object string, in map[string]any, create bool) (string, string) {
	for name, v := range in {
		f, ok := field(object, name)
		if !ok || f.Name != name {
			return "INVALID_FIELD", fmt.Sprintf("No such column '%s' on sobject of type %s", name, object)
		}
		if f.ReadOnly {
			return "INVALID_FIELD_FOR_INSERT_UPDATE", fmt.Sprintf("Unable to create/update fields: %s. Please check the security settings of this field and verify that it is read/write for your profile or permission set.", name)
		}
		if v == nil {
			if f.Required {
				return "REQUIRED_FIELD_MISSING", "Required fields are missing: [" + name + "]"
			}
			continue
		}
		bad := false
		switch f.Type {
		case "double", "currency", "percent", "int":
			_, isNum := v.(float64)
			bad = !isNum
		case "boolean":
			_, isBool := v.(bool)
			bad = !isBool
		case "date":
			sv, _ := v.(string)
			_, err := time.Parse(time.DateOnly, sv)
			bad = err != nil
		case "email":
			sv, _ := v.(string)
			a, err := mail.ParseAddress(sv)
			bad = err != nil || a.Address != sv
		case "picklist":
			if object == "Opportunity" && f.Name == "StageName" {
				// The stages are the org's OpportunityStage rows: an inactive or unknown one
				// is refused, whatever the describe's picklist says.
				if st, ok := stageOf(v); !ok || !st.IsActive {
					return "INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST", fmt.Sprintf("Stage: bad value for restricted picklist field: %v", v)
				}
				continue
			}
			bad = !slices.Contains(f.Picklist, fmt.Sprint(v))
		case "reference":
			sv, _ := v.(string)
			if code, msg := s.reference(f, sv); code != "" {
				return code, msg
			}
		default:
			_, isString := v.(string)
			bad = !isString
		}
		if bad {
			return "JSON_PARSER_ERROR", fmt.Sprintf("Cannot deserialize instance of %s from value %v for field %s", f.Type, v, name)
		}
	}
	if create {
		var missing []string
		for _, f := range schema[object] {
			if f.Required && (in[f.Name] == nil || in[f.Name] == "") {
				missing = append(missing, f.Name)
			}
		}
		if len(missing) > 0 {
			return "REQUIRED_FIELD_MISSING", "Required fields are missing: [" + strings.Join(missing, ", ") + "]"
		}
	}
	return "", ""
}

// reference checks that id names a record a reference field may point to.
func (s *Server) reference(f sfield, id string) (string, string) {
	targets := []string{f.RefTo}
	if f.RefTo == "" {
		targets = slices.Sorted(maps.Keys(schema))
	}
	for _, o := range targets {
		if _, ok := s.records.Get(o, id); ok {
			return "", ""
		}
	}
	for _, o := range targets {
		if s.isDeleted(o, id) {
			return "ENTITY_IS_DELETED", "entity is deleted"
		}
	}
	if f.RefTo != "" {
		for o := range schema {
			if _, ok := s.records.Get(o, id); ok {
				return "FIELD_INTEGRITY_EXCEPTION", fmt.Sprintf("%s: id value of incorrect type: %s", f.Label, id)
			}
		}
	}
	return "INVALID_CROSS_REFERENCE_KEY", "invalid cross reference id"
}

func decode(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	var in map[string]any
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err == nil {
		err = json.Unmarshal(b, &in)
	}
	if err != nil || in == nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writeError(w, http.StatusBadRequest, "JSON_PARSER_ERROR", "The request body is not a JSON object")
		return nil, false
	}
	return in, true
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	o, ok := objectOf(w, r)
	if !ok {
		return
	}
	in, ok := decode(w, r)
	if !ok {
		return
	}
	status, body, _ := s.insert(o, in)
	fakehttp.WriteJSON(w, status, body)
}

// insert is a POST of a record; id is the new record's.
func (s *Server) insert(object string, in map[string]any) (status int, body any, id string) {
	if code, msg := s.check(object, in, true); code != "" {
		return http.StatusBadRequest, errorBody(code, msg), ""
	}
	rec := s.records.Create(object, in)
	return http.StatusCreated, map[string]any{"id": rec.ID, "success": true, "errors": []any{}}, rec.ID
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	o, ok := objectOf(w, r)
	if !ok {
		return
	}
	in, ok := decode(w, r)
	if !ok {
		return
	}
	if code, msg := s.check(o, in, false); code != "" {
		writeError(w, http.StatusBadRequest, code, msg)
		return
	}
	if _, found := s.records.Update(o, r.PathValue("id"), in); !found {
		status, body := s.notFound(o, r.PathValue("id"))
		fakehttp.WriteJSON(w, status, body)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// soql is the part of SOQL the fake understands: one condition, an order and a limit.
var soql = regexp.MustCompile(`(?is)^SELECT\s+(.+?)\s+FROM\s+(\w+)` +
	`(?:\s+WHERE\s+(\w+)\s*(=|>=|>|<=|<)\s*('(?:[^'\\]|\\.)*'|[\w:.+\-]+))?` +
	`(?:\s+ORDER\s+BY\s+([\w\s,]+?))?(?:\s+LIMIT\s+(\d+))?\s*$`)

func unescape(lit string) string {
	lit = lit[1 : len(lit)-1]
	var b strings.Builder
	for i := 0; i < len(lit); i++ {
		if lit[i] == '\\' && i+1 < len(lit) {
			i++
			switch lit[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(lit[i])
			}
			continue
		}
		b.WriteByte(lit[i])
	}
	return b.String()
}

// contactDeals is the one semi-join the fake understands: a contact's opportunities through
// its contact roles, most recently changed first.
var contactDeals = regexp.MustCompile(`(?is)^SELECT\s+(.+?)\s+FROM\s+Opportunity\s+WHERE\s+Id\s+IN\s*\(\s*` +
	`SELECT\s+OpportunityId\s+FROM\s+OpportunityContactRole\s+WHERE\s+ContactId\s*=\s*('(?:[^'\\]|\\.)*')\s*\)` +
	`\s+ORDER\s+BY\s+SystemModstamp\s+DESC(?:\s+LIMIT\s+(\d+))?\s*$`)

// sfID is a 15- or 18-character Salesforce id.
var sfID = regexp.MustCompile(`^[A-Za-z0-9]{15}(?:[A-Za-z0-9]{3})?$`)

func splitFields(list string) []string {
	fields := strings.Split(list, ",")
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return fields
}

func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	s.queries.Add(q)
	batch := 2000
	if opt := r.Header.Get("Sforce-Query-Options"); opt != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(opt, "batchSize="))
		if err != nil || n < 200 || n > 2000 {
			writeError(w, http.StatusBadRequest, "INVALID_QUERY_FILTER_OPERATOR", "batchSize must be between 200 and 2000")
			return
		}
		batch = n
	}
	if m := contactDeals.FindStringSubmatch(q); m != nil {
		s.dealsOf(w, m, batch)
		return
	}
	m := soql.FindStringSubmatch(q)
	if m == nil {
		writeError(w, http.StatusBadRequest, "MALFORMED_QUERY", "unexpected token in query")
		return
	}
	fields := splitFields(m[1])
	object := m[2]
	switch object {
	case "OpportunityStage":
		s.stages(w, fields, m)
		return
	case "Organization":
		recs := []map[string]any{{"attributes": map[string]any{"type": "Organization"}, "Id": OrgID, "Name": OrgName}}
		fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"totalSize": 1, "done": true, "records": recs})
		return
	}
	if _, ok := schema[object]; !ok {
		writeError(w, http.StatusBadRequest, "INVALID_TYPE", fmt.Sprintf("sObject type '%s' is not supported.", object))
		return
	}
	for _, f := range append(slices.Clone(fields), m[3]) {
		if _, ok := field(object, f); f != "" && !ok {
			writeError(w, http.StatusBadRequest, "INVALID_FIELD", fmt.Sprintf("No such column '%s' on entity '%s'.", f, object))
			return
		}
	}
	var match func(crmfake.Record) bool
	switch {
	case m[3] == "":
		match = func(crmfake.Record) bool { return true }
	case strings.EqualFold(m[3], "SystemModstamp") || strings.EqualFold(m[3], "LastModifiedDate"):
		since, err := time.Parse(time.RFC3339, m[5])
		if err != nil || strings.HasPrefix(m[5], "'") {
			writeError(w, http.StatusBadRequest, "INVALID_FIELD", "value of filter criterion for field '"+m[3]+"' must be of type dateTime and should not be enclosed in quotes")
			return
		}
		op := m[4]
		match = func(rec crmfake.Record) bool {
			c := rec.Updated.Truncate(time.Second).Compare(since)
			return map[string]bool{"=": c == 0, ">=": c >= 0, ">": c > 0, "<=": c <= 0, "<": c < 0}[op]
		}
	default:
		if m[4] != "=" || !strings.HasPrefix(m[5], "'") {
			writeError(w, http.StatusBadRequest, "MALFORMED_QUERY", "the fake compares text fields with = only")
			return
		}
		f, _ := field(object, m[3])
		want := unescape(m[5])
		match = func(rec crmfake.Record) bool {
			if f.Name == "Id" {
				return rec.ID == want
			}
			v, ok := rec.Props[f.Name].(string)
			return ok && strings.EqualFold(v, want) // SOQL compares text case-insensitively
		}
	}
	recs := s.records.Find(object, match)
	if m[6] != "" {
		// Creation order stands in for any order other than by SystemModstamp.
		if order := strings.Fields(strings.ReplaceAll(m[6], ",", " ")); len(order) > 0 && strings.EqualFold(order[0], "SystemModstamp") {
			slices.SortStableFunc(recs, func(a, b crmfake.Record) int { return a.Updated.Compare(b.Updated) })
		}
	}
	if m[7] != "" {
		n, _ := strconv.Atoi(m[7])
		recs = recs[:min(n, len(recs))]
	}
	s.answer(w, object, fields, recs, batch)
}

// dealsOf answers the contactDeals query.
func (s *Server) dealsOf(w http.ResponseWriter, m []string, batch int) {
	fields := splitFields(m[1])
	for _, f := range fields {
		if _, ok := field("Opportunity", f); !ok {
			writeError(w, http.StatusBadRequest, "INVALID_FIELD", fmt.Sprintf("No such column '%s' on entity 'Opportunity'.", f))
			return
		}
	}
	contact := unescape(m[2])
	if !sfID.MatchString(contact) {
		writeError(w, http.StatusBadRequest, "INVALID_QUERY_FILTER_OPERATOR", "invalid ID field: "+contact)
		return
	}
	deals := map[string]bool{}
	for _, role := range s.records.Find("OpportunityContactRole", func(r crmfake.Record) bool { return r.Props["ContactId"] == contact }) {
		if id, ok := role.Props["OpportunityId"].(string); ok {
			deals[id] = true
		}
	}
	recs := s.records.Find("Opportunity", func(r crmfake.Record) bool { return deals[r.ID] })
	slices.SortStableFunc(recs, func(a, b crmfake.Record) int { return b.Updated.Compare(a.Updated) })
	if m[3] != "" {
		n, _ := strconv.Atoi(m[3])
		recs = recs[:min(n, len(recs))]
	}
	s.answer(w, "Opportunity", fields, recs, batch)
}

// answer writes a query's first batch and keeps the rest behind a query locator.
func (s *Server) answer(w http.ResponseWriter, object string, fields []string, recs []crmfake.Record, batch int) {
	total := len(recs)
	page := recs[:min(batch, len(recs))]
	out := map[string]any{"totalSize": total, "done": len(recs) <= batch}
	rows := []map[string]any{}
	for _, rec := range page {
		rows = append(rows, view(object, rec, fields))
	}
	out["records"] = rows
	if len(recs) > batch {
		s.mu.Lock()
		s.nextCur++
		loc := fmt.Sprintf("01g5g00000Fake%dAAA", s.nextCur)
		s.cursors[loc], s.fields[loc], s.object[loc], s.batch[loc] = recs[batch:], fields, object, batch
		s.mu.Unlock()
		out["nextRecordsUrl"] = "/services/data/" + Version + "/query/" + loc + "-" + strconv.Itoa(batch)
	}
	fakehttp.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) more(w http.ResponseWriter, r *http.Request) {
	loc, _, _ := strings.Cut(r.PathValue("locator"), "-")
	s.mu.Lock()
	recs, ok := s.cursors[loc]
	fields, object, batch := s.fields[loc], s.object[loc], s.batch[loc]
	delete(s.cursors, loc)
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "INVALID_QUERY_LOCATOR", "invalid query locator")
		return
	}
	s.answer(w, object, fields, recs, batch)
}

func (s *Server) stages(w http.ResponseWriter, fields []string, m []string) {
	rows := slices.Clone(stages)
	if m[3] != "" {
		if !strings.EqualFold(m[3], "IsActive") || m[5] != "true" {
			writeError(w, http.StatusBadRequest, "MALFORMED_QUERY", "the fake filters OpportunityStage by IsActive = true only")
			return
		}
		rows = slices.DeleteFunc(rows, func(r stageRow) bool { return !r.IsActive })
	}
	if strings.EqualFold(strings.TrimSpace(m[6]), "SortOrder") || strings.EqualFold(strings.TrimSpace(m[6]), "SortOrder ASC") {
		slices.SortFunc(rows, func(a, b stageRow) int { return a.SortOrder - b.SortOrder })
	}
	var out []map[string]any
	for _, st := range rows {
		rec := map[string]any{"attributes": map[string]any{"type": "OpportunityStage"}}
		for _, f := range fields {
			switch f {
			case "Id":
				rec[f] = "01J5g000000Fake" + strconv.Itoa(st.SortOrder)
			case "ApiName":
				rec[f] = st.ApiName
			case "MasterLabel":
				rec[f] = st.MasterLabel
			case "SortOrder":
				rec[f] = st.SortOrder
			case "IsActive":
				rec[f] = st.IsActive
			case "IsClosed":
				rec[f] = st.IsClosed
			case "IsWon":
				rec[f] = st.IsWon
			default:
				writeError(w, http.StatusBadRequest, "INVALID_FIELD", "No such column '"+f+"' on entity 'OpportunityStage'.")
				return
			}
		}
		out = append(out, rec)
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"totalSize": len(out), "done": true, "records": out})
}

// maxSubrequests is how many subrequests one composite request may hold.
const maxSubrequests = 25

// referenceID is a composite subrequest's name: letters, digits and underscores, from a letter.
var referenceID = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,79}$`)

// referenceExpr is a use of an earlier subrequest's answer, @{referenceId.field}.
var referenceExpr = regexp.MustCompile(`@\{([A-Za-z0-9_]+)\.([A-Za-z0-9_]+)\}`)

type subrequest struct {
	Method      string            `json:"method"`
	URL         string            `json:"url"`
	ReferenceID string            `json:"referenceId"`
	Body        map[string]any    `json:"body"`
	HTTPHeaders map[string]string `json:"httpHeaders"`
}

type subresponse struct {
	Body           any               `json:"body"`
	HTTPHeaders    map[string]string `json:"httpHeaders"`
	HTTPStatusCode int               `json:"httpStatusCode"`
	ReferenceID    string            `json:"referenceId"`
}

// composite serves the Composite API: subrequests in order, each able to use an earlier
// one's answer, answered 200 with each part's status and body. With allOrNone the first
// failure rolls back what the earlier parts created and every other part answers
// PROCESSING_HALTED. The fake serves the sObject create (POST) and read (GET) parts; a
// concurrent query may glimpse a record a failing composite then rolls back.
func (s *Server) composite(w http.ResponseWriter, r *http.Request) {
	var in struct {
		AllOrNone          bool         `json:"allOrNone"`
		CollateSubrequests bool         `json:"collateSubrequests"`
		CompositeRequest   []subrequest `json:"compositeRequest"`
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err = dec.Decode(&in)
	}
	if err != nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writeError(w, http.StatusBadRequest, "JSON_PARSER_ERROR", "The request body is not a composite request")
		return
	}
	subs := in.CompositeRequest
	if len(subs) == 0 || len(subs) > maxSubrequests {
		writeError(w, http.StatusBadRequest, "INVALID_API_INPUT", fmt.Sprintf("A composite request holds 1 to %d subrequests", maxSubrequests))
		return
	}
	seen := map[string]bool{}
	for _, sub := range subs {
		if !referenceID.MatchString(sub.ReferenceID) || seen[sub.ReferenceID] {
			writeError(w, http.StatusBadRequest, "INVALID_API_INPUT", "Invalid or duplicate referenceId provided in the request: "+sub.ReferenceID)
			return
		}
		seen[sub.ReferenceID] = true
	}
	out := make([]subresponse, len(subs))
	answers := map[string]map[string]any{}
	type made struct{ object, id string }
	var created []made
	failed := -1
	for i, sub := range subs {
		status, body, object, id := s.subrequest(sub, answers)
		out[i] = subresponse{Body: body, HTTPHeaders: map[string]string{}, HTTPStatusCode: status, ReferenceID: sub.ReferenceID}
		if status > 299 {
			if in.AllOrNone {
				failed = i
				break
			}
			continue
		}
		if id != "" {
			created = append(created, made{object, id})
			out[i].HTTPHeaders["Location"] = "/services/data/" + Version + "/sobjects/" + object + "/" + id
		}
		if m, ok := body.(map[string]any); ok {
			answers[sub.ReferenceID] = m
		}
	}
	if failed >= 0 {
		// Rolled back, not deleted: the records never existed, and go to no recycle bin.
		for _, c := range created {
			s.records.Delete(c.object, c.id)
		}
		halted := errorBody("PROCESSING_HALTED", "The transaction was rolled back since another operation in the same transaction failed.")
		for i, sub := range subs {
			if i != failed {
				out[i] = subresponse{Body: halted, HTTPHeaders: map[string]string{}, HTTPStatusCode: http.StatusBadRequest, ReferenceID: sub.ReferenceID}
			}
		}
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"compositeResponse": out})
}

// subrequest runs one part of a composite request; object and id name the record a create
// made.
func (s *Server) subrequest(sub subrequest, answers map[string]map[string]any) (status int, body any, object, id string) {
	missing := ""
	resolve := func(v string) string {
		return referenceExpr.ReplaceAllStringFunc(v, func(ref string) string {
			m := referenceExpr.FindStringSubmatch(ref)
			val, ok := answers[m[1]][m[2]].(string)
			if !ok && missing == "" {
				missing = m[1] + "." + m[2]
			}
			return val
		})
	}
	u := resolve(sub.URL)
	var in map[string]any
	if sub.Body != nil {
		in = map[string]any{}
		for k, v := range sub.Body {
			if sv, ok := v.(string); ok {
				v = resolve(sv)
			}
			in[k] = v
		}
	}
	if missing != "" {
		ref, _, _ := strings.Cut(missing, ".")
		return http.StatusBadRequest, errorBody("PROCESSING_HALTED", fmt.Sprintf("Invalid reference specified. No value for %s found in %s.", missing, ref)), "", ""
	}
	path, rawQuery, _ := strings.Cut(u, "?")
	rest, ok := strings.CutPrefix(path, "/services/data/"+Version+"/sobjects/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) > 2 {
		return http.StatusNotFound, errorBody("NOT_FOUND", "The requested resource does not exist"), "", ""
	}
	object = parts[0]
	if _, ok := schema[object]; !ok {
		return http.StatusNotFound, errorBody("NOT_FOUND", "The requested resource does not exist"), "", ""
	}
	switch {
	case sub.Method == http.MethodPost && len(parts) == 1 && rawQuery == "":
		if in == nil {
			return http.StatusBadRequest, errorBody("JSON_PARSER_ERROR", "The request body is not a JSON object"), "", ""
		}
		status, body, id = s.insert(object, in)
		return status, body, object, id
	case sub.Method == http.MethodGet && len(parts) == 2 && in == nil:
		q, err := url.ParseQuery(rawQuery)
		if err != nil || len(q) > 1 || (len(q) == 1 && len(q["fields"]) != 1) {
			return http.StatusBadRequest, errorBody("MALFORMED_QUERY", "the fake reads a record with ?fields= only"), "", ""
		}
		status, body = s.read(object, parts[1], q.Get("fields"))
		return status, body, "", ""
	}
	return http.StatusMethodNotAllowed, errorBody("METHOD_NOT_ALLOWED", fmt.Sprintf("HTTP Method '%s' not allowed on %s here", sub.Method, path)), "", ""
}
