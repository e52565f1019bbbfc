package emailevents

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// machineAgents are the marks, in a request's User-Agent (compared case-insensitively),
// of fetches of a pixel or a link that tell nothing of whether a person read the message:
//
//   - mailbox providers' image proxies, which fetch images on the reader's behalf and
//     hide who, where and how often (Gmail's proxy, Yahoo's);
//   - Outlook's image prefetch;
//   - security gateways that fetch every image and follow every link of a message before
//     it is delivered (Barracuda, Mimecast, Proofpoint).
//
// Apple Mail Privacy Protection, which fetches every image of every message on delivery,
// carries no mark of its own: isApplePrivacyProxy recognizes it. Opens and clicks from
// any of them are recorded with Machine set, and campaigns count them apart.
var machineAgents = []struct{ mark, who string }{
	{"googleimageproxy", "Gmail image proxy (via ggpht.com GoogleImageProxy)"},
	{"yahoomailproxy", "Yahoo Mail image proxy"},
	{"ms-office", "Outlook prefetch"},
	{"microsoft office", "Outlook prefetch"},
	{"barracuda", "Barracuda email security scanner"},
	{"mimecast", "Mimecast email security scanner"},
	{"proofpoint", "Proofpoint email security scanner"},
}

// isApplePrivacyProxy recognizes Apple Mail Privacy Protection's fetches without their
// Apple IP ranges, which this process does not know: a User-Agent of exactly "Mozilla/5.0"
// and no Accept-Language, which no browser or mail app sends.
func isApplePrivacyProxy(r *http.Request) bool {
	return r.Header.Get("User-Agent") == "Mozilla/5.0" && r.Header.Get("Accept-Language") == ""
}

// isMachine reports whether the request is a machine's fetch (machineAgents).
func isMachine(r *http.Request) bool {
	if isApplePrivacyProxy(r) {
		return true
	}
	ua := strings.ToLower(r.Header.Get("User-Agent"))
	for _, m := range machineAgents {
		if strings.Contains(ua, m.mark) {
			return true
		}
	}
	return false
}

// pixel is a transparent 1x1 GIF, the smallest image every mail client shows as nothing.
var pixel = []byte{
	'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0x80, 0, 0, // header, 1x1, a 2-colour table
	0, 0, 0, 0xff, 0xff, 0xff, // the colour table
	0x21, 0xf9, 4, 1, 0, 0, 0, 0, // graphic control: colour 0 is transparent
	0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, // image descriptor
	2, 2, 0x44, 1, 0, // the one pixel, LZW-coded
	0x3b, // trailer
}

// RecordOpen records the open of the pixel's token (without its ".gif"). A bad token
// records nothing; a failed record is logged: the pixel is served either way, since a mail
// client would show a broken image instead.
func (s *Service) RecordOpen(ctx context.Context, token string, machine bool) {
	ref, err := s.links.Parse(emaillinks.Open, token)
	if err != nil || s.campaigns == nil {
		return
	}
	if err := s.campaigns.Record(ctx, ref, Event{Type: EventOpen, Machine: machine, At: stamp(s.now())}); err != nil {
		s.log.ErrorContext(ctx, "email open not recorded", "request_id", httpapi.RequestID(ctx),
			"bot_id", ref.Bot, "campaign_id", ref.Campaign, "recipient", ref.Recipient, "error", err)
	}
}

// Click returns where a tracked link goes, after recording the click: only the URL of the
// campaign's own link table at the token's index, never one the request names. A bad
// token, or a link the campaign does not have, is 404. A failed record is logged and the
// reader still goes where the link says.
func (s *Service) Click(ctx context.Context, token string, machine bool) (string, error) {
	ref, err := s.links.Parse(emaillinks.Click, token)
	if err != nil {
		return "", httpapi.NotFound("link")
	}
	if s.campaigns == nil {
		return "", unavailable()
	}
	target, err := s.campaigns.LinkTarget(ctx, ref)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return "", httpapi.NotFound("link")
	}
	if err != nil {
		return "", err
	}
	if !webURL(target) {
		// Campaigns keeps only web links; one that is not must never become a Location.
		s.log.ErrorContext(ctx, "a campaign link is no http(s) URL", "bot_id", ref.Bot, "campaign_id", ref.Campaign, "link", ref.Link)
		return "", httpapi.NotFound("link")
	}
	if err := s.campaigns.Record(ctx, ref, Event{Type: EventClick, Link: ref.Link, Machine: machine, At: stamp(s.now())}); err != nil {
		s.log.ErrorContext(ctx, "email click not recorded", "request_id", httpapi.RequestID(ctx),
			"bot_id", ref.Bot, "campaign_id", ref.Campaign, "recipient", ref.Recipient, "error", err)
	}
	return target, nil
}

// webURL reports whether u is an absolute http or https URL.
func webURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}

func unavailable() error {
	return httpapi.E(httpapi.KindUnavailable, "temporarily_unavailable", "email events cannot be served right now; retry later")
}

// Unsubscribe unsubscribes the token's recipient: the address their message went to is
// suppressed bot-wide and the unsubscribe is recorded on the recipient. Idempotent.
func (s *Service) Unsubscribe(ctx context.Context, token string) error {
	ref, err := s.links.Parse(emaillinks.Unsubscribe, token)
	if err != nil {
		return httpapi.NotFound("unsubscribe link")
	}
	if s.campaigns == nil {
		return unavailable()
	}
	addr, err := s.campaigns.Recipient(ctx, ref)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return httpapi.NotFound("unsubscribe link")
	}
	if err != nil {
		return err
	}
	_, err = s.suppress(ctx, ref.Bot, addr, ReasonUnsubscribed, ref.Campaign)
	if err != nil && !errors.Is(err, errNotAddress) {
		return err
	}
	return s.campaigns.Record(ctx, ref, Event{Type: EventUnsubscribe, At: stamp(s.now()), Address: addr})
}

func (h *Handlers) open(w http.ResponseWriter, r *http.Request) error {
	if token, ok := strings.CutSuffix(r.PathValue("token"), ".gif"); ok {
		h.svc.RecordOpen(r.Context(), token, isMachine(r))
	}
	hd := w.Header()
	hd.Set("Content-Type", "image/gif")
	hd.Set("Content-Length", strconv.Itoa(len(pixel)))
	// Every fetch must reach us: a cached pixel is an open nobody hears of.
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(pixel)
	return err
}

func (h *Handlers) click(w http.ResponseWriter, r *http.Request) error {
	target, err := h.svc.Click(r.Context(), r.PathValue("token"), isMachine(r))
	if err != nil {
		return err
	}
	hd := w.Header()
	hd.Set("Location", target)
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusFound)
	return nil
}

// page is the unsubscribe page in each of its states: self-contained (no external
// resource, so it loads nothing that could tell anyone it was opened), its style inline.
var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>{{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222;line-height:1.5}button{font:inherit;padding:.5rem 1.25rem;border:0;border-radius:.25rem;background:#222;color:#fff;cursor:pointer}</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Text}}</p>
{{if .Form}}<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>
{{end}}</body>
</html>
`))

type pageData struct {
	Title, Text string
	Form        bool
}

var (
	pageConfirm = pageData{Title: "Unsubscribe",
		Text: "Unsubscribe, and you will no longer receive emails from this sender at this address.", Form: true}
	pageDone = pageData{Title: "You are unsubscribed",
		Text: "You will no longer receive emails from this sender. A message already on its way may still arrive."}
	pageNotFound = pageData{Title: "Link not valid",
		Text: "This unsubscribe link is not valid. Open it again from the email, or use your mail app's unsubscribe option."}
	pageFailed = pageData{Title: "Please try again",
		Text: "Your request could not be completed right now. Please try again in a few minutes."}
)

// writePage answers with an unsubscribe page. The page allows nothing but its inline
// style and a form posted back to itself, and is never cached or framed.
func writePage(w http.ResponseWriter, status int, p pageData) error {
	var b bytes.Buffer
	if err := page.Execute(&b, p); err != nil {
		return err
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(b.Len()))
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, err := w.Write(b.Bytes())
	return err
}

// unsubscribePage serves GET /u/{token}: a page asking to confirm. It changes nothing,
// since link scanners and prefetchers follow every link of a message.
func (h *Handlers) unsubscribePage(w http.ResponseWriter, r *http.Request) error {
	if _, err := h.svc.links.Parse(emaillinks.Unsubscribe, r.PathValue("token")); err != nil {
		return writePage(w, http.StatusNotFound, pageNotFound)
	}
	return writePage(w, http.StatusOK, pageConfirm)
}

// unsubscribe serves POST /u/{token}: RFC 8058's one-click POST (List-Unsubscribe=One-Click,
// form-encoded or multipart) and the page's form alike. The body is not read: the signed
// token is the whole authority, and link scanners do not POST.
func (h *Handlers) unsubscribe(w http.ResponseWriter, r *http.Request) error {
	err := h.svc.Unsubscribe(r.Context(), r.PathValue("token"))
	switch kind := httpapi.KindOf(err); {
	case err == nil:
		return writePage(w, http.StatusOK, pageDone)
	case kind == httpapi.KindNotFound:
		return writePage(w, http.StatusNotFound, pageNotFound)
	case kind == httpapi.KindUnavailable || errors.Is(err, store.ErrUnavailable):
		return writePage(w, http.StatusServiceUnavailable, pageFailed)
	default:
		h.svc.log.ErrorContext(r.Context(), "unsubscribe failed", "request_id", httpapi.RequestID(r.Context()), "error", err)
		return writePage(w, http.StatusInternalServerError, pageFailed)
	}
}
