// Package hubspot is a fake of HubSpot on 127.0.0.1, for tests: its OAuth 2.0 authorization
// server (/oauth/authorize as app.hubspot.com serves it, /oauth/v1/token, refresh-token
// revocation) and the CRM API the platform uses (v3 objects with search, batch read and batch
// upsert, properties, deal pipelines, deals and notes created with associations, v4
// association lists, account details). It checks what HubSpot checks: the bearer token on
// every API call (401 INVALID_AUTHENTICATION or EXPIRED_AUTHENTICATION), the app's client id,
// secret and exact redirect URI, PKCE S256, single-use codes, property names, read-only
// properties, values against property types, contact email uniqueness (on create and update),
// association types and targets, a deal's pipeline and stage (a stage of its own pipeline),
// the 10,000-result window of search; and it answers in HubSpot's error shape
// {"status":"error","message","correlationId","category"}.
//
// A test can set a rate limit (429 with the X-HubSpot-RateLimit-* headers of the
// TEN_SECONDLY_ROLLING policy), fail the next requests with 5xx, expire access tokens, add a
// pipeline, create, change or archive a record "on the CRM side" (a deal associated with a
// contact, moved to another stage or closed) and read back what was written with its
// associations. It imports nothing of the client, so that a mismatch with HubSpot shows up as
// a failing test.
package hubspot

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botplatform/api/tests/fakes/crm/crmfake"
	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// The app and portal every fake starts with.
const (
	ClientID     = "9f8e7d6c-5b4a-4321-9876-fedcba987654"
	ClientSecret = "fake-hubspot-client-secret"
	RedirectURI  = "https://api.example.test/api/integrations/crm/hubspot/callback"
	PortalID     = 62515
	// AccessTTL is how long an access token lives, as HubSpot's do (expires_in 1800).
	AccessTTL = 30 * time.Minute
	// SearchWindow is the most results a search reaches by paging.
	SearchWindow = 10000
	maxBody      = 4 << 20
)

// Association type ids of a note to the objects the fake has (HUBSPOT_DEFINED).
var noteAssociation = map[string]int{"contacts": 202, "companies": 190, "deals": 214}

// HUBSPOT_DEFINED association type ids between deals and the records they link: deal to
// record (on a deal's create, and listed from the deal) and record to deal (listed from the
// record).
var (
	dealToRecord = map[string]int{"contacts": 3, "companies": 5}
	recordToDeal = map[string]int{"contacts": 4, "companies": 342}
)

// Stage is a deal stage. HubSpot keeps isClosed and probability in its metadata and derives a
// deal's hs_is_closed and hs_is_closed_won (closed at probability 1) from them.
type Stage struct {
	ID, Label   string
	Probability float64
	Closed      bool
}

// Pipeline is a deal pipeline with its stages in display order.
type Pipeline struct {
	ID, Label string
	Stages    []Stage
}

// defaultPipeline is the pipeline every portal starts with.
func defaultPipeline() Pipeline {
	return Pipeline{ID: "default", Label: "Sales Pipeline", Stages: []Stage{
		{ID: "appointmentscheduled", Label: "Appointment Scheduled", Probability: 0.2},
		{ID: "qualifiedtobuy", Label: "Qualified To Buy", Probability: 0.4},
		{ID: "closedwon", Label: "Closed Won", Probability: 1, Closed: true},
		{ID: "closedlost", Label: "Closed Lost", Probability: 0, Closed: true},
	}}
}

type property struct {
	Name, Label, Type, FieldType string
	Options                      []string
	ReadOnly                     bool
}

// schema is each object's properties (a small part of HubSpot's defaults, plus two custom).
var schema = map[string][]property{
	"contacts": {
		{Name: "email", Label: "Email", Type: "string", FieldType: "text"},
		{Name: "firstname", Label: "First Name", Type: "string", FieldType: "text"},
		{Name: "lastname", Label: "Last Name", Type: "string", FieldType: "text"},
		{Name: "phone", Label: "Phone Number", Type: "string", FieldType: "phonenumber"},
		{Name: "lifecyclestage", Label: "Lifecycle Stage", Type: "enumeration", FieldType: "radio",
			Options: []string{"subscriber", "lead", "marketingqualifiedlead", "salesqualifiedlead", "opportunity", "customer"}},
		{Name: "date_of_birth", Label: "Date of birth", Type: "date", FieldType: "date"},
		{Name: "bot_subscribed", Label: "Bot subscribed", Type: "bool", FieldType: "booleancheckbox", Options: []string{"true", "false"}},
		{Name: "bot_conversations", Label: "Bot conversations", Type: "number", FieldType: "number"},
		{Name: "hs_object_id", Label: "Record ID", Type: "number", FieldType: "number", ReadOnly: true},
		{Name: "createdate", Label: "Create Date", Type: "datetime", FieldType: "date", ReadOnly: true},
		{Name: "lastmodifieddate", Label: "Last Modified Date", Type: "datetime", FieldType: "date", ReadOnly: true},
	},
	"companies": {
		{Name: "name", Label: "Company name", Type: "string", FieldType: "text"},
		{Name: "domain", Label: "Company Domain Name", Type: "string", FieldType: "text"},
		{Name: "hs_object_id", Label: "Record ID", Type: "number", FieldType: "number", ReadOnly: true},
		{Name: "createdate", Label: "Create Date", Type: "datetime", FieldType: "date", ReadOnly: true},
		{Name: "hs_lastmodifieddate", Label: "Last Modified Date", Type: "datetime", FieldType: "date", ReadOnly: true},
	},
	"deals": {
		{Name: "dealname", Label: "Deal Name", Type: "string", FieldType: "text"},
		{Name: "amount", Label: "Amount", Type: "number", FieldType: "number"},
		// The options of pipeline and dealstage are the pipelines' (Server.options).
		{Name: "pipeline", Label: "Pipeline", Type: "enumeration", FieldType: "select"},
		{Name: "dealstage", Label: "Deal Stage", Type: "enumeration", FieldType: "radio"},
		{Name: "deal_currency_code", Label: "Currency", Type: "enumeration", FieldType: "select", Options: []string{"USD", "EUR", "GBP"}},
		{Name: "closedate", Label: "Close Date", Type: "datetime", FieldType: "date"},
		{Name: "hs_is_closed", Label: "Is Deal Closed?", Type: "bool", FieldType: "booleancheckbox", ReadOnly: true},
		{Name: "hs_is_closed_won", Label: "Is Closed Won", Type: "bool", FieldType: "booleancheckbox", ReadOnly: true},
		{Name: "hs_object_id", Label: "Record ID", Type: "number", FieldType: "number", ReadOnly: true},
		{Name: "createdate", Label: "Create Date", Type: "datetime", FieldType: "date", ReadOnly: true},
		{Name: "hs_lastmodifieddate", Label: "Last Modified Date", Type: "datetime", FieldType: "date", ReadOnly: true},
	},
	"notes": {
		{Name: "hs_note_body", Label: "Note body", Type: "string", FieldType: "html"},
		{Name: "hs_timestamp", Label: "Activity date", Type: "datetime", FieldType: "date"},
		{Name: "hs_object_id", Label: "Record ID", Type: "number", FieldType: "number", ReadOnly: true},
		{Name: "hs_lastmodifieddate", Label: "Last Modified Date", Type: "datetime", FieldType: "date", ReadOnly: true},
	},
}

// defaultProps are the properties a read returns when none are asked for.
var defaultProps = map[string][]string{
	"contacts":  {"createdate", "email", "firstname", "hs_object_id", "lastmodifieddate", "lastname"},
	"companies": {"createdate", "domain", "hs_lastmodifieddate", "hs_object_id", "name"},
	"deals":     {"amount", "closedate", "createdate", "dealname", "dealstage", "hs_lastmodifieddate", "hs_object_id", "pipeline"},
	"notes":     {"hs_note_body", "hs_timestamp", "hs_object_id", "hs_lastmodifieddate"},
}

// Note is a note the fake received, with the record it is associated with.
type Note struct {
	ID, Body, Object, RecordID string
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	srv     *httptest.Server
	Clock   crmfake.Clock
	oauth   *crmfake.OAuth
	traffic *crmfake.Traffic
	records *crmfake.Records

	// mu guards notes, pipes and links. It is taken inside the record store's lock (a
	// search's match reads the pipelines), so the store is never called while holding it.
	mu    sync.Mutex
	notes []Note
	pipes []Pipeline
	links []link
}

// link is an association of a deal with a record (a contact or company).
type link struct {
	deal, object, id string
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
	s := &Server{pipes: []Pipeline{defaultPipeline()}}
	s.oauth = crmfake.NewOAuth(&s.Clock, AccessTTL)
	s.oauth.AddApp(crmfake.App{ClientID: ClientID, ClientSecret: ClientSecret, RedirectURI: RedirectURI})
	s.traffic = crmfake.NewTraffic(&s.Clock)
	s.records = crmfake.NewRecords(&s.Clock, func(_ string, n int) string { return strconv.Itoa(1000 + n) })
	return s
}

// URL is the fake's base URL: both the API base (api.hubapi.com) and the authorization base
// (app.hubspot.com).
func (s *Server) URL() string { return s.srv.URL }

// AddApp registers another OAuth app.
func (s *Server) AddApp(clientID, secret, redirectURI string) {
	s.oauth.AddApp(crmfake.App{ClientID: clientID, ClientSecret: secret, RedirectURI: redirectURI})
}

// IssueToken returns a valid access and refresh token of the default app, without the code flow.
func (s *Server) IssueToken() (access, refresh string) {
	t := s.oauth.Issue(ClientID)
	return t.AccessToken, t.RefreshToken
}

// ExpireAccessTokens expires every access token issued so far.
func (s *Server) ExpireAccessTokens() { s.oauth.ExpireAccessTokens() }

// RefreshTokenValid reports whether a refresh token is still valid (not revoked).
func (s *Server) RefreshTokenValid(token string) bool { return s.oauth.RefreshValid(token) }

// Revocations counts the grants revoked at the fake (a disconnect's revocation).
func (s *Server) Revocations() int { return s.oauth.Revocations() }

// TokenRequests counts calls of the token endpoint.
func (s *Server) TokenRequests() int { return s.oauth.Exchanges() }

// SetRateLimit allows n API requests per window (HubSpot's is 100 or 190 per 10 s); n <= 0
// lifts it.
func (s *Server) SetRateLimit(n int, window time.Duration) { s.traffic.SetLimit(n, window) }

// FailNext makes the next n API requests answer status (500, or 502-504 from the proxy).
func (s *Server) FailNext(n, status int) { s.traffic.FailNext(n, status) }

// Requests counts the API requests received (refused ones included); Limited those refused
// for the rate limit.
func (s *Server) Requests() int { return s.traffic.Requests() }

// Limited counts the API requests refused with 429.
func (s *Server) Limited() int { return s.traffic.Limited() }

// Records returns the records of object (contacts, companies, deals), in creation order,
// with their properties as stored (strings).
func (s *Server) Records(object string) []crmfake.Record { return s.records.All(object) }

// withEmail returns the contacts whose email is e exactly, but the one with id except:
// emails are unique among contacts. It looks them up in the store's index, since every
// create checks.
func (s *Server) withEmail(e, except string) []crmfake.Record {
	var out []crmfake.Record
	for _, rec := range s.records.FindFold("contacts", []string{"email"}, e) {
		if rec.ID != except && rec.Props["email"] == e {
			out = append(out, rec)
		}
	}
	return out
}

// Record returns one record.
func (s *Server) Record(object, id string) (crmfake.Record, bool) { return s.records.Get(object, id) }

// Count returns how many records of object there are.
func (s *Server) Count(object string) int { return s.records.Count(object) }

// Change sets properties of a record as a HubSpot user would, moving its last-modified time.
func (s *Server) Change(object, id string, props map[string]string) bool {
	p := map[string]any{}
	for k, v := range props {
		p[k] = v
	}
	_, ok := s.records.Update(object, id, p)
	return ok
}

// Create adds a record as a HubSpot user would, and returns its id.
func (s *Server) Create(object string, props map[string]string) string {
	p := map[string]any{}
	for k, v := range props {
		p[k] = v
	}
	return s.records.Create(object, p).ID
}

// Archive archives (deletes) a record as a HubSpot user would: reads and updates of its id
// answer 404 from then on.
func (s *Server) Archive(object, id string) bool { return s.records.Delete(object, id) }

// AddPipeline adds a deal pipeline (or replaces the one with its id), as a HubSpot admin
// would; stage ids must be unique across pipelines, as HubSpot's are.
func (s *Server) AddPipeline(p Pipeline) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Stages = slices.Clone(p.Stages)
	if i := slices.IndexFunc(s.pipes, func(q Pipeline) bool { return q.ID == p.ID }); i >= 0 {
		s.pipes[i] = p
		return
	}
	s.pipes = append(s.pipes, p)
}

// CreateDeal adds a deal associated with a contact as a HubSpot user would (props as stored:
// dealname, pipeline, dealstage, amount, deal_currency_code...), unchecked, and returns its id.
// Deals are records of object "deals": Records, Record, Count, Change (a stage move, a close
// to closedwon or closedlost) and Archive work on them.
func (s *Server) CreateDeal(contactID string, props map[string]string) string {
	id := s.Create("deals", props)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.links = append(s.links, link{deal: id, object: "contacts", id: contactID})
	return id
}

// Associated returns the ids of the records of object (contacts, companies) the deal is
// associated with, in the order the associations were made.
func (s *Server) Associated(dealID, object string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, l := range s.links {
		if l.deal == dealID && l.object == object {
			ids = append(ids, l.id)
		}
	}
	return ids
}

// Notes returns the notes received, in order.
func (s *Server) Notes() []Note {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.notes)
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /oauth/authorize", s.authorize)
	mux.HandleFunc("POST /oauth/v1/token", s.token)
	mux.HandleFunc("DELETE /oauth/v1/refresh-tokens/{token}", s.revoke)
	mux.HandleFunc("GET /account-info/v3/details", s.api(s.account))
	mux.HandleFunc("GET /crm/v3/properties/{object}", s.api(s.properties))
	mux.HandleFunc("GET /crm/v3/pipelines/{object}", s.api(s.pipelines))
	mux.HandleFunc("POST /crm/v3/objects/{object}/search", s.api(s.search))
	mux.HandleFunc("POST /crm/v3/objects/{object}/batch/upsert", s.api(s.batchUpsert))
	mux.HandleFunc("POST /crm/v3/objects/{object}/batch/read", s.api(s.batchRead))
	mux.HandleFunc("GET /crm/v4/objects/{object}/{id}/associations/{toObject}", s.api(s.associations))
	mux.HandleFunc("POST /crm/v3/objects/{object}", s.api(s.create))
	mux.HandleFunc("GET /crm/v3/objects/{object}/{id}", s.api(s.get))
	mux.HandleFunc("PATCH /crm/v3/objects/{object}/{id}", s.api(s.update))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "OBJECT_NOT_FOUND", "resource not found")
	})
	return mux
}

// writeError answers HubSpot's error envelope.
func writeError(w http.ResponseWriter, status int, category, message string) {
	fakehttp.WriteJSON(w, status, map[string]any{"status": "error", "message": message,
		"correlationId": "c0ffee00-" + fakehttp.RandomString(8), "category": category})
}

// api wraps an API handler with the checks every API call gets: the traffic gate (rate
// limit, injected failures) and the bearer token.
func (s *Server) api(h func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := s.traffic.Admit()
		if v.Limit > 0 {
			w.Header().Set("X-HubSpot-RateLimit-Interval-Milliseconds", strconv.FormatInt(v.Window.Milliseconds(), 10))
			w.Header().Set("X-HubSpot-RateLimit-Max", strconv.Itoa(v.Limit))
			w.Header().Set("X-HubSpot-RateLimit-Remaining", strconv.Itoa(v.Remaining))
		}
		if v.Limited {
			fakehttp.WriteJSON(w, http.StatusTooManyRequests, map[string]any{"status": "error",
				"message": "You have reached your ten_secondly_rolling limit.", "errorType": "RATE_LIMIT",
				"correlationId": "c0ffee00-" + fakehttp.RandomString(8), "policyName": "TEN_SECONDLY_ROLLING",
				"groupName": "publicapi:oauth:" + ClientID + ":" + strconv.Itoa(PortalID)})
			return
		}
		if v.Fail != 0 {
			if v.Fail >= 502 && v.Fail <= 504 {
				fakehttp.ProxyError(w, v.Fail)
			} else {
				writeError(w, v.Fail, "INTERNAL_ERROR", "internal error")
			}
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			writeError(w, http.StatusUnauthorized, "INVALID_AUTHENTICATION",
				"Authentication credentials not found. This API supports OAuth 2.0 authentication and you can find more details at https://developers.hubspot.com/docs/methods/auth/oauth-overview")
			return
		}
		if valid, expired := s.oauth.Check(token); !valid {
			if expired {
				writeError(w, http.StatusUnauthorized, "EXPIRED_AUTHENTICATION", "The OAuth token used to make this call expired.")
			} else {
				writeError(w, http.StatusUnauthorized, "INVALID_AUTHENTICATION", "Authentication credentials are invalid.")
			}
			return
		}
		h(w, r)
	}
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("scope") == "" {
		http.Error(w, "scope is required", http.StatusBadRequest)
		return
	}
	to, oerr := s.oauth.Authorize(q)
	if oerr != nil {
		// HubSpot shows an error page to the user, redirecting nowhere.
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(oerr.Status)
		fmt.Fprintf(w, "<html><body><h1>Authorization failed</h1><p>%s</p></body></html>", html.EscapeString(oerr.Description))
		return
	}
	http.Redirect(w, r, to, http.StatusFound)
}

// hubspotStatus is the "status" HubSpot's token endpoint answers for an OAuth refusal.
func hubspotStatus(e *crmfake.OAuthError, grantType string) string {
	switch {
	case e.Code == "invalid_client":
		return "BAD_CLIENT_ID"
	case e.Code == "unsupported_grant_type":
		return "BAD_GRANT_TYPE"
	case strings.Contains(e.Description, "redirect_uri"):
		return "BAD_REDIRECT_URI"
	case grantType == "refresh_token":
		return "BAD_REFRESH_TOKEN"
	}
	return "BAD_AUTH_CODE"
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]any{"status": "BAD_REQUEST", "message": "form body expected"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]any{"status": "BAD_REQUEST", "message": "unreadable form"})
		return
	}
	tok, oerr := s.oauth.Exchange(r.PostForm)
	if oerr != nil {
		fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]any{"status": hubspotStatus(oerr, r.PostForm.Get("grant_type")),
			"message": oerr.Description, "correlationId": "c0ffee00-" + fakehttp.RandomString(8)})
		return
	}
	refresh := tok.RefreshToken
	if refresh == "" {
		refresh = r.PostForm.Get("refresh_token") // HubSpot answers the same refresh token
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"token_type": "bearer", "access_token": tok.AccessToken,
		"refresh_token": refresh, "expires_in": int(tok.ExpiresIn.Seconds())})
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if !s.oauth.RefreshValid(r.PathValue("token")) {
		writeError(w, http.StatusNotFound, "OBJECT_NOT_FOUND", "refresh token not found")
		return
	}
	s.oauth.Revoke(r.PathValue("token"))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) account(w http.ResponseWriter, _ *http.Request) {
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"portalId": PortalID, "accountType": "STANDARD", "timeZone": "US/Eastern",
		"companyCurrency": "USD", "additionalCurrencies": []string{}, "utcOffset": "-05:00", "utcOffsetMilliseconds": -18000000,
		"uiDomain": "app.hubspot.com", "dataHostingLocation": "na1"})
}

// object checks the path's object type as HubSpot does.
func object(w http.ResponseWriter, r *http.Request) (string, bool) {
	o := r.PathValue("object")
	if _, ok := schema[o]; !ok {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "Unable to infer object type from: "+o)
		return "", false
	}
	return o, true
}

func (s *Server) properties(w http.ResponseWriter, r *http.Request) {
	o, ok := object(w, r)
	if !ok {
		return
	}
	results := []map[string]any{}
	for i, p := range schema[o] {
		opts := []map[string]any{}
		for j, v := range s.options(o, p) {
			opts = append(opts, map[string]any{"label": strings.ToUpper(v[:1]) + v[1:], "value": v, "displayOrder": j, "hidden": false})
		}
		results = append(results, map[string]any{"name": p.Name, "label": p.Label, "type": p.Type, "fieldType": p.FieldType,
			"groupName": o[:len(o)-1] + "information", "description": "", "options": opts, "displayOrder": i,
			"calculated": false, "hidden": false, "formField": !p.ReadOnly, "hasUniqueValue": p.Name == "hs_object_id",
			"modificationMetadata": map[string]any{"archivable": true, "readOnlyDefinition": true, "readOnlyValue": p.ReadOnly}})
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"results": results})
}

func (s *Server) pipelines(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("object") != "deals" {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "pipelines are not supported for "+r.PathValue("object"))
		return
	}
	s.mu.Lock()
	pipelines := slices.Clone(s.pipes)
	s.mu.Unlock()
	results := []map[string]any{}
	for i, p := range pipelines {
		stages := []map[string]any{}
		for j, st := range p.Stages {
			probability := strconv.FormatFloat(st.Probability, 'f', -1, 64)
			if !strings.Contains(probability, ".") {
				probability += ".0"
			}
			stages = append(stages, map[string]any{"id": st.ID, "label": st.Label, "displayOrder": j, "archived": false,
				"metadata": map[string]any{"probability": probability, "isClosed": strconv.FormatBool(st.Closed)}})
		}
		// Answered out of order: clients sort by displayOrder.
		if len(stages) > 1 {
			stages[0], stages[1] = stages[1], stages[0]
		}
		results = append(results, map[string]any{"id": p.ID, "label": p.Label, "displayOrder": i, "archived": false, "stages": stages})
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"results": results})
}

// options are an enumeration property's values; a deal's pipeline and dealstage take the
// pipelines' ids and all their stages' ids, as HubSpot's do.
func (s *Server) options(o string, p property) []string {
	if o != "deals" || (p.Name != "pipeline" && p.Name != "dealstage") {
		return p.Options
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, pl := range s.pipes {
		if p.Name == "pipeline" {
			out = append(out, pl.ID)
			continue
		}
		for _, st := range pl.Stages {
			out = append(out, st.ID)
		}
	}
	return out
}

// stage finds a stage of a pipeline.
func (s *Server) stage(pipeline, id string) (Stage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pl := range s.pipes {
		if pl.ID != pipeline {
			continue
		}
		for _, st := range pl.Stages {
			if st.ID == id {
				return st, true
			}
		}
	}
	return Stage{}, false
}

// pipelineOf is a deal's pipeline: HubSpot puts a deal written without one in the default.
func pipelineOf(props map[string]any) string {
	if p, _ := props["pipeline"].(string); p != "" {
		return p
	}
	return "default"
}

// checkStage checks that a deal's stage, after props are merged into current, belongs to its
// pipeline (HubSpot refuses a stage of another pipeline), and returns a validation message.
func (s *Server) checkStage(props, current map[string]any) string {
	merged := maps.Clone(current)
	if merged == nil {
		merged = map[string]any{}
	}
	maps.Copy(merged, props)
	stage, _ := merged["dealstage"].(string)
	if stage == "" {
		return ""
	}
	pipeline := pipelineOf(merged)
	if _, ok := s.stage(pipeline, stage); !ok {
		return fmt.Sprintf(`Property values were not valid: [{"isValid":false,"message":"%s is not a valid stage of pipeline %s","error":"INVALID_OPTION","name":"dealstage"}]`, stage, pipeline)
	}
	return ""
}

// decode reads a JSON body strictly enough to catch a client's shape mistakes.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "VALIDATION_ERROR", "Content-Type must be application/json")
		return false
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err == nil {
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "Invalid input JSON: "+err.Error())
		return false
	}
	return true
}

func findProp(o, name string) (property, bool) {
	for _, p := range schema[o] {
		if p.Name == name {
			return p, true
		}
	}
	return property{}, false
}

// checkValues validates written properties against the schema and returns them as the
// strings HubSpot stores, or a validation message.
func (s *Server) checkValues(o string, in map[string]any) (map[string]any, string) {
	out := map[string]any{}
	for name, raw := range in {
		p, ok := findProp(o, name)
		if !ok {
			return nil, fmt.Sprintf(`Property values were not valid: [{"isValid":false,"message":"Property \"%s\" does not exist","error":"PROPERTY_DOESNT_EXIST","name":"%s"}]`, name, name)
		}
		if p.ReadOnly {
			return nil, fmt.Sprintf(`Property values were not valid: [{"isValid":false,"message":"%s is a read only property; its value cannot be set.","error":"READ_ONLY_VALUE","name":"%s"}]`, name, name)
		}
		var v string
		switch x := raw.(type) {
		case string:
			v = x
		case float64:
			v = strconv.FormatFloat(x, 'f', -1, 64)
		case bool:
			v = strconv.FormatBool(x)
		case nil:
			out[name] = nil
			continue
		default:
			return nil, fmt.Sprintf(`Property values were not valid: [{"isValid":false,"message":"%s must be a scalar","error":"INVALID_VALUE","name":"%s"}]`, name, name)
		}
		bad := ""
		switch {
		case v == "":
		case p.Type == "number":
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				bad = "INVALID_DECIMAL"
			}
		case p.Type == "bool":
			if v != "true" && v != "false" {
				bad = "INVALID_BOOLEAN"
			}
		case p.Type == "enumeration":
			if !slices.Contains(s.options(o, p), v) {
				bad = "INVALID_OPTION"
			}
		case p.Type == "date":
			if _, err := time.Parse(time.DateOnly, v); err != nil {
				if _, err := strconv.ParseInt(v, 10, 64); err != nil {
					bad = "INVALID_DATE"
				}
			}
		case p.Type == "datetime":
			if _, err := time.Parse(time.RFC3339, v); err != nil {
				if _, err := strconv.ParseInt(v, 10, 64); err != nil {
					bad = "INVALID_DATE"
				}
			}
		case name == "email":
			if a, err := mail.ParseAddress(v); err != nil || a.Address != v {
				bad = "INVALID_EMAIL"
			}
			v = strings.ToLower(v)
		}
		if bad != "" {
			return nil, fmt.Sprintf(`Property values were not valid: [{"isValid":false,"message":"%q was not a valid value for %s","error":"%s","name":"%s"}]`, v, name, bad, name)
		}
		out[name] = v
	}
	return out, ""
}

// view is a record as HubSpot answers it, with the properties asked for (or the defaults).
func (s *Server) view(o string, rec crmfake.Record, props []string) map[string]any {
	if len(props) == 0 {
		props = defaultProps[o]
	}
	values := map[string]any{}
	for _, p := range props {
		if _, ok := findProp(o, p); !ok {
			continue // HubSpot leaves out properties that do not exist
		}
		values[p] = s.computed(o, rec, p)
	}
	return map[string]any{"id": rec.ID, "properties": values, "createdAt": stamp(rec.Created),
		"updatedAt": stamp(rec.Updated), "archived": false}
}

// computed is a property's value, the read-only ones derived from the record.
func (s *Server) computed(o string, rec crmfake.Record, p string) any {
	switch {
	case p == "hs_object_id":
		return rec.ID
	case p == "createdate":
		return stamp(rec.Created)
	case p == "lastmodifieddate" || p == "hs_lastmodifieddate":
		return stamp(rec.Updated)
	case o == "deals" && p == "pipeline":
		return pipelineOf(rec.Props)
	case o == "deals" && (p == "hs_is_closed" || p == "hs_is_closed_won"):
		stage, _ := rec.Props["dealstage"].(string)
		st, _ := s.stage(pipelineOf(rec.Props), stage)
		if p == "hs_is_closed_won" {
			return strconv.FormatBool(st.Closed && st.Probability == 1)
		}
		return strconv.FormatBool(st.Closed)
	}
	if v, ok := rec.Props[p]; ok {
		return v
	}
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	o, ok := object(w, r)
	if !ok {
		return
	}
	rec, found := s.records.Get(o, r.PathValue("id"))
	if !found {
		writeError(w, http.StatusNotFound, "OBJECT_NOT_FOUND", "resource not found")
		return
	}
	var props []string
	if p := r.URL.Query().Get("properties"); p != "" {
		props = strings.Split(p, ",")
	}
	fakehttp.WriteJSON(w, http.StatusOK, s.view(o, rec, props))
}

type association struct {
	To struct {
		ID string `json:"id"`
	} `json:"to"`
	Types []struct {
		AssociationCategory string `json:"associationCategory"`
		AssociationTypeID   int    `json:"associationTypeId"`
	} `json:"types"`
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	o, ok := object(w, r)
	if !ok {
		return
	}
	var in struct {
		Properties   map[string]any `json:"properties"`
		Associations []association  `json:"associations"`
	}
	if !decode(w, r, &in) {
		return
	}
	props, bad := s.checkValues(o, in.Properties)
	if bad != "" {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", bad)
		return
	}
	var links []Note
	for _, a := range in.Associations {
		if len(a.Types) != 1 || a.Types[0].AssociationCategory != "HUBSPOT_DEFINED" {
			writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "association types must be one HUBSPOT_DEFINED type")
			return
		}
		target := ""
		types := map[string]map[string]int{"notes": noteAssociation, "deals": dealToRecord}[o]
		for obj, id := range types {
			if id == a.Types[0].AssociationTypeID {
				target = obj
			}
		}
		if target == "" {
			writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", fmt.Sprintf("association type %d is not valid from %s", a.Types[0].AssociationTypeID, o))
			return
		}
		if _, found := s.records.Get(target, a.To.ID); !found {
			writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", fmt.Sprintf("%s %s does not exist", target, a.To.ID))
			return
		}
		links = append(links, Note{Object: target, RecordID: a.To.ID})
	}
	if o == "notes" {
		if props["hs_timestamp"] == nil {
			writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", `Property values were not valid: [{"isValid":false,"message":"hs_timestamp is required","error":"REQUIRED_PROPERTY","name":"hs_timestamp"}]`)
			return
		}
	}
	if o == "deals" {
		if props["pipeline"] == nil {
			props["pipeline"] = "default"
		}
		if bad := s.checkStage(props, nil); bad != "" {
			writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", bad)
			return
		}
	}
	if o == "contacts" {
		if e, _ := props["email"].(string); e != "" {
			if dup := s.withEmail(e, ""); len(dup) > 0 {
				writeError(w, http.StatusConflict, "CONFLICT", "Contact already exists. Existing ID: "+dup[0].ID)
				return
			}
		}
	}
	rec := s.records.Create(o, props)
	if o == "deals" {
		s.mu.Lock()
		for _, l := range links {
			s.links = append(s.links, link{deal: rec.ID, object: l.Object, id: l.RecordID})
		}
		s.mu.Unlock()
	}
	if o == "notes" {
		s.mu.Lock()
		for _, l := range links {
			body, _ := props["hs_note_body"].(string)
			s.notes = append(s.notes, Note{ID: rec.ID, Body: body, Object: l.Object, RecordID: l.RecordID})
		}
		s.mu.Unlock()
	}
	fakehttp.WriteJSON(w, http.StatusCreated, s.view(o, rec, keys(in.Properties)))
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	o, ok := object(w, r)
	if !ok {
		return
	}
	var in struct {
		Properties map[string]any `json:"properties"`
	}
	if !decode(w, r, &in) {
		return
	}
	props, bad := s.checkValues(o, in.Properties)
	if bad != "" {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", bad)
		return
	}
	id := r.PathValue("id")
	current, found := s.records.Get(o, id)
	if !found {
		writeError(w, http.StatusNotFound, "OBJECT_NOT_FOUND", "resource not found")
		return
	}
	if o == "deals" {
		if bad := s.checkStage(props, current.Props); bad != "" {
			writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", bad)
			return
		}
	}
	if o == "contacts" {
		// An update cannot give a contact another contact's email either.
		if e, _ := props["email"].(string); e != "" {
			if dup := s.withEmail(e, id); len(dup) > 0 {
				writeError(w, http.StatusConflict, "CONFLICT", "Contact already exists. Existing ID: "+dup[0].ID)
				return
			}
		}
	}
	rec, found := s.records.Update(o, id, props)
	if !found {
		writeError(w, http.StatusNotFound, "OBJECT_NOT_FOUND", "resource not found")
		return
	}
	fakehttp.WriteJSON(w, http.StatusOK, s.view(o, rec, keys(in.Properties)))
}

func (s *Server) batchUpsert(w http.ResponseWriter, r *http.Request) {
	o, ok := object(w, r)
	if !ok {
		return
	}
	var in struct {
		Inputs []struct {
			IDProperty string         `json:"idProperty"`
			ID         string         `json:"id"`
			Properties map[string]any `json:"properties"`
		} `json:"inputs"`
	}
	if !decode(w, r, &in) {
		return
	}
	if len(in.Inputs) == 0 || len(in.Inputs) > 100 {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "inputs must hold 1 to 100 records")
		return
	}
	started := stamp(s.Clock.Now())
	var results []map[string]any
	for _, input := range in.Inputs {
		// Only properties with unique values identify a record; email for contacts.
		if o != "contacts" || input.IDProperty != "email" {
			writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "idProperty must be a property with unique values")
			return
		}
		props, bad := s.checkValues(o, input.Properties)
		if bad == "" {
			var idVals map[string]any
			idVals, bad = s.checkValues(o, map[string]any{"email": input.ID})
			if bad == "" {
				props["email"] = idVals["email"]
			}
		}
		if bad != "" {
			writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", bad)
			return
		}
		email, _ := props["email"].(string) // checked: a string
		var rec crmfake.Record
		isNew := false
		if dup := s.withEmail(email, ""); len(dup) > 0 {
			rec, _ = s.records.Update(o, dup[0].ID, props)
		} else {
			rec, isNew = s.records.Create(o, props), true
		}
		v := s.view(o, rec, keys(props))
		v["new"] = isNew
		results = append(results, v)
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"status": "COMPLETE", "results": results,
		"startedAt": started, "completedAt": stamp(s.Clock.Now())})
}

// batchRead reads records by id. Ids HubSpot does not have (archived included) are left out
// of the results and named in an OBJECT_NOT_FOUND error of a 207 answer.
func (s *Server) batchRead(w http.ResponseWriter, r *http.Request) {
	o, ok := object(w, r)
	if !ok {
		return
	}
	var in struct {
		Properties            []string `json:"properties"`
		PropertiesWithHistory []string `json:"propertiesWithHistory"`
		IDProperty            string   `json:"idProperty"`
		Inputs                []struct {
			ID string `json:"id"`
		} `json:"inputs"`
	}
	if !decode(w, r, &in) {
		return
	}
	if len(in.Inputs) == 0 || len(in.Inputs) > 100 {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "inputs must hold 1 to 100 ids")
		return
	}
	if in.IDProperty != "" && in.IDProperty != "hs_object_id" {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "idProperty must be a property with unique values")
		return
	}
	started := stamp(s.Clock.Now())
	results := []map[string]any{}
	var missing []string
	for _, input := range in.Inputs {
		rec, found := s.records.Get(o, input.ID)
		if !found {
			missing = append(missing, input.ID)
			continue
		}
		results = append(results, s.view(o, rec, in.Properties))
	}
	out := map[string]any{"status": "COMPLETE", "results": results, "startedAt": started, "completedAt": stamp(s.Clock.Now())}
	status := http.StatusOK
	if len(missing) > 0 {
		status = http.StatusMultiStatus
		out["numErrors"] = 1
		out["errors"] = []map[string]any{{"status": "error", "category": "OBJECT_NOT_FOUND",
			"message": "Could not get some " + strings.ToUpper(strings.TrimSuffix(o, "s")) + " objects, they may be deleted or not exist. Check that ids are valid.",
			"context": map[string]any{"ids": missing}}}
	}
	fakehttp.WriteJSON(w, status, out)
}

// associations lists a record's associations to another object type (CRM v4), by ascending
// id, a page of limit (at most 500) at a time. HubSpot keeps no associations of archived
// records, and answers an empty list for a record it does not have.
func (s *Server) associations(w http.ResponseWriter, r *http.Request) {
	from, ok := object(w, r)
	if !ok {
		return
	}
	to := r.PathValue("toObject")
	if _, ok := schema[to]; !ok {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "Unable to infer object type from: "+to)
		return
	}
	q := r.URL.Query()
	limit, after := 500, 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "limit must be between 1 and 500")
			return
		}
		limit = n
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "after is not a valid paging token")
			return
		}
		after = n
	}
	id := r.PathValue("id")
	s.mu.Lock()
	links := slices.Clone(s.links)
	s.mu.Unlock()
	var ids []string
	typeID := 0
	for _, l := range links {
		switch {
		case to == "deals" && l.object == from && l.id == id:
			ids, typeID = append(ids, l.deal), recordToDeal[from]
		case from == "deals" && l.deal == id && l.object == to:
			ids, typeID = append(ids, l.id), dealToRecord[to]
		}
	}
	if _, found := s.records.Get(from, id); !found {
		ids = nil
	}
	ids = slices.DeleteFunc(ids, func(x string) bool { _, found := s.records.Get(to, x); return !found })
	slices.SortFunc(ids, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) })
	ids = slices.Compact(ids)
	results := []map[string]any{}
	for i := after; i < len(ids) && i < after+limit; i++ {
		n, _ := strconv.ParseInt(ids[i], 10, 64)
		results = append(results, map[string]any{"toObjectId": n,
			"associationTypes": []map[string]any{{"category": "HUBSPOT_DEFINED", "typeId": typeID, "label": nil}}})
	}
	out := map[string]any{"results": results}
	if after+limit < len(ids) {
		next := strconv.Itoa(after + limit)
		out["paging"] = map[string]any{"next": map[string]any{"after": next,
			"link": "?after=" + url.QueryEscape(next)}}
	}
	fakehttp.WriteJSON(w, http.StatusOK, out)
}

type filter struct {
	PropertyName string `json:"propertyName"`
	Operator     string `json:"operator"`
	Value        any    `json:"value"`
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	o, ok := object(w, r)
	if !ok {
		return
	}
	var in struct {
		FilterGroups []struct {
			Filters []filter `json:"filters"`
		} `json:"filterGroups"`
		Sorts      []json.RawMessage `json:"sorts"`
		Properties []string          `json:"properties"`
		Limit      int               `json:"limit"`
		After      string            `json:"after"`
		Query      string            `json:"query"`
	}
	if !decode(w, r, &in) {
		return
	}
	if in.Limit == 0 {
		in.Limit = 10
	}
	if in.Limit < 0 || in.Limit > 200 {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "limit must be at most 200")
		return
	}
	after := 0
	if in.After != "" {
		n, err := strconv.Atoi(in.After)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "after must be a number")
			return
		}
		after = n
	}
	if after+in.Limit > SearchWindow {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "The search API returns at most 10,000 results for a query; narrow it.")
		return
	}
	if len(in.FilterGroups) > 5 {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "at most 5 filterGroups")
		return
	}
	for _, g := range in.FilterGroups {
		for _, f := range g.Filters {
			if _, ok := findProp(o, f.PropertyName); !ok {
				writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "There was a problem with the request: property "+f.PropertyName+" does not exist")
				return
			}
		}
	}
	sortBy, desc := "hs_object_id", false
	if len(in.Sorts) > 1 {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "at most one sort")
		return
	}
	if len(in.Sorts) == 1 {
		var sort struct {
			PropertyName string `json:"propertyName"`
			Direction    string `json:"direction"`
		}
		if err := json.Unmarshal(in.Sorts[0], &sort); err != nil {
			var name string
			if json.Unmarshal(in.Sorts[0], &name) != nil {
				writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "bad sort")
				return
			}
			sort.PropertyName, sort.Direction = strings.TrimPrefix(name, "-"), map[bool]string{true: "DESCENDING"}[strings.HasPrefix(name, "-")]
		}
		if _, ok := findProp(o, sort.PropertyName); !ok {
			writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "cannot sort by "+sort.PropertyName)
			return
		}
		sortBy, desc = sort.PropertyName, sort.Direction == "DESCENDING"
	}
	// Matching records are read under the store's lock with their sort keys, once each
	// (parsing dates in every comparison, or copying every record, is slow over thousands);
	// only the page is copied out.
	type row struct {
		id    string
		n     int
		key   string
		num   float64
		isNum bool
	}
	var rows []row
	s.records.Find(o, func(rec crmfake.Record) bool {
		hit := len(in.FilterGroups) == 0
		for _, g := range in.FilterGroups {
			ok := true
			for _, f := range g.Filters {
				ok = ok && s.match(o, rec, f)
			}
			hit = hit || ok
		}
		if hit {
			r := row{id: rec.ID}
			r.n, _ = strconv.Atoi(rec.ID)
			if sortBy == "lastmodifieddate" || sortBy == "hs_lastmodifieddate" {
				r.num, r.isNum = float64(rec.Updated.UnixMilli()), true
			} else {
				k := s.computed(o, rec, sortBy)
				r.key = fmt.Sprint(k)
				r.num, r.isNum = numeric(o, sortBy, k)
			}
			rows = append(rows, r)
		}
		return false
	})
	slices.SortStableFunc(rows, func(a, b row) int {
		var c int
		if a.isNum && b.isNum {
			c = cmp.Compare(a.num, b.num)
		} else {
			c = strings.Compare(a.key, b.key)
		}
		if desc {
			c = -c
		}
		if c == 0 {
			c = a.n - b.n
		}
		return c
	})
	var all []crmfake.Record
	for i := after; i < len(rows) && i < after+in.Limit; i++ {
		if rec, ok := s.records.Get(o, rows[i].id); ok {
			all = append(all, rec)
		}
	}
	out := map[string]any{"total": len(rows)}
	results := []map[string]any{}
	for _, rec := range all {
		results = append(results, s.view(o, rec, in.Properties))
	}
	out["results"] = results
	if after+in.Limit < len(rows) {
		next := strconv.Itoa(after + in.Limit)
		out["paging"] = map[string]any{"next": map[string]any{"after": next, "link": "?after=" + url.QueryEscape(next)}}
	}
	fakehttp.WriteJSON(w, http.StatusOK, out)
}

// numeric reads a value as HubSpot compares numbers and dates (dates as epoch milliseconds).
func numeric(o, prop string, v any) (float64, bool) {
	s := fmt.Sprint(v)
	if v == nil {
		return 0, false
	}
	if p, ok := findProp(o, prop); ok && (p.Type == "datetime" || p.Type == "date") {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return float64(t.UnixMilli()), true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

func compare(o string, a, b any, prop string) int {
	fa, oka := numeric(o, prop, a)
	fb, okb := numeric(o, prop, b)
	if oka && okb {
		return cmp.Compare(fa, fb)
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func (s *Server) match(o string, rec crmfake.Record, f filter) bool {
	if (f.PropertyName == "lastmodifieddate" || f.PropertyName == "hs_lastmodifieddate") && f.Operator != "EQ" && f.Operator != "NEQ" {
		// The common sync filter, compared without formatting and parsing the time.
		want, ok := numeric(o, f.PropertyName, f.Value)
		if !ok {
			return false
		}
		c := cmp.Compare(float64(rec.Updated.UnixMilli()), want)
		return map[string]bool{"GT": c > 0, "GTE": c >= 0, "LT": c < 0, "LTE": c <= 0}[f.Operator]
	}
	v := s.computed(o, rec, f.PropertyName)
	switch f.Operator {
	case "HAS_PROPERTY":
		return v != nil && v != ""
	case "NOT_HAS_PROPERTY":
		return v == nil || v == ""
	case "EQ":
		return v != nil && strings.EqualFold(fmt.Sprint(v), fmt.Sprint(f.Value))
	case "NEQ":
		return v == nil || !strings.EqualFold(fmt.Sprint(v), fmt.Sprint(f.Value))
	case "GT", "GTE", "LT", "LTE":
		if v == nil {
			return false
		}
		c := compare(o, v, f.Value, f.PropertyName)
		return map[string]bool{"GT": c > 0, "GTE": c >= 0, "LT": c < 0, "LTE": c <= 0}[f.Operator]
	}
	return false
}
