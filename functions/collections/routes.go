package collections

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the collection and record routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers every collection and record route with its scope and right. Reads need
// only access to the bot; writes change builder data, so like reactions they need the
// Reactions right. Bot API tokens may call all of them on their own bot.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const (
		cols    = "/api/bots/{botID}/collections"
		col     = cols + "/{collectionID}"
		records = col + "/records"
		record  = records + "/{recordID}"
	)
	read := httpapi.Need("collections:read")
	write := httpapi.Need("collections:write", auth.RightReactions)
	mux.Handle("GET "+cols, read, h.listCollections)
	mux.Handle("POST "+cols, write, h.createCollection)
	mux.Handle("GET "+col, read, h.getCollection)
	mux.Handle("PATCH "+col, write, h.updateCollection)
	mux.Handle("DELETE "+col, write, h.deleteCollection)
	mux.Handle("GET "+records, read, h.listRecords)
	mux.Handle("POST "+records, write, h.createRecord)
	mux.Handle("POST "+records+"/batch", write, h.batch)
	mux.Handle("GET "+record, read, h.getRecord)
	mux.Handle("PATCH "+record, write, h.updateRecord)
	mux.Handle("DELETE "+record, write, h.deleteRecord)
}

func (h *Handlers) listCollections(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Collection, string, error) {
		return h.svc.ListCollections(r.Context(), r.PathValue("botID"), limit, cursor)
	})
}

type createCollectionRequest struct {
	Name   string       `json:"name"`
	Fields []FieldInput `json:"fields"`
}

func (h *Handlers) createCollection(w http.ResponseWriter, r *http.Request) error {
	var req createCollectionRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	c, err := h.svc.CreateCollection(r.Context(), bot, req.Name, req.Fields)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/collections/"+c.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, c)
}

func (h *Handlers) getCollection(w http.ResponseWriter, r *http.Request) error {
	c, err := h.svc.GetCollection(r.Context(), r.PathValue("botID"), r.PathValue("collectionID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, c)
}

type updateCollectionRequest struct {
	ExpectedRevision *int64        `json:"expected_revision"`
	Name             *string       `json:"name"`
	Fields           *[]FieldInput `json:"fields"`
}

// Validate checks what decoding cannot.
func (u *updateCollectionRequest) Validate() error {
	return requireRevision(u.ExpectedRevision)
}

func requireRevision(rev *int64) error {
	var p httpapi.Problems
	p.RequireRevision(rev)
	return p.Err()
}

func (h *Handlers) updateCollection(w http.ResponseWriter, r *http.Request) error {
	var req updateCollectionRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	c, err := h.svc.UpdateCollection(r.Context(), r.PathValue("botID"), r.PathValue("collectionID"), *req.ExpectedRevision, req.Name, req.Fields)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, c)
}

func (h *Handlers) deleteCollection(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	expected, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	force := false
	switch q.Get("force") {
	case "", "false":
	case "true":
		force = true
	default:
		return httpapi.InvalidParam("force", "force must be true or false")
	}
	if err := h.svc.DeleteCollection(r.Context(), r.PathValue("botID"), r.PathValue("collectionID"), expected, force); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

// filterRe is the one syntax of a filter parameter: filter[field]=value. The brackets keep
// filters apart from limit, cursor and any parameter added later.
var filterRe = regexp.MustCompile(`^filter\[([a-z][a-z0-9_]*)\]$`)

// parseFilters reads the filter[field]=value parameters, ordered by field name so that the
// same filters always make the same query (and cursor).
func parseFilters(q url.Values) ([]Filter, error) {
	var out []Filter
	for k, vs := range q {
		if !strings.HasPrefix(k, "filter") {
			continue
		}
		m := filterRe.FindStringSubmatch(k)
		if m == nil {
			return nil, httpapi.InvalidParam(k, "filters are written filter[field]=value, with a field name in lower_snake_case")
		}
		if len(vs) != 1 {
			return nil, httpapi.InvalidParam(k, k+" is given more than once; a field can be filtered by one value")
		}
		out = append(out, Filter{Field: m[1], Value: vs[0], Param: k})
	}
	slices.SortFunc(out, func(a, b Filter) int { return strings.Compare(a.Field, b.Field) })
	return out, nil
}

func (h *Handlers) listRecords(w http.ResponseWriter, r *http.Request) error {
	filters, err := parseFilters(r.URL.Query())
	if err != nil {
		return err
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Record, string, error) {
		return h.svc.ListRecords(r.Context(), r.PathValue("botID"), r.PathValue("collectionID"), filters, limit, cursor)
	})
}

type createRecordRequest struct {
	ExternalKey *string                    `json:"external_key"`
	Values      map[string]json.RawMessage `json:"values"`
}

func (h *Handlers) createRecord(w http.ResponseWriter, r *http.Request) error {
	var req createRecordRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot, col := r.PathValue("botID"), r.PathValue("collectionID")
	rec, err := h.svc.CreateRecord(r.Context(), bot, col, req.ExternalKey, req.Values)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/collections/"+col+"/records/"+rec.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, rec)
}

type batchRequest struct {
	Records []BatchEntry `json:"records"`
}

func (h *Handlers) batch(w http.ResponseWriter, r *http.Request) error {
	var req batchRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	res, err := h.svc.Batch(r.Context(), r.PathValue("botID"), r.PathValue("collectionID"), req.Records)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

func (h *Handlers) getRecord(w http.ResponseWriter, r *http.Request) error {
	rec, err := h.svc.GetRecord(r.Context(), r.PathValue("botID"), r.PathValue("collectionID"), r.PathValue("recordID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rec)
}

type updateRecordRequest struct {
	ExpectedRevision *int64                     `json:"expected_revision"`
	ExternalKey      *string                    `json:"external_key"`
	Values           map[string]json.RawMessage `json:"values"`
}

// Validate checks what decoding cannot.
func (u *updateRecordRequest) Validate() error { return requireRevision(u.ExpectedRevision) }

func (h *Handlers) updateRecord(w http.ResponseWriter, r *http.Request) error {
	var req updateRecordRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	rec, err := h.svc.UpdateRecord(r.Context(), r.PathValue("botID"), r.PathValue("collectionID"), r.PathValue("recordID"),
		*req.ExpectedRevision, req.ExternalKey, req.Values)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rec)
}

func (h *Handlers) deleteRecord(w http.ResponseWriter, r *http.Request) error {
	expected, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.DeleteRecord(r.Context(), r.PathValue("botID"), r.PathValue("collectionID"), r.PathValue("recordID"), expected); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}
