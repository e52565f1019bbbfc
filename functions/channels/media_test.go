package channels

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	fake "github.com/botplatform/api/tests/fakes/whatsapp"
)

// Files of each type: their signatures and some bytes.
var (
	png  = append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, 500)...)
	jpeg = append([]byte{0xFF, 0xD8, 0xFF, 0xE0}, bytes.Repeat([]byte{2}, 500)...)
	mp4  = append([]byte("\x00\x00\x00\x18ftypmp42"), bytes.Repeat([]byte{3}, 500)...)
	pdf  = append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte{4}, 500)...)
)

func TestMediaUpload(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	ch := s.connect(t, botA)
	media := templatesPath(botA, ch) + "/media"

	for _, tc := range []struct {
		mime string
		body []byte
		typ  string
	}{{"image/png", png, "image"}, {"image/jpeg", jpeg, "image"}, {"video/mp4", mp4, "video"}, {"application/pdf", pdf, "document"}} {
		r := s.do(t, "owner", "POST", media, tc.body, "Content-Type", tc.mime, "Content-Disposition", `attachment; filename="header.bin"`)
		require.Equal(t, http.StatusOK, r.Code, "%s: %s", tc.mime, r.Body)
		m := r.JSON
		assert.Equal(t, tc.typ, m["type"], tc.mime)
		assert.Equal(t, tc.mime, m["mime_type"], tc.mime)
		assert.EqualValues(t, len(tc.body), m["size"], tc.mime)
		assert.NotEmpty(t, m["handle"], tc.mime)
	}
	ups := s.wa.Uploads()
	require.Len(t, ups, 4)
	assert.Equal(t, "header.bin", ups[0].FileName)
	r := s.do(t, "owner", "POST", media, jpeg, "Content-Type", "image/jpg")
	require.Equal(t, http.StatusOK, r.Code, "image/jpg is image/jpeg")
	assert.Equal(t, "image/jpeg", r.JSON["mime_type"])

	// The handle makes a media header.
	handle := s.do(t, "owner", "POST", media, png, "Content-Type", "image/png").JSON["handle"]
	tpl := map[string]any{"name": "with_image", "language": "en", "category": "marketing", "components": []any{
		map[string]any{"type": "HEADER", "format": "IMAGE", "example": map[string]any{"header_handle": []any{handle}}},
		map[string]any{"type": "BODY", "text": "New in store"},
	}}
	require.Equal(t, http.StatusCreated, s.do(t, "owner", "POST", templatesPath(botA, ch), tpl).Code)

	uploads := len(s.wa.Uploads())
	// Too large for its type: refused on Content-Length, before a byte is read or sent.
	req := httptest.NewRequest("POST", media, bytes.NewReader(png))
	req.Header.Set("Authorization", "Bearer "+s.tokens["owner"])
	req.Header.Set("Content-Type", "image/png")
	req.ContentLength = 5<<20 + 1
	w := httptest.NewRecorder()
	s.Mux.ServeHTTP(w, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.Contains(t, w.Body.String(), `"code":"media_too_large"`)
	assert.Contains(t, w.Body.String(), `"max_bytes":5242880`)
	// A video may be larger than an image; a chunked body of unknown length is counted.
	big := append(append([]byte{}, mp4...), make([]byte, 6<<20)...)
	r = s.do(t, "owner", "POST", media, big, "Content-Type", "video/mp4")
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
	req = httptest.NewRequest("POST", media, struct{ *bytes.Reader }{bytes.NewReader(append(append([]byte{}, png...), make([]byte, 5<<20)...))})
	req.Header.Set("Authorization", "Bearer "+s.tokens["owner"])
	req.Header.Set("Content-Type", "image/png")
	req.ContentLength = -1
	w = httptest.NewRecorder()
	s.Mux.ServeHTTP(w, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code, "%s", w.Body)

	for name, tc := range map[string]struct {
		ct     string
		body   []byte
		status int
		code   string
	}{
		"gif":             {"image/gif", []byte("GIF89a"), 415, "unsupported_media_type"},
		"no content type": {"", png, 415, "unsupported_media_type"},
		"not a png":       {"image/png", pdf, 422, "invalid_media"},
		"not a pdf":       {"application/pdf", png, 422, "invalid_media"},
		"empty":           {"image/png", []byte{}, 422, "invalid_media"},
	} {
		r := s.do(t, "owner", "POST", media, tc.body, "Content-Type", tc.ct)
		assert.Equal(t, tc.status, r.Code, "%s: %s", name, r.Body)
		assert.Equal(t, tc.code, r.Problem(), name)
	}
	assert.Len(t, s.wa.Uploads(), uploads+1, "only the video went through")
}

func TestMediaUploadFromURL(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	ch := s.connect(t, botA)
	media := templatesPath(botA, ch) + "/media"
	files := http.NewServeMux()
	serve := func(path, ct string, b []byte, chunked bool) {
		files.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if ct != "" {
				w.Header().Set("Content-Type", ct)
			}
			if !chunked {
				w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			}
			for i := 0; i < len(b); i += 1 << 16 {
				w.Write(b[i:min(i+1<<16, len(b))])
				if chunked {
					w.(http.Flusher).Flush()
				}
			}
		})
	}
	serve("/a.pdf", "application/pdf", pdf, false)
	serve("/a.mp4", "video/mp4", mp4, true)
	serve("/wrong.bin", "application/octet-stream", png, false)
	serve("/big.png", "image/png", append(append([]byte{}, png...), make([]byte, 5<<20)...), false)
	serve("/bigchunked.png", "image/png", append(append([]byte{}, png...), make([]byte, 5<<20)...), true)
	srv := httptest.NewServer(files)
	t.Cleanup(srv.Close)

	r := s.do(t, "owner", "POST", media, map[string]any{"url": srv.URL + "/a.pdf"})
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
	assert.Equal(t, "document", r.JSON["type"])
	r = s.do(t, "owner", "POST", media, map[string]any{"url": srv.URL + "/a.mp4"})
	require.Equal(t, http.StatusOK, r.Code, "chunked: %s", r.Body)
	assert.EqualValues(t, len(mp4), r.JSON["size"])
	r = s.do(t, "owner", "POST", media, map[string]any{"url": srv.URL + "/wrong.bin"})
	assert.Equal(t, "invalid_media", r.Problem())
	r = s.do(t, "owner", "POST", media, map[string]any{"url": srv.URL + "/wrong.bin", "mime_type": "image/png"})
	assert.Equal(t, http.StatusOK, r.Code, "mime_type overrides the server's type: %s", r.Body)
	ups := s.wa.Uploads()
	assert.Equal(t, "a.pdf", ups[0].FileName)
	n := len(ups)
	for name, tc := range map[string]struct {
		body   map[string]any
		status int
		code   string
	}{
		"too large":         {map[string]any{"url": srv.URL + "/big.png"}, 413, "media_too_large"},
		"too large chunked": {map[string]any{"url": srv.URL + "/bigchunked.png"}, 413, "media_too_large"},
		"404":               {map[string]any{"url": srv.URL + "/missing.png"}, 422, "media_fetch_failed"},
		"not http":          {map[string]any{"url": "ftp://example.com/a.png"}, 400, "validation_failed"},
		"bad mime_type":     {map[string]any{"url": srv.URL + "/a.pdf", "mime_type": "image/gif"}, 400, "validation_failed"},
		"unknown field":     {map[string]any{"url": srv.URL + "/a.pdf", "type": "document"}, 400, "unknown_field"},
	} {
		r := s.do(t, "owner", "POST", media, tc.body)
		assert.Equal(t, tc.status, r.Code, "%s: %s", name, r.Body)
		assert.Equal(t, tc.code, r.Problem(), name)
	}
	assert.Len(t, s.wa.Uploads(), n, "nothing more uploaded")

	// Where private addresses are not allowed (AWS), the loopback file server is refused.
	strict := whatsapp.New(whatsapp.Config{BaseURL: s.wa.URL(), AppID: fake.AppID})
	_, err := strict.FetchMedia(t.Context(), srv.URL+"/a.pdf")
	assert.ErrorIs(t, err, channel.ErrRejected)
	assert.Contains(t, err.Error(), "not public")
}

// Without the Meta app id the deployment cannot upload: 503, said plainly.
func TestMediaUploadNotConfigured(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	ch := s.connect(t, botA)
	noApp := whatsapp.New(whatsapp.Config{BaseURL: s.wa.URL()})
	s.svc.adapters[channel.WhatsApp] = noApp
	r := s.do(t, "owner", "POST", templatesPath(botA, ch)+"/media", png, "Content-Type", "image/png")
	assert.Equal(t, http.StatusServiceUnavailable, r.Code)
	assert.Equal(t, "provider_unavailable", r.Problem())
	assert.Contains(t, r.JSON["detail"], "WHATSAPP_APP_ID")
}
