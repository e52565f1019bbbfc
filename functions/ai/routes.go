package ai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// ReplayedHeader marks an answer replayed from an earlier request with the same
// Idempotency-Key (Stripe's name for it).
const ReplayedHeader = "Idempotent-Replayed"

// Routes registers the managed AI routes. They are the account's, not a bot's: personal
// access tokens only (the kernel refuses bot tokens on routes without {botID}).
func Routes(mux *httpapi.Mux, svc *Service) {
	h := &handlers{svc: svc}
	mux.Handle("POST /api/v1/ai/responses", httpapi.Need("managed_ai:invoke").InPlan(auth.FeatureManagedAI), h.respond)
	mux.Handle("GET /api/v1/ai/usage", httpapi.Need("managed_ai:usage:read").InPlan(auth.FeatureManagedAI), h.usage)
}

type handlers struct{ svc *Service }

func (h *handlers) respond(w http.ResponseWriter, r *http.Request) error {
	var req ResponseRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	key := r.Header.Get("Idempotency-Key")
	if !req.Stream {
		resp, replayed, err := h.svc.Respond(r.Context(), httpapi.Caller(r).AccountID, key, req, nil)
		if err != nil {
			return err
		}
		if replayed {
			w.Header().Set(ReplayedHeader, "true")
		}
		return httpapi.WriteJSON(w, http.StatusOK, resp)
	}
	ev := &events{w: w, rc: http.NewResponseController(w)}
	resp, replayed, err := h.svc.Respond(r.Context(), httpapi.Caller(r).AccountID, key, req, func(text string) error {
		return ev.send("response.delta", map[string]string{"delta": text})
	})
	switch {
	case err != nil && !ev.started:
		return err // nothing sent yet: an ordinary problem response
	case err != nil:
		// The stream has begun: the failure is its last event, as a problem document.
		e := httpapi.AsError(err)
		_ = ev.send("error", e.Problem(httpapi.RequestID(r.Context())))
		return nil
	}
	if replayed {
		w.Header().Set(ReplayedHeader, "true")
		if err := ev.send("response.delta", map[string]string{"delta": resp.OutputText}); err != nil {
			return nil
		}
	}
	_ = ev.send("response.completed", resp)
	return nil
}

// events writes server-sent events, flushing each.
type events struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (e *events) send(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if !e.started {
		h := e.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		e.w.WriteHeader(http.StatusOK)
		e.started = true
	}
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return err
	}
	if err := e.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

func (h *handlers) usage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	rep, err := h.svc.Usage(r.Context(), httpapi.Caller(r).AccountID, UsageQuery{From: q.Get("from"), To: q.Get("to"),
		Profile: q.Get("profile"), Provider: q.Get("provider")})
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rep)
}
