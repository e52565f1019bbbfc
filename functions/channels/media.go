package channels

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/httpapi"
)

// MediaSource is a header example to upload: its declared type, its length in bytes (-1
// when unknown: a chunked body, a server that did not say), its name and its bytes.
type MediaSource struct {
	MIMEType string
	Length   int64
	FileName string
	Body     io.Reader
}

// MediaHandle is an uploaded header example: Handle goes into a template's HEADER
// component as example.header_handle.
type MediaHandle struct {
	Handle   string            `json:"handle"`
	Type     channel.MediaType `json:"type"`
	MIMEType string            `json:"mime_type"`
	Size     int64             `json:"size"`
}

// UploadTemplateMedia uploads a header example sent as the request body. Its type and size
// are checked against the channel type's declared header media before a byte is read;
// then its first bytes must be a file of that type; then it is streamed to the provider.
func (s *Service) UploadTemplateMedia(ctx context.Context, bot, channelID string, src MediaSource) (MediaHandle, error) {
	tc, err := s.openTemplates(ctx, bot, channelID, true)
	if err != nil {
		return MediaHandle{}, err
	}
	return s.uploadMedia(ctx, tc, src, false)
}

// UploadTemplateMediaFromURL uploads a header example the server downloads from rawURL
// (public addresses only on AWS): the way for files larger than a request body may be.
// mimeType, when set, overrides the type the URL's server declares.
func (s *Service) UploadTemplateMediaFromURL(ctx context.Context, bot, channelID, rawURL, mimeType string) (MediaHandle, error) {
	tc, err := s.openTemplates(ctx, bot, channelID, true)
	if err != nil {
		return MediaHandle{}, err
	}
	f, err := tc.api.FetchMedia(ctx, rawURL)
	if err != nil {
		var ce *channel.Error
		errors.As(err, &ce)
		detail := "the media URL could not be fetched"
		if ce != nil {
			detail = ce.Message
		}
		return MediaHandle{}, httpapi.E(httpapi.KindUnprocessable, "media_fetch_failed", detail).Wrap(err)
	}
	defer f.Body.Close()
	src := MediaSource{MIMEType: cmpOr(mimeType, f.MIMEType), Length: f.Length, FileName: f.FileName, Body: f.Body}
	return s.uploadMedia(ctx, tc, src, true)
}

// headerLimit finds the declared header media limit that takes mimeType.
func headerLimit(limits []channel.MediaLimit, mimeType string) (channel.MediaLimit, bool) {
	for _, l := range limits {
		if slices.Contains(l.MimeTypes, mimeType) {
			return l, true
		}
	}
	return channel.MediaLimit{}, false
}

func acceptedTypes(limits []channel.MediaLimit) string {
	var parts []string
	for _, l := range limits {
		parts = append(parts, strings.Join(l.MimeTypes, " or ")+" ("+string(l.Type)+", at most "+megabytes(l.MaxBytes)+")")
	}
	return strings.Join(parts, ", ")
}

// megabytes names a limit the way the capability matrix's readers think of it (5 MB: 5 MiB).
func megabytes(n int64) string {
	if n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// normalizeMIME lower-cases a type and accepts the common alias image/jpg.
func normalizeMIME(t string) string {
	t = strings.ToLower(strings.TrimSpace(t))
	if t == "image/jpg" {
		return "image/jpeg"
	}
	return t
}

func (s *Service) uploadMedia(ctx context.Context, tc templateChannel, src MediaSource, fromURL bool) (MediaHandle, error) {
	limits := tc.api.Capabilities().TemplateHeaderMedia
	src.MIMEType = normalizeMIME(src.MIMEType)
	lim, ok := headerLimit(limits, src.MIMEType)
	if !ok {
		if fromURL {
			return MediaHandle{}, httpapi.Errorf(httpapi.KindUnprocessable, "invalid_media",
				"the URL's file is %q; a header example is %s (send mime_type if its server names it wrongly)",
				src.MIMEType, acceptedTypes(limits))
		}
		return MediaHandle{}, httpapi.Errorf(httpapi.KindUnsupportedMediaType, "unsupported_media_type",
			"send the file as the body with its Content-Type: %s; or send application/json with a url", acceptedTypes(limits))
	}
	tooLarge := func() error {
		return httpapi.Errorf(httpapi.KindTooLarge, "media_too_large", "a %s header example is at most %d bytes (%s)",
			lim.Type, lim.MaxBytes, megabytes(lim.MaxBytes)).With("max_bytes", lim.MaxBytes).With("media_type", lim.Type)
	}
	if src.Length > lim.MaxBytes {
		return MediaHandle{}, tooLarge()
	}
	body, length := src.Body, src.Length
	if length < 0 {
		f, n, err := spool(src.Body, lim.MaxBytes)
		if f != nil {
			defer func() { f.Close(); os.Remove(f.Name()) }()
		}
		if err != nil {
			return MediaHandle{}, err
		}
		if n > lim.MaxBytes {
			return MediaHandle{}, tooLarge()
		}
		body, length = f, n
	}
	if length == 0 {
		return MediaHandle{}, httpapi.E(httpapi.KindUnprocessable, "invalid_media", "the file is empty")
	}
	br := bufio.NewReaderSize(body, 4096)
	head, _ := br.Peek(16)
	if !sniff(src.MIMEType, head) {
		return MediaHandle{}, httpapi.Errorf(httpapi.KindUnprocessable, "invalid_media",
			"the bytes are not a %s file; send the file's real type", src.MIMEType)
	}
	h, err := tc.api.UploadMedia(ctx, tc.conn, whatsapp.Upload{FileName: src.FileName, MIMEType: src.MIMEType, Length: length, Body: br})
	if err != nil {
		var ce *channel.Error
		if errors.Is(err, channel.ErrRejected) && errors.As(err, &ce) {
			return MediaHandle{}, httpapi.Errorf(httpapi.KindUnprocessable, "invalid_media", "the provider refused the file: %s", ce.Message).
				With("provider_code", ce.Code).Wrap(err)
		}
		return MediaHandle{}, templateProblem(err)
	}
	return MediaHandle{Handle: h, Type: lim.Type, MIMEType: src.MIMEType, Size: length}, nil
}

// spool copies a body of unknown length to a temporary file, up to max+1 bytes, so that
// its length is known before the upload (the provider's session declares it). The caller
// closes and removes the file.
func spool(r io.Reader, max int64) (*os.File, int64, error) {
	f, err := os.CreateTemp("", "template-media-*")
	if err != nil {
		return nil, 0, err
	}
	n, err := io.Copy(f, io.LimitReader(r, max+1))
	if err != nil {
		return f, n, httpapi.E(httpapi.KindInvalid, "invalid_body", "the body could not be read").Wrap(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return f, n, err
	}
	return f, n, nil
}

// sniff reports whether a file's first bytes fit its declared type.
func sniff(mimeType string, head []byte) bool {
	switch mimeType {
	case "image/jpeg":
		return bytes.HasPrefix(head, []byte{0xFF, 0xD8, 0xFF})
	case "image/png":
		return bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n"))
	case "video/mp4":
		return len(head) >= 8 && string(head[4:8]) == "ftyp"
	case "application/pdf":
		return bytes.HasPrefix(head, []byte("%PDF-"))
	}
	return false
}
