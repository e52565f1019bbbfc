// Package pipedrive is a fake of Pipedrive's API v1 on 127.0.0.1, for tests: users/me,
// persons, organizations and deals (search, create, update, read), a person's deals, their
// fields, pipelines and stages, recents and notes. It checks what Pipedrive checks: the API
// token on every call (the x-api-token header, or the api_token query parameter Pipedrive
// also accepts and which the fake logs so that tests can prove a client never puts the key in
// a URL), required fields (a person's name, a deal's title), values against field types (enum
// option ids, numbers, dates), that a deal's stage exists and belongs to its pipeline and
// that its person exists, search terms, sorts and page limits; and it answers in Pipedrive's
// envelope {"success": false, "error", "error_info", "errorCode"}.
//
// A test can set a rate limit (429 with x-ratelimit-limit, x-ratelimit-remaining and
// x-ratelimit-reset, Pipedrive's rolling-window headers), fail the next requests with 5xx,
// change a record "on the CRM side" and read back what was written. It imports nothing of the
// client.
package pipedrive

import (
	"cmp"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botplatform/api/tests/fakes/crm/crmfake"
	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// The company and user every fake starts with.
const (
	APIToken    = "0123456789abcdef0123456789abcdef01234567"
	CompanyID   = 7350001
	CompanyName = "Demo Shop Ltd"
	UserID      = 12001
	UserEmail   = "owner@demo-shop.example"
	// TimeLayout is how Pipedrive writes times (UTC, seconds).
	TimeLayout = "2006-01-02 15:04:05"
	// Currency is the company's default currency, which a deal created without one gets.
	Currency = "EUR"
	maxBody  = 1 << 20
)

// customKey is the 40-hex key Pipedrive gives a custom field.
func customKey(name string) string {
	sum := sha1.Sum([]byte(name))
	return hex.EncodeToString(sum[:])
}

// Keys of the custom fields every fake has.
var (
	KeySubscribed    = customKey("Bot subscribed")
	KeyConversations = customKey("Bot conversations")
	KeyBirthday      = customKey("Birthday")
	KeyChannel       = customKey("Bot channel")
)

type option struct {
	ID    int    `json:"id"`
	Label string `json:"label"`
}

type field struct {
	Key, Name, Type string
	Options         []option
	Mandatory, Edit bool
}

var schema = map[string][]field{
	"persons": {
		{Key: "id", Name: "ID", Type: "int"},
		{Key: "name", Name: "Name", Type: "varchar", Mandatory: true},
		{Key: "first_name", Name: "First name", Type: "varchar"},
		{Key: "last_name", Name: "Last name", Type: "varchar"},
		{Key: "email", Name: "Email", Type: "varchar"},
		{Key: "phone", Name: "Phone", Type: "phone"},
		{Key: "label", Name: "Label", Type: "enum", Options: []option{{1, "Customer"}, {2, "Hot lead"}, {3, "Cold lead"}}},
		{Key: "add_time", Name: "Person created", Type: "date"},
		{Key: "update_time", Name: "Update time", Type: "date"},
		{Key: KeySubscribed, Name: "Bot subscribed", Type: "enum", Options: []option{{31, "Yes"}, {32, "No"}}, Edit: true},
		{Key: KeyConversations, Name: "Bot conversations", Type: "double", Edit: true},
		{Key: KeyBirthday, Name: "Birthday", Type: "date", Edit: true},
		{Key: KeyChannel, Name: "Bot channel", Type: "varchar", Edit: true},
	},
	"organizations": {
		{Key: "id", Name: "ID", Type: "int"},
		{Key: "name", Name: "Name", Type: "varchar", Mandatory: true},
		{Key: "address", Name: "Address", Type: "address"},
		{Key: "update_time", Name: "Update time", Type: "date"},
	},
	"deals": {
		{Key: "id", Name: "ID", Type: "int"},
		{Key: "title", Name: "Title", Type: "varchar", Mandatory: true},
		{Key: "value", Name: "Value", Type: "monetary"},
		{Key: "currency", Name: "Currency", Type: "varchar_options"},
		{Key: "pipeline_id", Name: "Pipeline", Type: "int"},
		{Key: "stage_id", Name: "Stage", Type: "stage"},
		{Key: "status", Name: "Status", Type: "status"},
		{Key: "person_id", Name: "Contact person", Type: "people"},
		{Key: "expected_close_date", Name: "Expected close date", Type: "date"},
		{Key: "update_time", Name: "Update time", Type: "date"},
	},
}

// fieldsPath is the fields endpoint of each object.
var fieldsPath = map[string]string{"personFields": "persons", "organizationFields": "organizations", "dealFields": "deals"}

// recentsItem is the recents item type of each object.
var recentsItem = map[string]string{"person": "persons", "organization": "organizations", "deal": "deals"}

// Note is a note the fake received.
type Note struct {
	ID       int
	Content  string
	Object   string
	RecordID int
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	srv     *httptest.Server
	Clock   crmfake.Clock
	traffic *crmfake.Traffic
	records *crmfake.Records
	uris    fakehttp.Log[string]

	mu     sync.Mutex
	tokens map[string]bool
	notes  []Note
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
	s := &Server{tokens: map[string]bool{APIToken: true}}
	s.traffic = crmfake.NewTraffic(&s.Clock)
	s.records = crmfake.NewRecords(&s.Clock, func(_ string, n int) string { return strconv.Itoa(n) })
	return s
}

// URL is the API's base URL (api.pipedrive.com, or a company domain).
func (s *Server) URL() string { return s.srv.URL }

// RevokeToken makes the API token invalid.
func (s *Server) RevokeToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, token)
}

// SetRateLimit allows n API requests per window (Pipedrive's is per 2 s); n <= 0 lifts it.
func (s *Server) SetRateLimit(n int, window time.Duration) { s.traffic.SetLimit(n, window) }

// FailNext makes the next n API requests answer status.
func (s *Server) FailNext(n, status int) { s.traffic.FailNext(n, status) }

// Requests counts the API requests received, refused ones included.
func (s *Server) Requests() int { return s.traffic.Requests() }

// Limited counts the API requests refused with 429.
func (s *Server) Limited() int { return s.traffic.Limited() }

// RequestURIs returns the request URI (path and query) of every request, in order.
func (s *Server) RequestURIs() []string { return s.uris.All() }

// Records returns the records of object (persons, organizations, deals) as stored, in
// creation order. A deal's person_id, pipeline_id and stage_id are ints, its value a float64,
// its status open, won, lost or deleted.
func (s *Server) Records(object string) []crmfake.Record { return s.records.All(object) }

// Record returns one record (for a deal: Props["stage_id"], ["pipeline_id"], ["person_id"],
// ["status"], as Records says).
func (s *Server) Record(object string, id int) (crmfake.Record, bool) {
	return s.records.Get(object, strconv.Itoa(id))
}

// Count returns how many records of object there are.
func (s *Server) Count(object string) int { return s.records.Count(object) }

// Change sets fields of a record as a Pipedrive user would, moving its update time, and
// reports whether it did. A deal moves to another stage with {"stage_id": n} (its pipeline
// follows the stage) and closes with {"status": "won"} or "lost"; a stage or person the fake
// does not have is refused, as Pipedrive's UI would.
func (s *Server) Change(object string, id int, props map[string]any) bool {
	props = normalize(props)
	if object == "deals" {
		rec, found := s.records.Get(object, strconv.Itoa(id))
		if !found {
			return false
		}
		if s.checkDeal(props, rec.Props) != "" {
			return false
		}
	}
	_, ok := s.records.Update(object, strconv.Itoa(id), props)
	return ok
}

// Create adds a record as a Pipedrive user would, and returns its id. A deal gets what
// Pipedrive gives one created without them: status open, value 0 in Currency, the default
// pipeline's first stage, or the pipeline of the stage given.
func (s *Server) Create(object string, props map[string]any) int {
	props = normalize(props)
	if object == "deals" {
		s.checkDeal(props, nil)
	}
	id, _ := strconv.Atoi(s.records.Create(object, props).ID)
	return id
}

// Notes returns the notes received, in order.
func (s *Server) Notes() []Note {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.notes)
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/users/me", s.api(s.me))
	mux.HandleFunc("GET /api/v1/{fields}", s.api(s.fields))
	mux.HandleFunc("GET /api/v1/pipelines", s.api(s.pipelines))
	mux.HandleFunc("GET /api/v1/stages", s.api(s.stages))
	mux.HandleFunc("GET /api/v1/recents", s.api(s.recents))
	mux.HandleFunc("GET /api/v1/persons/{id}/deals", s.api(s.personDeals))
	mux.HandleFunc("POST /api/v1/notes", s.api(s.addNote))
	mux.HandleFunc("GET /api/v1/{object}/search", s.api(s.search))
	mux.HandleFunc("POST /api/v1/{object}", s.api(s.create))
	mux.HandleFunc("GET /api/v1/{object}/{id}", s.api(s.get))
	mux.HandleFunc("PUT /api/v1/{object}/{id}", s.api(s.update))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Unknown method .")
	})
	return mux
}

func writeError(w http.ResponseWriter, status int, message string) {
	fakehttp.WriteJSON(w, status, map[string]any{"success": false, "error": message, "errorCode": status,
		"error_info": "Please check developers.pipedrive.com for more information about Pipedrive API."})
}

func ok(w http.ResponseWriter, status int, data any, additional any) {
	body := map[string]any{"success": true, "data": data}
	if additional != nil {
		body["additional_data"] = additional
	}
	fakehttp.WriteJSON(w, status, body)
}

func (s *Server) api(h func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.uris.Add(r.URL.RequestURI())
		v := s.traffic.Admit()
		if v.Limit > 0 {
			w.Header().Set("x-ratelimit-limit", strconv.Itoa(v.Limit))
			w.Header().Set("x-ratelimit-remaining", strconv.Itoa(v.Remaining))
			w.Header().Set("x-ratelimit-reset", strconv.Itoa(int(math.Ceil(v.Window.Seconds()))))
		}
		if v.Limited {
			w.Header().Set("x-ratelimit-reset", strconv.Itoa(int(math.Ceil(v.RetryAfter.Seconds()))))
			writeError(w, http.StatusTooManyRequests, "Request over limit")
			return
		}
		if v.Fail != 0 {
			if v.Fail >= 502 && v.Fail <= 504 {
				fakehttp.ProxyError(w, v.Fail)
			} else {
				writeError(w, v.Fail, "Internal server error")
			}
			return
		}
		token := r.Header.Get("x-api-token")
		if token == "" {
			token = r.URL.Query().Get("api_token")
		}
		s.mu.Lock()
		valid := s.tokens[token]
		s.mu.Unlock()
		if !valid {
			writeError(w, http.StatusUnauthorized, "unauthorized access")
			return
		}
		h(w, r)
	}
}

func (s *Server) me(w http.ResponseWriter, _ *http.Request) {
	ok(w, http.StatusOK, map[string]any{"id": UserID, "name": "Shop Owner", "email": UserEmail, "company_id": CompanyID,
		"company_name": CompanyName, "company_domain": "demoshop", "active_flag": true, "timezone_name": "Europe/Berlin",
		"language": map[string]any{"language_code": "en", "country_code": "US"}}, nil)
}

// page reads start and limit as Pipedrive does (limit at most 500).
func page(w http.ResponseWriter, r *http.Request, def int) (start, limit int, good bool) {
	start, limit = 0, def
	if v := r.URL.Query().Get("start"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "start must be a non-negative integer")
			return 0, 0, false
		}
		start = n
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			writeError(w, http.StatusBadRequest, "limit must be between 1 and 500")
			return 0, 0, false
		}
		limit = n
	}
	return start, limit, true
}

func pagination(start, limit, total int) map[string]any {
	p := map[string]any{"start": start, "limit": limit, "more_items_in_collection": start+limit < total}
	if start+limit < total {
		p["next_start"] = start + limit
	}
	return map[string]any{"pagination": p}
}

func (s *Server) fields(w http.ResponseWriter, r *http.Request) {
	object, known := fieldsPath[r.PathValue("fields")]
	if !known {
		writeError(w, http.StatusNotFound, "Unknown method .")
		return
	}
	start, limit, good := page(w, r, 100)
	if !good {
		return
	}
	fs := schema[object]
	var data []map[string]any
	for i := start; i < len(fs) && i < start+limit; i++ {
		f := fs[i]
		d := map[string]any{"id": 9000 + i, "key": f.Key, "name": f.Name, "field_type": f.Type, "order_nr": i,
			"mandatory_flag": f.Mandatory, "edit_flag": f.Edit, "active_flag": true, "bulk_edit_allowed": f.Key != "id"}
		if f.Options != nil {
			d["options"] = f.Options
		}
		data = append(data, d)
	}
	ok(w, http.StatusOK, data, pagination(start, limit, len(fs)))
}

type pipeline struct {
	ID    int    `json:"id"`
	Name  string `json:"name"`
	Order int    `json:"order_nr"`
}

type stage struct {
	ID         int    `json:"id"`
	Name       string `json:"name"`
	PipelineID int    `json:"pipeline_id"`
	Order      int    `json:"order_nr"`
}

var pipelines = []pipeline{{ID: 2, Name: "Partners", Order: 2}, {ID: 1, Name: "Sales", Order: 1}}

var stages = []stage{
	{ID: 2, Name: "Contact made", PipelineID: 1, Order: 2},
	{ID: 1, Name: "Lead in", PipelineID: 1, Order: 1},
	{ID: 3, Name: "Proposal", PipelineID: 1, Order: 3},
	{ID: 10, Name: "Intro", PipelineID: 2, Order: 1},
}

func (s *Server) pipelines(w http.ResponseWriter, _ *http.Request) {
	var data []map[string]any
	for _, p := range pipelines {
		data = append(data, map[string]any{"id": p.ID, "name": p.Name, "order_nr": p.Order, "active": true, "deal_probability": true})
	}
	ok(w, http.StatusOK, data, nil)
}

func (s *Server) stages(w http.ResponseWriter, r *http.Request) {
	var data []map[string]any
	for _, st := range stages {
		if p := r.URL.Query().Get("pipeline_id"); p != "" && p != strconv.Itoa(st.PipelineID) {
			continue
		}
		data = append(data, map[string]any{"id": st.ID, "name": st.Name, "pipeline_id": st.PipelineID, "order_nr": st.Order,
			"active_flag": true, "deal_probability": 100, "rotten_flag": false})
	}
	ok(w, http.StatusOK, data, nil)
}

func findField(object, key string) (field, bool) {
	for _, f := range schema[object] {
		if f.Key == key {
			return f, true
		}
	}
	return field{}, false
}

// normalize stores email and phone as Pipedrive's lists of {value, primary, label}.
func normalize(props map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range props {
		if k == "email" || k == "phone" {
			out[k] = contactList(v)
			continue
		}
		out[k] = v
	}
	return out
}

// contactList reads a string, a list of strings or a list of objects into Pipedrive's list.
func contactList(v any) []any {
	var out []any
	add := func(value string, primary bool, label string) {
		if label == "" {
			label = "work"
		}
		out = append(out, map[string]any{"value": value, "primary": primary, "label": label})
	}
	switch x := v.(type) {
	case string:
		add(x, true, "")
	case []any:
		for i, e := range x {
			switch y := e.(type) {
			case string:
				add(y, i == 0, "")
			case map[string]any:
				value, _ := y["value"].(string)
				primary, _ := y["primary"].(bool)
				label, _ := y["label"].(string)
				add(value, primary || (i == 0 && len(x) == 1), label)
			}
		}
	}
	return out
}

// check validates written fields against the schema.
func check(object string, in map[string]any) string {
	for k, v := range in {
		f, known := findField(object, k)
		switch {
		case k == "org_id" || k == "owner_id" || k == "visible_to":
			continue
		case !known:
			// Pipedrive ignores unknown keys in v1: the fake refuses them so that a mapping
			// to a field that does not exist is caught in tests.
			return fmt.Sprintf("Unknown field %q", k)
		case k == "id" || k == "add_time" || k == "update_time":
			return fmt.Sprintf("Field %q is read-only", k)
		case v == nil:
			continue
		}
		switch f.Type {
		case "enum":
			id, good := optionID(v)
			if !good || !slices.ContainsFunc(f.Options, func(o option) bool { return o.ID == id }) {
				return fmt.Sprintf("Invalid option for field %s", f.Name)
			}
		case "status":
			if !slices.Contains([]any{"open", "won", "lost", "deleted"}, v) {
				return "Invalid status"
			}
		case "double", "monetary", "int", "stage", "people":
			if _, good := number(v); !good {
				return fmt.Sprintf("Field %s must be a number", f.Name)
			}
		case "date":
			sv, _ := v.(string)
			if _, err := time.Parse(time.DateOnly, sv); err != nil {
				return fmt.Sprintf("Field %s must be a date (YYYY-MM-DD)", f.Name)
			}
		case "varchar", "phone", "varchar_options", "address":
			if k != "email" && k != "phone" {
				if _, good := v.(string); !good {
					return fmt.Sprintf("Field %s must be text", f.Name)
				}
			}
		}
	}
	return ""
}

func optionID(v any) (int, bool) {
	switch x := v.(type) {
	case float64:
		return int(x), x == math.Trunc(x)
	case string:
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	return 0, false
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

func decode(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writeError(w, http.StatusBadRequest, "Content-Type must be application/json")
		return nil, false
	}
	var in map[string]any
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err == nil {
		err = json.Unmarshal(b, &in)
	}
	if err != nil || in == nil {
		writeError(w, http.StatusBadRequest, "Invalid JSON body")
		return nil, false
	}
	return in, true
}

func objectOf(w http.ResponseWriter, r *http.Request) (string, bool) {
	o := r.PathValue("object")
	if _, known := schema[o]; !known {
		writeError(w, http.StatusNotFound, "Unknown method .")
		return "", false
	}
	return o, true
}

// view is a record as Pipedrive answers it: a deal's person as the object Pipedrive nests
// (its id in value).
func (s *Server) view(object string, rec crmfake.Record) map[string]any {
	id, _ := strconv.Atoi(rec.ID)
	out := map[string]any{"id": id, "active_flag": true, "add_time": rec.Created.UTC().Format(TimeLayout),
		"update_time": rec.Updated.UTC().Format(TimeLayout),
		"owner_id":    map[string]any{"id": UserID, "name": "Shop Owner", "email": UserEmail, "value": UserID}}
	for _, f := range schema[object] {
		if _, set := out[f.Key]; !set {
			out[f.Key] = nil
		}
	}
	for k, v := range rec.Props {
		out[k] = v
	}
	if object == "persons" {
		for _, k := range []string{"email", "phone"} {
			if out[k] == nil {
				out[k] = []any{map[string]any{"value": "", "primary": true}}
			}
		}
	}
	if id, set := rec.Props["person_id"].(int); set && object == "deals" {
		p, _ := s.records.Get("persons", strconv.Itoa(id))
		out["person_id"] = map[string]any{"value": id, "name": p.Props["name"], "active_flag": true,
			"email": emptyList(p.Props["email"]), "phone": emptyList(p.Props["phone"]), "owner_id": UserID}
	}
	return out
}

func emptyList(v any) any {
	if v == nil {
		return []any{map[string]any{"value": "", "primary": true}}
	}
	return v
}

var singular = map[string]string{"persons": "Person", "organizations": "Organization", "deals": "Deal"}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	o, known := objectOf(w, r)
	if !known {
		return
	}
	rec, found := s.records.Get(o, r.PathValue("id"))
	if !found {
		writeError(w, http.StatusNotFound, singular[o]+" not found")
		return
	}
	ok(w, http.StatusOK, s.view(o, rec), nil)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	o, known := objectOf(w, r)
	if !known {
		return
	}
	in, good := decode(w, r)
	if !good {
		return
	}
	for _, f := range schema[o] {
		if v, _ := in[f.Key].(string); f.Mandatory && strings.TrimSpace(v) == "" {
			writeError(w, http.StatusBadRequest, f.Name+" must be given.")
			return
		}
	}
	if msg := check(o, in); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	in = normalize(in)
	if o == "deals" {
		if msg := s.checkDeal(in, nil); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
	}
	rec := s.records.Create(o, in)
	ok(w, http.StatusCreated, s.view(o, rec), nil)
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	o, known := objectOf(w, r)
	if !known {
		return
	}
	in, good := decode(w, r)
	if !good {
		return
	}
	if msg := check(o, in); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	for _, f := range schema[o] {
		if v, set := in[f.Key]; set && f.Mandatory && (v == nil || v == "") {
			writeError(w, http.StatusBadRequest, f.Name+" must be given.")
			return
		}
	}
	in = normalize(in)
	if o == "deals" {
		old, found := s.records.Get(o, r.PathValue("id"))
		if !found {
			writeError(w, http.StatusNotFound, singular[o]+" not found")
			return
		}
		if msg := s.checkDeal(in, old.Props); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
	}
	rec, found := s.records.Update(o, r.PathValue("id"), in)
	if !found {
		writeError(w, http.StatusNotFound, singular[o]+" not found")
		return
	}
	ok(w, http.StatusOK, s.view(o, rec), nil)
}

// searchable are the fields a search may name, per object.
var searchable = map[string][]string{
	"persons":       {"name", "email", "phone", "notes", "custom_fields"},
	"organizations": {"name", "address", "notes", "custom_fields"},
	"deals":         {"title", "notes", "custom_fields"},
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	o, known := objectOf(w, r)
	if !known {
		return
	}
	q := r.URL.Query()
	term := q.Get("term")
	exact := q.Get("exact_match") == "true"
	if len([]rune(term)) < 2 && !(exact && term != "") {
		writeError(w, http.StatusBadRequest, "term must be at least 2 characters long")
		return
	}
	fields := searchable[o]
	if f := q.Get("fields"); f != "" {
		fields = strings.Split(f, ",")
		for _, x := range fields {
			if !slices.Contains(searchable[o], x) {
				writeError(w, http.StatusBadRequest, "fields: invalid value "+x)
				return
			}
		}
	}
	start, limit, good := page(w, r, 100)
	if !good {
		return
	}
	var keys []string
	for _, f := range fields {
		if f != "custom_fields" {
			keys = append(keys, f)
			continue
		}
		for _, sf := range schema[o] {
			if sf.Edit {
				keys = append(keys, sf.Key)
			}
		}
	}
	// A sync searches once per record, so an exact search is an index lookup; a term
	// search scans.
	var hits []crmfake.Record
	if exact {
		hits = s.records.FindFold(o, keys, term)
	} else {
		lowered := strings.ToLower(term)
		contains := func(v string) bool { return strings.Contains(strings.ToLower(v), lowered) }
		hits = s.records.Find(o, func(rec crmfake.Record) bool {
			for _, k := range keys {
				if slices.ContainsFunc(crmfake.Strings(rec.Props[k]), contains) {
					return true
				}
			}
			return false
		})
	}
	items := []map[string]any{}
	for i := start; i < len(hits) && i < start+limit; i++ {
		rec := hits[i]
		id, _ := strconv.Atoi(rec.ID)
		item := map[string]any{"id": id, "type": strings.ToLower(singular[o]), "owner": map[string]any{"id": UserID},
			"custom_fields": []any{}, "visible_to": 3}
		switch o {
		case "persons":
			item["name"] = rec.Props["name"]
			item["emails"] = crmfake.Strings(rec.Props["email"])
			item["phones"] = crmfake.Strings(rec.Props["phone"])
		case "deals":
			item["title"] = rec.Props["title"]
			item["status"] = rec.Props["status"]
		default:
			item["name"] = rec.Props["name"]
		}
		items = append(items, map[string]any{"result_score": 1.0, "item": item})
	}
	ok(w, http.StatusOK, map[string]any{"items": items}, pagination(start, limit, len(hits)))
}

func (s *Server) recents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, err := time.Parse(TimeLayout, q.Get("since_timestamp"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "since_timestamp must be YYYY-MM-DD HH:MM:SS")
		return
	}
	item := q.Get("items")
	o, known := recentsItem[item]
	if !known {
		writeError(w, http.StatusBadRequest, "items: invalid value "+item)
		return
	}
	start, limit, good := page(w, r, 100)
	if !good {
		return
	}
	// Pipedrive compares whole seconds.
	changed := s.records.ChangedSince(o, since.UTC())
	data := []map[string]any{}
	last := ""
	for i := start; i < len(changed) && i < start+limit; i++ {
		v := s.view(o, changed[i])
		data = append(data, map[string]any{"item": item, "id": v["id"], "data": v})
		last = v["update_time"].(string)
	}
	add := pagination(start, limit, len(changed))
	add["since_timestamp"] = q.Get("since_timestamp")
	add["last_timestamp_on_page"] = last
	ok(w, http.StatusOK, data, add)
}

func (s *Server) addNote(w http.ResponseWriter, r *http.Request) {
	in, good := decode(w, r)
	if !good {
		return
	}
	content, _ := in["content"].(string)
	if strings.TrimSpace(content) == "" {
		writeError(w, http.StatusBadRequest, "Note content must be given.")
		return
	}
	var target string
	var id int
	for key, o := range map[string]string{"person_id": "persons", "deal_id": "deals", "org_id": "organizations"} {
		if v, set := in[key]; set {
			n, isNum := v.(float64)
			if !isNum {
				writeError(w, http.StatusBadRequest, key+" must be an integer")
				return
			}
			if _, found := s.records.Get(o, strconv.Itoa(int(n))); !found {
				writeError(w, http.StatusBadRequest, singular[o]+" not found")
				return
			}
			target, id = o, int(n)
		}
	}
	if target == "" {
		writeError(w, http.StatusBadRequest, "Note must be attached to a deal, person, organization, lead or project.")
		return
	}
	s.mu.Lock()
	n := Note{ID: len(s.notes) + 1, Content: content, Object: target, RecordID: id}
	s.notes = append(s.notes, n)
	s.mu.Unlock()
	ok(w, http.StatusCreated, map[string]any{"id": n.ID, "content": content, "add_time": s.Clock.Now().Format(TimeLayout)}, nil)
}

// intOf reads an id as JSON (float64), a test (int) or a query (string) gives it.
func intOf(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		return int(x), x == math.Trunc(x)
	case string:
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	return 0, false
}

// checkDeal checks a deal's write as Pipedrive does and completes it in place: ids become
// ints and the value a float64; the pipeline follows the stage, a pipeline alone means its
// first stage; a new deal (old nil) gets status open, value 0 in Currency and, without either,
// the default pipeline's first stage. It returns Pipedrive's message for a refusal.
func (s *Server) checkDeal(in, old map[string]any) string {
	for _, k := range []string{"person_id", "pipeline_id", "stage_id"} {
		if v, set := in[k]; set {
			if v == nil && k != "person_id" {
				delete(in, k) // Pipedrive keeps a deal in a stage
				continue
			}
			if v != nil {
				n, good := intOf(v)
				if !good {
					return k + " must be an integer"
				}
				in[k] = n
			}
		}
	}
	if v, set := in["value"]; set && v != nil {
		f, good := number(v)
		if n, isInt := v.(int); isInt {
			f, good = float64(n), true
		}
		if !good {
			return "Field Value must be a number"
		}
		in["value"] = f
	}
	if person, set := in["person_id"].(int); set {
		if _, found := s.records.Get("persons", strconv.Itoa(person)); !found {
			return "Person not found."
		}
	}
	stageID, hasStage := in["stage_id"].(int)
	pipelineID, hasPipeline := in["pipeline_id"].(int)
	if hasPipeline && !slices.ContainsFunc(pipelines, func(p pipeline) bool { return p.ID == pipelineID }) {
		return "Pipeline not found."
	}
	switch {
	case hasStage:
		i := slices.IndexFunc(stages, func(st stage) bool { return st.ID == stageID })
		if i < 0 {
			return "Stage not found."
		}
		if hasPipeline && stages[i].PipelineID != pipelineID {
			return fmt.Sprintf("Stage %d does not belong to pipeline %d.", stageID, pipelineID)
		}
		in["pipeline_id"] = stages[i].PipelineID
	case hasPipeline:
		if old == nil || old["pipeline_id"] != pipelineID {
			in["stage_id"] = firstStage(pipelineID)
		}
	case old == nil:
		first := slices.MinFunc(pipelines, func(a, b pipeline) int { return a.Order - b.Order })
		in["pipeline_id"], in["stage_id"] = first.ID, firstStage(first.ID)
	}
	if old == nil {
		for k, v := range map[string]any{"status": "open", "value": 0.0, "currency": Currency} {
			if in[k] == nil {
				in[k] = v
			}
		}
	}
	return ""
}

// firstStage is the pipeline's stage of the lowest order.
func firstStage(pipelineID int) int {
	first, order := 0, math.MaxInt
	for _, st := range stages {
		if st.PipelineID == pipelineID && st.Order < order {
			first, order = st.ID, st.Order
		}
	}
	return first
}

// dealStatuses are the values of a person's deals' status filter.
var dealStatuses = []string{"open", "won", "lost", "deleted", "all_not_deleted"}

// personDeals lists the deals linked to a person: status (all_not_deleted when absent) and
// sort ("field ASC, field DESC", first-level fields) as Pipedrive takes them, data null when
// there are none.
func (s *Server) personDeals(w http.ResponseWriter, r *http.Request) {
	person, isID := intOf(r.PathValue("id"))
	if _, found := s.records.Get("persons", r.PathValue("id")); !isID || !found {
		writeError(w, http.StatusNotFound, "Person not found")
		return
	}
	q := r.URL.Query()
	status := q.Get("status")
	if status == "" {
		status = "all_not_deleted"
	}
	if !slices.Contains(dealStatuses, status) {
		writeError(w, http.StatusBadRequest, "status: invalid value "+status)
		return
	}
	order, msg := dealOrder(q.Get("sort"))
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	start, limit, good := page(w, r, 100)
	if !good {
		return
	}
	deals := s.records.Find("deals", func(rec crmfake.Record) bool {
		if id, _ := rec.Props["person_id"].(int); id != person {
			return false
		}
		if status == "all_not_deleted" {
			return rec.Props["status"] != "deleted"
		}
		return rec.Props["status"] == status
	})
	slices.SortStableFunc(deals, order)
	var data []map[string]any
	for i := start; i < len(deals) && i < start+limit; i++ {
		data = append(data, s.view("deals", deals[i]))
	}
	ok(w, http.StatusOK, data, pagination(start, limit, len(deals)))
}

// dealOrder reads a sort parameter into a comparison (by id when empty).
func dealOrder(sort string) (func(a, b crmfake.Record) int, string) {
	type key struct {
		field string
		desc  bool
	}
	keys := []key{{field: "id"}}
	if strings.TrimSpace(sort) != "" {
		keys = nil
		for _, part := range strings.Split(sort, ",") {
			words := strings.Fields(part)
			if len(words) == 0 || len(words) > 2 {
				return nil, "sort: invalid value " + sort
			}
			k := key{field: words[0]}
			if len(words) == 2 {
				switch strings.ToUpper(words[1]) {
				case "ASC":
				case "DESC":
					k.desc = true
				default:
					return nil, "sort: invalid sorting mode " + words[1]
				}
			}
			if _, known := findField("deals", k.field); !known && k.field != "add_time" {
				return nil, "sort: unknown field " + k.field
			}
			keys = append(keys, k)
		}
	}
	return func(a, b crmfake.Record) int {
		for _, k := range keys {
			var c int
			switch k.field {
			case "id":
				x, _ := strconv.Atoi(a.ID)
				y, _ := strconv.Atoi(b.ID)
				c = x - y
			case "update_time":
				c = a.Updated.Compare(b.Updated)
			case "add_time":
				c = a.Created.Compare(b.Created)
			default:
				c = strings.Compare(fmt.Sprint(a.Props[k.field]), fmt.Sprint(b.Props[k.field]))
				if x, good := number(a.Props[k.field]); good {
					if y, good := number(b.Props[k.field]); good {
						c = cmp.Compare(x, y)
					}
				}
			}
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	}, ""
}
