package broadcasts

import (
	"context"
	"errors"
	"net/http"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// clicked names the engagement count of recipients who clicked a tracked link button.
const clicked = "clicked"

// tracksLinks reports whether this deployment tracks the link buttons of second-generation
// broadcasts: it needs the link key and a public URL the clicks come back to.
func (s *Service) tracksLinks() bool { return s.d.Links != nil && s.cfg.PublicURL != "" }

// track replaces each link button's URL in m with its tracked URL for the row, and returns
// the original targets by index (stored with the row when the send settles).
func (s *Service) track(m *channel.Message, bot, id, recipient string) []string {
	if !s.tracksLinks() {
		return nil
	}
	var links []string
	ref := emaillinks.Ref{Bot: bot, Campaign: id, Recipient: recipient}
	for i, b := range m.Buttons {
		if b.URL == "" {
			continue
		}
		if links == nil {
			// Copy: the rendered message's buttons may be shared with a cache.
			m.Buttons = append([]channel.Button(nil), m.Buttons...)
		}
		m.Buttons[i].URL = s.d.Links.BroadcastClickURL(s.cfg.PublicURL, ref, len(links))
		links = append(links, b.URL)
	}
	return links
}

// Click answers a tracked link button: the row's first click is counted (clicked_at, the
// channel's clicked count), every click is redirected to the URL the message carried. A
// token that is not one, or whose row is gone, is 404: nothing tells a guesser which.
func (s *Service) Click(ctx context.Context, token string) (string, error) {
	if s.d.Links == nil {
		return "", httpapi.NotFound("link")
	}
	ref, err := s.d.Links.Parse(emaillinks.BroadcastClick, token)
	if err != nil {
		return "", httpapi.NotFound("link")
	}
	got, err := s.d.Store.Get(ctx, rowKey(ref.Bot, ref.Campaign, ref.Recipient))
	if errors.Is(err, store.ErrNotFound) {
		return "", httpapi.NotFound("link")
	}
	if err != nil {
		return "", err
	}
	r, err := decodeRow(got)
	if err != nil {
		return "", err
	}
	if ref.Link >= len(r.Links) {
		return "", httpapi.NotFound("link")
	}
	target := r.Links[ref.Link]
	if r.ClickedAt == nil {
		now := stamp(s.d.Now())
		_, err := s.mutateRow(ctx, ref.Bot, ref.Campaign, &r, func(n *row) ([]store.Write, error) {
			if n.ClickedAt != nil {
				return nil, errNoChange
			}
			n.ClickedAt = &now
			return []store.Write{engage(ref.Bot, ref.Campaign, n.Channel, clicked)}, nil
		})
		if err != nil {
			// The person still gets where they were going; the count is what is lost.
			s.d.Log.WarnContext(ctx, "broadcast click not counted", "bot_id", ref.Bot, "broadcast_id", ref.Campaign, "error", err)
		}
	}
	return target, nil
}

func (h *Handlers) click(w http.ResponseWriter, r *http.Request) error {
	target, err := h.svc.Click(r.Context(), r.PathValue("token"))
	if err != nil {
		return err
	}
	hd := w.Header()
	hd.Set("Location", target)
	hd.Set("Cache-Control", "no-store")
	hd.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusFound)
	return nil
}
