package whatsapp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/botplatform/api/shared/channel"
)

// Template is a message template as the Graph API describes it. Components are kept as the
// provider's JSON, so that kinds this package does not model (carousels, authentication
// buttons) survive a sync unchanged.
type Template struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Language       string          `json:"language"`
	Status         string          `json:"status"`
	Category       string          `json:"category"`
	Components     json.RawMessage `json:"components"`
	RejectedReason string          `json:"rejected_reason,omitempty"`
}

// Component is one part of a template in the Graph API's format: HEADER (format TEXT,
// IMAGE, VIDEO, DOCUMENT or LOCATION), BODY, FOOTER or BUTTONS. Only the members listed
// here may be sent; a client decoding into it strictly refuses others.
type Component struct {
	Type    string            `json:"type"`
	Format  string            `json:"format,omitempty"`
	Text    string            `json:"text,omitempty"`
	Example *ComponentExample `json:"example,omitempty"`
	Buttons []TemplateButton  `json:"buttons,omitempty"`
}

// ComponentExample holds the sample values reviewers see: the header variable, the header
// media (a handle from UploadMedia), the body variables.
type ComponentExample struct {
	HeaderText   []string   `json:"header_text,omitempty"`
	HeaderHandle []string   `json:"header_handle,omitempty"`
	BodyText     [][]string `json:"body_text,omitempty"`
}

// TemplateButton is a button of a BUTTONS component: QUICK_REPLY, URL (with at most one
// variable at the end of the URL and its example), PHONE_NUMBER or COPY_CODE (the example
// is the code).
type TemplateButton struct {
	Type        string   `json:"type"`
	Text        string   `json:"text,omitempty"`
	URL         string   `json:"url,omitempty"`
	PhoneNumber string   `json:"phone_number,omitempty"`
	Example     []string `json:"example,omitempty"`
}

// Template categories.
const (
	CategoryMarketing      = "MARKETING"
	CategoryUtility        = "UTILITY"
	CategoryAuthentication = "AUTHENTICATION"
)

// Limits of template content (Meta's).
const (
	MaxTemplateName   = 512
	MaxBodyText       = 1024
	MaxHeaderText     = 60
	MaxFooterText     = 60
	MaxButtons        = 10
	MaxButtonText     = 25
	MaxURLButtons     = 2
	MaxPhoneButtons   = 1
	MaxCopyCodeButton = 1
	MaxButtonURL      = 2000
	MaxCopyCode       = 15
)

var (
	templateName    = regexp.MustCompile(`^[a-z0-9_]+$`)
	languagePattern = regexp.MustCompile(`^[a-z]{2,3}(_[A-Z][A-Za-z]{1,3})?$`)
	variable        = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)
	phoneNumber     = regexp.MustCompile(`^\+?[0-9]{6,20}$`)
)

// Problem is one thing wrong with template content, Field naming it by path.
type Problem struct {
	Field   string
	Message string
}

// ValidName reports whether name is a template name: lower-case letters, digits and
// underscores, at most 512 characters.
func ValidName(name string) bool {
	return len(name) <= MaxTemplateName && templateName.MatchString(name)
}

// ValidLanguage reports whether code looks like a template language code (en, en_US, pt_BR).
func ValidLanguage(code string) bool { return languagePattern.MatchString(code) }

// ValidateComponents checks template content the way Meta's review intake does before it
// looks at wording: exactly one BODY and at most one HEADER, FOOTER and BUTTONS; lengths;
// variables numbered {{1}}..{{n}} in order with one example each; a media header with its
// example handle; button kinds and counts. Fields are named from prefix
// ("components[1].text").
func ValidateComponents(prefix string, comps []Component) []Problem {
	var ps []Problem
	add := func(field, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	seen := map[string]int{}
	for i, c := range comps {
		f := fmt.Sprintf("%s[%d]", prefix, i)
		seen[c.Type]++
		if seen[c.Type] > 1 {
			add(f+".type", "a template has at most one %s component", c.Type)
		}
		switch c.Type {
		case "HEADER":
			validateHeader(f, c, add)
		case "BODY":
			if c.Format != "" || len(c.Buttons) > 0 {
				add(f, "a BODY has only text and example")
			}
			n := validateText(f+".text", c.Text, MaxBodyText, true, add)
			var got [][]string
			if c.Example != nil {
				got = c.Example.BodyText
				if len(c.Example.HeaderText) > 0 || len(c.Example.HeaderHandle) > 0 {
					add(f+".example", "a BODY example has only body_text")
				}
			}
			switch {
			case n == 0 && len(got) > 0:
				add(f+".example.body_text", "the text has no variables to give examples for")
			case n > 0 && (len(got) != 1 || len(got[0]) != n):
				add(f+".example.body_text", "give one row of %d example values, one per variable", n)
			}
		case "FOOTER":
			if c.Format != "" || len(c.Buttons) > 0 || c.Example != nil {
				add(f, "a FOOTER has only text")
			}
			if validateText(f+".text", c.Text, MaxFooterText, true, add) > 0 {
				add(f+".text", "a footer has no variables")
			}
		case "BUTTONS":
			if c.Format != "" || c.Text != "" || c.Example != nil {
				add(f, "a BUTTONS component has only buttons")
			}
			validateButtons(f+".buttons", c.Buttons, add)
		case "":
			add(f+".type", "is required")
		default:
			add(f+".type", "must be HEADER, BODY, FOOTER or BUTTONS")
		}
	}
	if seen["BODY"] == 0 {
		add(prefix, "a template needs a BODY component")
	}
	return ps
}

func validateHeader(f string, c Component, add func(string, string, ...any)) {
	if len(c.Buttons) > 0 {
		add(f+".buttons", "a HEADER has no buttons")
	}
	ex := c.Example
	if ex != nil && len(ex.BodyText) > 0 {
		add(f+".example.body_text", "belongs to the BODY")
	}
	switch c.Format {
	case "TEXT":
		n := validateText(f+".text", c.Text, MaxHeaderText, true, add)
		if n > 1 {
			add(f+".text", "a header has at most one variable")
		}
		var got []string
		if ex != nil {
			got = ex.HeaderText
			if len(ex.HeaderHandle) > 0 {
				add(f+".example.header_handle", "a TEXT header has no media")
			}
		}
		if n != len(got) && n <= 1 {
			add(f+".example.header_text", "give %d example value(s), one per variable", n)
		}
	case "IMAGE", "VIDEO", "DOCUMENT":
		if c.Text != "" {
			add(f+".text", "a media header has no text")
		}
		if ex == nil || len(ex.HeaderHandle) != 1 || ex.HeaderHandle[0] == "" {
			add(f+".example.header_handle", "a %s header needs one example: the handle from POST .../templates/media", c.Format)
		}
		if ex != nil && len(ex.HeaderText) > 0 {
			add(f+".example.header_text", "a media header has no text")
		}
	case "LOCATION":
		if c.Text != "" || ex != nil {
			add(f, "a LOCATION header has no text or example")
		}
	case "":
		add(f+".format", "is required: TEXT, IMAGE, VIDEO, DOCUMENT or LOCATION")
	default:
		add(f+".format", "must be TEXT, IMAGE, VIDEO, DOCUMENT or LOCATION")
	}
}

// validateText checks a text's length and its variables and returns how many it has.
func validateText(field, text string, maxLen int, required bool, add func(string, string, ...any)) int {
	if strings.TrimSpace(text) == "" {
		if required {
			add(field, "is required")
		}
		return 0
	}
	if n := utf8.RuneCountInString(text); n > maxLen {
		add(field, "has %d characters; at most %d", n, maxLen)
	}
	vars := variable.FindAllStringSubmatch(text, -1)
	for i, v := range vars {
		n, err := strconv.Atoi(v[1])
		if err != nil || n != i+1 {
			add(field, "variables are numbered {{1}}, {{2}}, ... in order of appearance; found {{%s}} at position %d", v[1], i+1)
			return len(vars)
		}
	}
	return len(vars)
}

func validateButtons(f string, bs []TemplateButton, add func(string, string, ...any)) {
	if len(bs) == 0 || len(bs) > MaxButtons {
		add(f, "give 1 to %d buttons", MaxButtons)
	}
	count := map[string]int{}
	for i, b := range bs {
		bf := fmt.Sprintf("%s[%d]", f, i)
		count[b.Type]++
		if b.Type != "COPY_CODE" {
			if b.Text == "" {
				add(bf+".text", "is required")
			} else if n := utf8.RuneCountInString(b.Text); n > MaxButtonText {
				add(bf+".text", "has %d characters; at most %d", n, MaxButtonText)
			}
		}
		switch b.Type {
		case "QUICK_REPLY":
			if b.URL != "" || b.PhoneNumber != "" || len(b.Example) > 0 {
				add(bf, "a QUICK_REPLY button has only text")
			}
		case "URL":
			u, err := url.Parse(strings.ReplaceAll(b.URL, "{{1}}", "x"))
			switch {
			case b.URL == "":
				add(bf+".url", "is required")
			case len(b.URL) > MaxButtonURL:
				add(bf+".url", "has at most %d characters", MaxButtonURL)
			case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
				add(bf+".url", "must be an http(s) URL")
			}
			vars := variable.FindAllString(b.URL, -1)
			switch {
			case len(vars) > 1 || (len(vars) == 1 && (vars[0] != "{{1}}" || !strings.HasSuffix(b.URL, "{{1}}"))):
				add(bf+".url", "a URL has at most one variable, {{1}}, at its end")
			case len(vars) == 1 && len(b.Example) != 1:
				add(bf+".example", "give one example URL for the variable")
			case len(vars) == 0 && len(b.Example) > 0:
				add(bf+".example", "the URL has no variable")
			}
		case "PHONE_NUMBER":
			if !phoneNumber.MatchString(b.PhoneNumber) {
				add(bf+".phone_number", "must be a phone number in international format")
			}
		case "COPY_CODE":
			if len(b.Example) != 1 || b.Example[0] == "" || utf8.RuneCountInString(b.Example[0]) > MaxCopyCode {
				add(bf+".example", "give the code as one example of at most %d characters", MaxCopyCode)
			}
		case "":
			add(bf+".type", "is required")
		default:
			add(bf+".type", "must be QUICK_REPLY, URL, PHONE_NUMBER or COPY_CODE")
		}
	}
	if count["URL"] > MaxURLButtons {
		add(f, "at most %d URL buttons", MaxURLButtons)
	}
	if count["PHONE_NUMBER"] > MaxPhoneButtons {
		add(f, "at most %d PHONE_NUMBER button", MaxPhoneButtons)
	}
	if count["COPY_CODE"] > MaxCopyCodeButton {
		add(f, "at most %d COPY_CODE button", MaxCopyCodeButton)
	}
}

// TemplateRequest submits a new template for review.
type TemplateRequest struct {
	Name       string      `json:"name"`
	Language   string      `json:"language"`
	Category   string      `json:"category"`
	Components []Component `json:"components"`
}

// CreatedTemplate is the provider's answer to a new template.
type CreatedTemplate struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Category string `json:"category"`
}

// TemplateEdit changes a template: its components and, for templates not yet approved,
// its category ("" keeps it). Name and language cannot change.
type TemplateEdit struct {
	Category   string      `json:"category,omitempty"`
	Components []Component `json:"components"`
}

// templatePageSize is what Templates asks for per page; the provider may send fewer.
const templatePageSize = 100

// maxTemplatePages bounds a catalog walk (Meta allows at most 6,000 templates per account).
const maxTemplatePages = 600

// Templates returns the account's whole template catalog, following the provider's paging.
func (a *Adapter) Templates(ctx context.Context, conn channel.Connection) ([]Template, error) {
	c, err := credentials(conn)
	if err != nil {
		return nil, err
	}
	var all []Template
	after := ""
	for range maxTemplatePages {
		q := url.Values{"fields": {"id,name,language,status,category,components,rejected_reason"},
			"limit": {strconv.Itoa(templatePageSize)}}
		if after != "" {
			q.Set("after", after)
		}
		var page struct {
			Data   []Template `json:"data"`
			Paging paging     `json:"paging"`
		}
		if err := a.call(ctx, c.AccessToken, http.MethodGet, c.BusinessAccountID+"/message_templates", q, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if page.Paging.Next == "" || page.Paging.Cursors.After == "" || len(page.Data) == 0 {
			return all, nil
		}
		after = page.Paging.Cursors.After
	}
	return nil, &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.WhatsApp, Code: "paging",
		Message: fmt.Sprintf("the template catalog did not end within %d pages", maxTemplatePages)}
}

// CreateTemplate submits a template for review; it starts PENDING.
func (a *Adapter) CreateTemplate(ctx context.Context, conn channel.Connection, t TemplateRequest) (CreatedTemplate, error) {
	c, err := credentials(conn)
	if err != nil {
		return CreatedTemplate{}, err
	}
	var out CreatedTemplate
	if err := a.call(ctx, c.AccessToken, http.MethodPost, c.BusinessAccountID+"/message_templates", nil, t, &out); err != nil {
		return CreatedTemplate{}, err
	}
	if !graphID.MatchString(out.ID) {
		return CreatedTemplate{}, &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.WhatsApp, Code: "bad_response",
			Message: "the provider answered without a template id"}
	}
	return out, nil
}

// EditTemplate changes template id and resubmits it for review.
func (a *Adapter) EditTemplate(ctx context.Context, conn channel.Connection, id string, e TemplateEdit) error {
	c, err := credentials(conn)
	if err != nil {
		return err
	}
	if !graphID.MatchString(id) {
		return fmt.Errorf("whatsapp: template id %q is not a Graph API id", id)
	}
	var out struct {
		Success bool `json:"success"`
	}
	return a.call(ctx, c.AccessToken, http.MethodPost, id, nil, e, &out)
}

// DeleteTemplate deletes one language version of a template: by its id (hsm_id) and name.
// A template the provider does not have answers an error matching ErrNotFound.
func (a *Adapter) DeleteTemplate(ctx context.Context, conn channel.Connection, id, name string) error {
	c, err := credentials(conn)
	if err != nil {
		return err
	}
	var out struct {
		Success bool `json:"success"`
	}
	q := url.Values{"name": {name}, "hsm_id": {id}}
	return a.call(ctx, c.AccessToken, http.MethodDelete, c.BusinessAccountID+"/message_templates", q, nil, &out)
}

// Upload is a file to upload as a template header example.
type Upload struct {
	// FileName is sent to the provider as the file's name (optional).
	FileName string
	// MIMEType is one of application/pdf, image/jpeg, image/png, video/mp4.
	MIMEType string
	// Length is the exact number of bytes Body yields.
	Length int64
	Body   io.Reader
}

// uploadSession is the id of a Resumable Upload API session: "upload:" and an opaque value
// that may carry a query ("?sig=...").
var uploadSession = regexp.MustCompile(`^upload:[A-Za-z0-9+/=_\-.:]+(\?[A-Za-z0-9+/=_\-.&%]+)?$`)

// UploadMedia uploads a header example with the Resumable Upload API (a session opened
// under the Meta app, then the bytes from offset 0) and returns the handle ("h") to give a
// template as example.header_handle. The body is streamed, not held in memory.
func (a *Adapter) UploadMedia(ctx context.Context, conn channel.Connection, up Upload) (string, error) {
	if a.appID == "" {
		return "", ErrNotConfigured
	}
	c, err := credentials(conn)
	if err != nil {
		return "", err
	}
	ok := false
	for _, t := range uploadTypes {
		ok = ok || t == up.MIMEType
	}
	if !ok || up.Length <= 0 {
		return "", rejected("the Resumable Upload API takes %s files of at least one byte", strings.Join(uploadTypes, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	q := url.Values{"file_length": {strconv.FormatInt(up.Length, 10)}, "file_type": {up.MIMEType}}
	if up.FileName != "" {
		q.Set("file_name", up.FileName)
	}
	var session struct {
		ID string `json:"id"`
	}
	if err := a.call(ctx, c.AccessToken, http.MethodPost, a.appID+"/uploads", q, nil, &session); err != nil {
		return "", err
	}
	if !uploadSession.MatchString(session.ID) {
		return "", &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.WhatsApp, Code: "bad_response",
			Message: "the provider answered with no upload session"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/"+session.ID, io.LimitReader(up.Body, up.Length))
	if err != nil {
		return "", err
	}
	req.ContentLength = up.Length
	// The upload step takes the token with the OAuth scheme, as Meta documents it.
	req.Header.Set("Authorization", "OAuth "+c.AccessToken)
	req.Header["file_offset"] = []string{"0"} // the documented spelling, sent as is
	req.Header.Set("Content-Type", "application/octet-stream")
	var out struct {
		H string `json:"h"`
	}
	if err := a.do(req, c.AccessToken, &out); err != nil {
		return "", err
	}
	if out.H == "" {
		return "", &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.WhatsApp, Code: "bad_response",
			Message: "the provider answered without a file handle"}
	}
	return out.H, nil
}

// SendParameters is what a message of a template must supply besides its name and language.
type SendParameters struct {
	// Body is how many body parameters it takes: its body's variables {{1}}..{{n}}.
	Body int
	// Other names the first part of the template that needs a parameter of another kind
	// (a header's variable or media, a URL button's variable, a copy code, named body
	// variables), "" when the body's are all.
	Other string
}

// ParametersOf reads the parameters a message of a template takes from its components in
// the Graph API's format (as created, or as a sync reports them). Component and button kinds
// it does not know are taken to need none.
func ParametersOf(components json.RawMessage) (SendParameters, error) {
	var comps []struct {
		Type    string `json:"type"`
		Format  string `json:"format"`
		Text    string `json:"text"`
		Buttons []struct {
			Type string `json:"type"`
			URL  string `json:"url"`
		} `json:"buttons"`
	}
	if err := json.Unmarshal(components, &comps); err != nil {
		return SendParameters{}, fmt.Errorf("whatsapp: template components: %w", err)
	}
	var p SendParameters
	other := func(what string) {
		if p.Other == "" {
			p.Other = what
		}
	}
	for _, c := range comps {
		switch strings.ToUpper(c.Type) {
		case "BODY":
			for _, v := range variable.FindAllStringSubmatch(c.Text, -1) {
				n, err := strconv.Atoi(v[1])
				if err != nil {
					other("named body variables ({{" + v[1] + "}})")
					continue
				}
				p.Body = max(p.Body, n)
			}
		case "HEADER":
			switch f := strings.ToUpper(c.Format); f {
			case "TEXT", "":
				if variable.MatchString(c.Text) {
					other("the header's variable")
				}
			default:
				other("the " + strings.ToLower(f) + " header")
			}
		case "BUTTONS":
			for _, b := range c.Buttons {
				switch t := strings.ToUpper(b.Type); t {
				case "URL":
					if variable.MatchString(b.URL) {
						other("a URL button's variable")
					}
				case "COPY_CODE", "OTP", "CATALOG", "MPM":
					other("a " + strings.ToLower(t) + " button")
				}
			}
		case "CAROUSEL", "LIMITED_TIME_OFFER":
			other("its " + strings.ToLower(c.Type) + " component")
		}
	}
	return p, nil
}
