package channels

import (
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/httpapi"
)

// createTemplateRequest is the body of POST .../templates: the template in WhatsApp's own
// component format, with the API's lower-case category.
type createTemplateRequest struct {
	Name       string               `json:"name"`
	Language   string               `json:"language"`
	Category   string               `json:"category"`
	Components []whatsapp.Component `json:"components"`
}

// creatableCategories: authentication templates have a fixed, provider-made body (one-time
// passwords) that this API does not model; make them in WhatsApp Manager and sync.
var creatableCategories = []string{"marketing", "utility"}

// Validate reports every problem at once.
func (c *createTemplateRequest) Validate() error {
	var p httpapi.Problems
	switch {
	case c.Name == "":
		p.Add("name", "is required")
	case !whatsapp.ValidName(c.Name):
		p.Add("name", "must be lower-case letters, digits and underscores, at most %d characters", whatsapp.MaxTemplateName)
	}
	switch {
	case c.Language == "":
		p.Add("language", "is required")
	case !whatsapp.ValidLanguage(c.Language):
		p.Add("language", "must be a WhatsApp language code such as en, en_US or pt_BR")
	}
	switch {
	case c.Category == "":
		p.Add("category", "is required")
	case c.Category == "authentication":
		p.Add("category", "authentication templates cannot be created over the API; create them in WhatsApp Manager and sync")
	case !slices.Contains(creatableCategories, c.Category):
		p.Add("category", "must be marketing or utility")
	}
	addComponentProblems(&p, c.Components)
	return p.Err()
}

func addComponentProblems(p *httpapi.Problems, comps []whatsapp.Component) {
	if comps == nil {
		p.Add("components", "is required")
		return
	}
	for _, pr := range whatsapp.ValidateComponents("components", comps) {
		p.Add(pr.Field, "%s", pr.Message)
	}
}

// editTemplateRequest is the body of PUT .../templates/{templateID}: what WhatsApp lets
// change (components, and the category of a template not yet approved).
type editTemplateRequest struct {
	ExpectedRevision *int64               `json:"expected_revision"`
	Category         *string              `json:"category"`
	Components       []whatsapp.Component `json:"components"`
}

// Validate reports every problem at once.
func (e *editTemplateRequest) Validate() error {
	var p httpapi.Problems
	if e.ExpectedRevision == nil {
		p.Add("expected_revision", "is required: send the revision you last read")
	}
	if e.Category != nil && !slices.Contains(creatableCategories, *e.Category) {
		p.Add("category", "must be marketing or utility")
	}
	addComponentProblems(&p, e.Components)
	return p.Err()
}

func (h *Handlers) listTemplates(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := TemplateFilter{Status: q.Get("status"), Language: q.Get("language")}
	if q.Has("status") && !slices.Contains(TemplateStatuses(), f.Status) {
		return httpapi.InvalidParam("status", "status must be one of "+strings.Join(TemplateStatuses(), ", "))
	}
	if q.Has("language") && !whatsapp.ValidLanguage(f.Language) {
		return httpapi.InvalidParam("language", "language must be a WhatsApp language code such as en, en_US or pt_BR")
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Template, string, error) {
		return h.svc.Templates(r.Context(), r.PathValue("botID"), r.PathValue("channelID"), f, limit, cursor)
	})
}

func (h *Handlers) createTemplate(w http.ResponseWriter, r *http.Request) error {
	var req createTemplateRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	t, err := h.svc.CreateTemplate(r.Context(), r.PathValue("botID"), r.PathValue("channelID"),
		NewTemplate{Name: req.Name, Language: req.Language, Category: req.Category, Components: req.Components})
	if err != nil {
		return retryAfter(w, err)
	}
	w.Header().Set("Location", "/api/bots/"+r.PathValue("botID")+"/channels/"+t.ChannelID+"/templates/"+t.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, t)
}

func (h *Handlers) syncTemplates(w http.ResponseWriter, r *http.Request) error {
	res, err := h.svc.SyncTemplates(r.Context(), r.PathValue("botID"), r.PathValue("channelID"))
	if err != nil {
		return retryAfter(w, err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

func (h *Handlers) editTemplate(w http.ResponseWriter, r *http.Request) error {
	var req editTemplateRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	c := TemplateChange{ExpectedRevision: *req.ExpectedRevision, Components: req.Components}
	if req.Category != nil {
		c.Category = *req.Category
	}
	t, err := h.svc.EditTemplate(r.Context(), r.PathValue("botID"), r.PathValue("channelID"), r.PathValue("templateID"), c)
	if err != nil {
		return retryAfter(w, err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, t)
}

func (h *Handlers) deleteTemplate(w http.ResponseWriter, r *http.Request) error {
	expected, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.DeleteTemplate(r.Context(), r.PathValue("botID"), r.PathValue("channelID"), r.PathValue("templateID"), expected); err != nil {
		return retryAfter(w, err)
	}
	return httpapi.NoContent(w)
}

// mediaURLRequest is the JSON form of the media upload: a URL the server downloads.
type mediaURLRequest struct {
	URL      string `json:"url"`
	MIMEType string `json:"mime_type"`
}

// Validate checks the URL's shape; whether it can be fetched is learnt by fetching it.
func (m *mediaURLRequest) Validate() error {
	var p httpapi.Problems
	switch {
	case m.URL == "":
		p.Add("url", "is required")
	case len(m.URL) > 2048:
		p.Add("url", "must be at most 2048 characters")
	case !strings.HasPrefix(m.URL, "https://") && !strings.HasPrefix(m.URL, "http://"):
		p.Add("url", "must be an http or https URL")
	}
	if m.MIMEType != "" && !slices.Contains([]string{"image/jpeg", "image/png", "video/mp4", "application/pdf"}, m.MIMEType) {
		p.Add("mime_type", "must be image/jpeg, image/png, video/mp4 or application/pdf")
	}
	return p.Err()
}

// mediaDeadline is how long one media upload may take end to end: reading up to 100 MB
// from the client or the URL and streaming it on to the provider.
const mediaDeadline = 10 * time.Minute

// uploadMedia takes the file as the body (its Content-Type names its type; the 1 MiB cap
// of JSON bodies does not apply: the type's own limit does) or, as application/json, the
// URL of a file the server downloads.
func (h *Handlers) uploadMedia(w http.ResponseWriter, r *http.Request) error {
	bot, ch := r.PathValue("botID"), r.PathValue("channelID")
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil {
		return httpapi.E(httpapi.KindUnsupportedMediaType, "unsupported_media_type",
			"send the file as the body with its Content-Type (image/jpeg, image/png, video/mp4, application/pdf), or application/json with a url")
	}
	// The server's read and write timeouts are sized for JSON requests; this one may carry
	// 100 MB each way. (Behind API Gateway the writer has no deadlines to extend.)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(mediaDeadline))
	_ = rc.SetWriteDeadline(time.Now().Add(mediaDeadline + time.Minute))
	var res MediaHandle
	if mt == "application/json" || strings.HasSuffix(mt, "+json") {
		var req mediaURLRequest
		if err := httpapi.Decode(w, r, &req); err != nil {
			return err
		}
		res, err = h.svc.UploadTemplateMediaFromURL(r.Context(), bot, ch, req.URL, req.MIMEType)
	} else {
		src := MediaSource{MIMEType: mt, Length: r.ContentLength, Body: r.Body}
		if _, params, err := mime.ParseMediaType(r.Header.Get("Content-Disposition")); err == nil {
			src.FileName = params["filename"]
		}
		res, err = h.svc.UploadTemplateMedia(r.Context(), bot, ch, src)
	}
	if err != nil {
		return retryAfter(w, err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}
