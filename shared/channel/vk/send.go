package vk

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/httpclient"
)

// maxPhotoBytes is VK's limit on a photo upload.
const maxPhotoBytes = 50 << 20

// photoTypes are the image types VK takes as message photos.
var photoTypes = []string{"image/jpeg", "image/png", "image/gif"}

// docTypes are the document types the adapter declares; VK takes nearly any file as a
// document, refusing executables (see refusedDoc).
var docTypes = []string{
	"application/pdf", "application/zip", "text/plain", "text/csv",
	"application/msword", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	"application/vnd.ms-excel", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	"application/vnd.ms-powerpoint", "application/vnd.openxmlformats-officedocument.presentationml.presentation",
	"image/jpeg", "image/png", "image/gif", "audio/mpeg", "audio/ogg", "video/mp4",
}

// refusedDoc are types VK refuses as documents.
var refusedDoc = []string{"application/x-msdownload", "application/x-dosexec", "application/x-executable",
	"application/vnd.microsoft.portable-executable", "application/x-sh", "application/x-msi"}

// Send delivers m to the user userID (a VK user id) with messages.send and returns VK's
// message id. Media are downloaded from their URL and uploaded to VK first (photos and
// documents); buttons become an inline keyboard, quick replies a one-time keyboard under the
// input field. random_id is derived from the channel and m.Key, so a send retried with the
// same key is not delivered twice (see RandomID).
func (a *Adapter) Send(ctx context.Context, conn channel.Connection, userID string, m channel.Message) (string, error) {
	st, err := credentials(conn)
	if err != nil {
		return "", err
	}
	peer, err := strconv.ParseInt(userID, 10, 64)
	if err != nil || peer <= 0 {
		return "", rejected("the recipient is not a VK user id")
	}
	params := url.Values{"peer_id": {strconv.FormatInt(peer, 10)}}
	text := m.Text
	switch {
	case m.Template != nil:
		return "", rejected("VK has no message templates")
	case m.Media != nil && (m.Text != "" || len(m.Buttons) > 0):
		return "", rejected("a media message carries only its caption")
	case m.Media != nil:
		text = m.Media.Caption
	case strings.TrimSpace(m.Text) == "":
		return "", rejected("the message is empty")
	}
	if utf8.RuneCountInString(text) > MaxTextLength {
		return "", rejected(fmt.Sprintf("the text is longer than %d characters", MaxTextLength))
	}
	if text != "" {
		params.Set("message", text)
	}
	if len(m.Buttons) > 0 {
		kb, err := keyboard(m.Buttons, m.QuickReplies)
		if err != nil {
			return "", err
		}
		params.Set("keyboard", kb)
	}
	if m.Media != nil {
		att, err := a.attach(ctx, st, peer, *m.Media)
		if err != nil {
			return "", err
		}
		params.Set("attachment", att)
	}
	rid := RandomID(conn.ChannelID, m.Key)
	if m.Key == "" {
		if rid, err = randomID(); err != nil {
			return "", err
		}
	}
	params.Set("random_id", strconv.FormatInt(int64(rid), 10))
	var id int64
	if err := a.call(ctx, st.AccessToken, "messages.send", params, &id); err != nil {
		return "", mapError(err)
	}
	return strconv.FormatInt(id, 10), nil
}

// RandomID is messages.send's random_id for the message of key on a channel: VK sends a
// message once per random_id and peer (a repeated call, for a while, answers the first
// message's id and sends nothing), so a send retried after a lost answer with the same key
// reaches the user once. It is a positive int32 (VK's type; 0 would turn the check off): the
// first 31 bits of SHA-256(channel id, NUL, key). Two different messages to one peer collide
// with a chance of about 1 in 2^31 per pair sent within VK's de-duplication window; the later
// one would then not be delivered.
func RandomID(channelID, key string) int32 {
	h := sha256.New()
	h.Write([]byte(channelID))
	h.Write([]byte{0})
	h.Write([]byte(key))
	id := int32(binary.BigEndian.Uint32(h.Sum(nil)[:4]) & 0x7fffffff)
	if id == 0 {
		id = 1
	}
	return id
}

// randomID is a random random_id, for a message without a key: each such send is new.
func randomID() (int32, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b[:])&0x7fffffff) | 1, nil
}

func rejected(msg string) error {
	return &channel.Error{Kind: channel.ErrRejected, Provider: channel.VK, Message: msg}
}

// vkButton is a button of a messages.send keyboard.
type vkButton struct {
	Action vkAction `json:"action"`
	Color  string   `json:"color,omitempty"`
}

type vkAction struct {
	Type    string `json:"type"`
	Label   string `json:"label"`
	Payload string `json:"payload,omitempty"`
	Link    string `json:"link,omitempty"`
}

// payloadEnvelope is how a button's payload travels: VK payloads are JSON, and {"p": ...}
// keeps ours apart from VK's own ({"command": "start"} of the Start button).
type payloadEnvelope struct {
	P string `json:"p"`
}

// keyboard builds the keyboard: reply buttons are text buttons (a press comes back as a
// message_new with the payload, and the label as its text), link buttons are open_link.
// Buttons are an inline keyboard attached to the message; VK allows it 6 rows, so more than 6
// buttons go two to a row. Quick replies are a one-time keyboard under the input field
// (inline false, one_time true: it hides once a button is pressed), one button per row (VK
// allows it 10 rows), and carry no links.
func keyboard(buttons []channel.Button, quick bool) (string, error) {
	if len(buttons) > MaxButtons {
		return "", rejected(fmt.Sprintf("VK shows at most %d buttons", MaxButtons))
	}
	perRow := (len(buttons) + 5) / 6
	if quick {
		perRow = 1
	}
	var rows [][]vkButton
	for i, b := range buttons {
		label := strings.TrimSpace(b.Title)
		if label == "" {
			return "", rejected(fmt.Sprintf("button %d has no title", i))
		}
		if utf8.RuneCountInString(label) > MaxLabelLength {
			label = string([]rune(label)[:MaxLabelLength-1]) + "…"
		}
		var vb vkButton
		switch {
		case b.URL != "" && quick:
			return "", rejected(fmt.Sprintf("button %d: quick replies cannot open links", i))
		case b.URL != "":
			u, err := url.Parse(b.URL)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return "", rejected(fmt.Sprintf("button %d has an invalid link", i))
			}
			vb = vkButton{Action: vkAction{Type: "open_link", Label: label, Link: b.URL}}
		case b.Payload != "":
			p, err := json.Marshal(payloadEnvelope{P: b.Payload})
			if err != nil {
				return "", err
			}
			if len(p) > MaxPayloadBytes {
				return "", rejected(fmt.Sprintf("button %d's payload is longer than VK carries", i))
			}
			vb = vkButton{Action: vkAction{Type: "text", Label: label, Payload: string(p)}, Color: "primary"}
		default:
			return "", rejected(fmt.Sprintf("button %d has neither a payload nor a link", i))
		}
		if i%perRow == 0 {
			rows = append(rows, nil)
		}
		rows[len(rows)-1] = append(rows[len(rows)-1], vb)
	}
	kb, err := json.Marshal(struct {
		OneTime bool         `json:"one_time,omitempty"`
		Inline  bool         `json:"inline"`
		Buttons [][]vkButton `json:"buttons"`
	}{OneTime: quick, Inline: !quick, Buttons: rows})
	return string(kb), err
}

// attach downloads the media and uploads it to VK for this peer, returning the attachment
// to send ("photo-1_2_key", "doc-1_2").
func (a *Adapter) attach(ctx context.Context, st stored, peer int64, m channel.Media) (string, error) {
	switch m.Type {
	case channel.Image:
		return a.attachPhoto(ctx, st, peer, m)
	case channel.Document:
		return a.attachDoc(ctx, st, peer, m)
	default:
		return "", rejected(fmt.Sprintf("VK community messages cannot carry %s; send it as a document or a link", m.Type))
	}
}

func (a *Adapter) attachPhoto(ctx context.Context, st stored, peer int64, m channel.Media) (string, error) {
	f, err := a.fetch(ctx, m.URL, min(a.maxBytes, maxPhotoBytes))
	if err != nil {
		return "", err
	}
	if !slices.Contains(photoTypes, f.contentType) {
		return "", rejected("the image is not a JPEG, PNG or GIF")
	}
	var srv struct {
		UploadURL string `json:"upload_url"`
	}
	if err := a.call(ctx, st.AccessToken, "photos.getMessagesUploadServer",
		url.Values{"peer_id": {strconv.FormatInt(peer, 10)}}, &srv); err != nil {
		return "", mapError(err)
	}
	var up struct {
		Server int64  `json:"server"`
		Photo  string `json:"photo"`
		Hash   string `json:"hash"`
		Error  string `json:"error"`
	}
	if err := a.upload(ctx, srv.UploadURL, "photo", f, &up); err != nil {
		return "", err
	}
	if up.Error != "" || up.Photo == "" || up.Photo == "[]" {
		return "", rejected("VK did not accept the image")
	}
	var saved []struct {
		ID        int64  `json:"id"`
		OwnerID   int64  `json:"owner_id"`
		AccessKey string `json:"access_key"`
	}
	if err := a.call(ctx, st.AccessToken, "photos.saveMessagesPhoto", url.Values{
		"photo": {up.Photo}, "server": {strconv.FormatInt(up.Server, 10)}, "hash": {up.Hash},
	}, &saved); err != nil {
		return "", mapError(err)
	}
	if len(saved) == 0 {
		return "", &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: "photos.saveMessagesPhoto saved nothing"}
	}
	p := saved[0]
	att := fmt.Sprintf("photo%d_%d", p.OwnerID, p.ID)
	if p.AccessKey != "" {
		att += "_" + p.AccessKey
	}
	return att, nil
}

func (a *Adapter) attachDoc(ctx context.Context, st stored, peer int64, m channel.Media) (string, error) {
	f, err := a.fetch(ctx, m.URL, a.maxBytes)
	if err != nil {
		return "", err
	}
	if slices.Contains(refusedDoc, f.contentType) {
		return "", rejected("VK does not take executable files as documents")
	}
	var srv struct {
		UploadURL string `json:"upload_url"`
	}
	if err := a.call(ctx, st.AccessToken, "docs.getMessagesUploadServer", url.Values{
		"type": {"doc"}, "peer_id": {strconv.FormatInt(peer, 10)},
	}, &srv); err != nil {
		return "", mapError(err)
	}
	var up struct {
		File  string `json:"file"`
		Error string `json:"error"`
	}
	if err := a.upload(ctx, srv.UploadURL, "file", f, &up); err != nil {
		return "", err
	}
	if up.Error != "" || up.File == "" {
		return "", rejected("VK did not accept the document")
	}
	var saved struct {
		Doc struct {
			ID        int64  `json:"id"`
			OwnerID   int64  `json:"owner_id"`
			AccessKey string `json:"access_key"`
		} `json:"doc"`
	}
	if err := a.call(ctx, st.AccessToken, "docs.save", url.Values{"file": {up.File}, "title": {f.name}}, &saved); err != nil {
		return "", mapError(err)
	}
	att := fmt.Sprintf("doc%d_%d", saved.Doc.OwnerID, saved.Doc.ID)
	if saved.Doc.AccessKey != "" {
		att += "_" + saved.Doc.AccessKey
	}
	return att, nil
}

// file is a downloaded media file.
type file struct {
	name        string
	contentType string
	data        []byte
}

// fetch downloads a media URL, at most limit bytes. The content type is sniffed from the
// bytes when the server's is missing or generic.
func (a *Adapter) fetch(ctx context.Context, raw string, limit int64) (file, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return file{}, rejected("the media URL is not an http(s) URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return file{}, rejected("the media URL is invalid")
	}
	res, err := a.download.Do(req)
	if err != nil {
		if errors.Is(err, httpclient.ErrNotPublic) {
			return file{}, rejected("the media URL points into a private network")
		}
		return file{}, &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: "fetching the media: " + redact(err)}
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests:
		return file{}, &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK,
			Message: fmt.Sprintf("the media URL answered %d", res.StatusCode), RetryAfter: retryAfter(res)}
	case res.StatusCode != http.StatusOK:
		return file{}, rejected(fmt.Sprintf("the media URL answered %d", res.StatusCode))
	case res.ContentLength > limit:
		return file{}, rejected(fmt.Sprintf("the media file is larger than %d bytes", limit))
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return file{}, &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: "fetching the media: " + redact(err)}
	}
	if int64(len(data)) > limit {
		return file{}, rejected(fmt.Sprintf("the media file is larger than %d bytes", limit))
	}
	if len(data) == 0 {
		return file{}, rejected("the media file is empty")
	}
	ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if ct == "" || ct == "application/octet-stream" || ct == "binary/octet-stream" {
		ct, _, _ = mime.ParseMediaType(http.DetectContentType(data))
	}
	return file{name: fileName(u, ct), contentType: ct, data: data}, nil
}

// fileName names an upload after the URL's last path element, with an extension VK accepts.
func fileName(u *url.URL, ct string) string {
	name := path.Base(u.Path)
	name = strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r == '/' || r < 0x20 {
			return -1
		}
		return r
	}, name)
	if name == "" || name == "." || name == "/" {
		name = "file"
	}
	if path.Ext(name) == "" {
		if exts, _ := mime.ExtensionsByType(ct); len(exts) > 0 {
			name += exts[0]
		}
	}
	if utf8.RuneCountInString(name) > 128 {
		name = string([]rune(name)[:128])
	}
	return name
}

// upload posts f as the multipart field to VK's upload URL and decodes the answer (upload
// servers answer errors in the body, as {"error": "..."}).
func (a *Adapter) upload(ctx context.Context, uploadURL, field string, f file, out any) error {
	u, err := url.Parse(uploadURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: "VK gave an invalid upload URL"}
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": field, "filename": f.name}))
	h.Set("Content-Type", f.contentType)
	part, err := w.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := part.Write(f.data); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	res, err := a.uploads.Do(req)
	if err != nil {
		return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: "uploading: " + redact(err)}
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: "uploading: " + redact(err)}
	}
	if res.StatusCode != http.StatusOK {
		return mapError(&httpError{Status: res.StatusCode, RetryAfter: retryAfter(res)})
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: "the upload answer is not JSON"}
	}
	return nil
}
