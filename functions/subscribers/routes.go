package subscribers

import (
	"net/http"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the subscriber, label and field routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers every route of the family with its scope and rights. Subscribers are
// people's data: every subscriber route needs the Dialogs right, and so does reading the
// label and field definitions a subscriber is described with. Defining labels and fields is
// bot configuration, like the flows that use them: the Reactions right. A change these routes
// make that adds labels to a subscriber carries the writes of the Service's LabelHook
// (WithLabelHook) in its transaction.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const read, write = "subscribers:read", "subscribers:write"
	mux.Handle("GET /api/bots/{botID}/subscribers", httpapi.Need(read, auth.RightDialogs), h.list)
	mux.Handle("POST /api/bots/{botID}/subscribers", httpapi.Need(write, auth.RightDialogs), h.upsert)
	mux.Handle("GET /api/bots/{botID}/subscribers/{subscriberID}", httpapi.Need(read, auth.RightDialogs), h.get)
	mux.Handle("PATCH /api/bots/{botID}/subscribers/{subscriberID}", httpapi.Need(write, auth.RightDialogs), h.update)
	mux.Handle("DELETE /api/bots/{botID}/subscribers/{subscriberID}", httpapi.Need(write, auth.RightDialogs), h.delete)
	mux.Handle("POST /api/bots/{botID}/subscribers/{subscriberID}/labels", httpapi.Need(write, auth.RightDialogs), h.addLabel)
	mux.Handle("DELETE /api/bots/{botID}/subscribers/{subscriberID}/labels/{labelID}", httpapi.Need(write, auth.RightDialogs), h.removeLabel)

	mux.Handle("GET /api/bots/{botID}/labels", httpapi.Need(read, auth.RightDialogs), h.listLabels)
	mux.Handle("POST /api/bots/{botID}/labels", httpapi.Need(write, auth.RightReactions), h.createLabel)
	mux.Handle("PATCH /api/bots/{botID}/labels/{labelID}", httpapi.Need(write, auth.RightReactions), h.renameLabel)
	mux.Handle("DELETE /api/bots/{botID}/labels/{labelID}", httpapi.Need(write, auth.RightReactions), h.deleteLabel)

	mux.Handle("GET /api/bots/{botID}/fields", httpapi.Need(read, auth.RightDialogs), h.listFields)
	mux.Handle("POST /api/bots/{botID}/fields", httpapi.Need(write, auth.RightReactions), h.createField)
	mux.Handle("DELETE /api/bots/{botID}/fields/{fieldID}", httpapi.Need(write, auth.RightReactions), h.deleteField)
}

func bot(r *http.Request) string { return r.PathValue("botID") }
