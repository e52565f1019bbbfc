// Package salesforce is a fake of Salesforce on 127.0.0.1, for tests: its OAuth 2.0
// authorization server (/services/oauth2/authorize, token, revoke, userinfo) and the REST
// API v60.0 the platform uses (sObject describe, create, read, update; SOQL queries with
// query locators; Note). It serves the login host and the org's instance on one URL, which
// the token response names as instance_url.
//
// It checks what Salesforce checks: the session (Authorization: Bearer) on every API call
// (401 INVALID_SESSION_ID), the connected app's consumer key, secret and exact callback URL,
// PKCE S256 and single-use codes; field names (INVALID_FIELD), required fields
// (REQUIRED_FIELD_MISSING), values against field types, read-only fields, deleted records
// (ENTITY_IS_DELETED), and the small part of SOQL it understands (MALFORMED_QUERY otherwise).
// It answers in Salesforce's error shape [{"message","errorCode"}] and, over its request
// limit, 403 REQUEST_LIMIT_EXCEEDED with the Sforce-Limit-Info header, as Salesforce does (it
// sends no Retry-After).
package salesforce

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/mail"
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
var prefix = map[string]string{"Contact": "003", "Lead": "00Q", "Account": "001", "Opportunity": "006", "Note": "002"}

type stageRow struct {
	ApiName, MasterLabel string
	SortOrder            int
	IsActive             bool
}

var stages = []stageRow{
	{"Qualification", "Qualification", 2, true},
	{"Prospecting", "Prospecting", 1, true},
	{"Retired", "Retired stage", 3, false},
	{"Closed Won", "Closed Won", 4, true},
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
func (s *Server) notFound(w http.ResponseWriter, object, id string) {
	s.mu.Lock()
	deleted := s.deleted[object+"/"+id]
	s.mu.Unlock()
	if deleted {
		writeError(w, http.StatusNotFound, "ENTITY_IS_DELETED", "entity is deleted")
		return
	}
	writeError(w, http.StatusNotFound, "NOT_FOUND", "Provided external ID field does not exist or is not accessible: "+id)
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
	mux.HandleFunc("/", s.api(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
	}))
	return mux
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	fakehttp.WriteJSON(w, status, []map[string]any{{"message": message, "errorCode": code}})
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
	var fields []string
	if f := r.URL.Query().Get("fields"); f != "" {
		fields = strings.Split(f, ",")
		for _, name := range fields {
			if _, ok := field(o, name); !ok {
				writeError(w, http.StatusBadRequest, "INVALID_FIELD", fmt.Sprintf("No such column '%s' on sobject of type %s", name, o))
				return
			}
		}
	}
	rec, found := s.records.Get(o, r.PathValue("id"))
	if !found {
		s.notFound(w, o, r.PathValue("id"))
		return
	}
	fakehttp.WriteJSON(w, http.StatusOK, view(o, rec, fields))
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
			bad = !slices.Contains(f.Picklist, fmt.Sprint(v))
		case "reference":
			sv, _ := v.(string)
			found := false
			for o := range schema {
				if _, ok := s.records.Get(o, sv); ok {
					found = true
				}
			}
			if !found {
				return "INVALID_CROSS_REFERENCE_KEY", "invalid cross reference id"
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
	if code, msg := s.check(o, in, true); code != "" {
		writeError(w, http.StatusBadRequest, code, msg)
		return
	}
	rec := s.records.Create(o, in)
	fakehttp.WriteJSON(w, http.StatusCreated, map[string]any{"id": rec.ID, "success": true, "errors": []any{}})
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
		s.notFound(w, o, r.PathValue("id"))
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

func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	s.queries.Add(q)
	m := soql.FindStringSubmatch(q)
	if m == nil {
		writeError(w, http.StatusBadRequest, "MALFORMED_QUERY", "unexpected token in query")
		return
	}
	fields := strings.Split(m[1], ",")
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	object := m[2]
	batch := 2000
	if opt := r.Header.Get("Sforce-Query-Options"); opt != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(opt, "batchSize="))
		if err != nil || n < 200 || n > 2000 {
			writeError(w, http.StatusBadRequest, "INVALID_QUERY_FILTER_OPERATOR", "batchSize must be between 200 and 2000")
			return
		}
		batch = n
	}
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
			default:
				writeError(w, http.StatusBadRequest, "INVALID_FIELD", "No such column '"+f+"' on entity 'OpportunityStage'.")
				return
			}
		}
		out = append(out, rec)
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"totalSize": len(out), "done": true, "records": out})
}
