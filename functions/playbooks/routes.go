package playbooks

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/botplatform/api/functions/playbooks/catalog"
	"github.com/botplatform/api/shared/httpapi"
)

// The route paths. The install routes name an install without its bot: personal access
// tokens only (the kernel refuses bot tokens on routes without {botID}).
const (
	catalogPath  = "/api/playbooks/catalog"
	playbookPath = catalogPath + "/{playbookID}"
	installsPath = "/api/playbook-installs"
	installPath  = installsPath + "/{installID}"
)

// handlers serves the playbook routes.
type handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the playbook routes. Reads need bots:read (KPIs also the Analytics
// right on the install's bot); the others bots:write and the Reactions right on the bot.
// Every one needs the playbooks rollout. The rights are checked by the service once the
// bot is known (the paths carry no {botID}).
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &handlers{svc: svc, cursors: cursors}
	mux.Handle("GET "+catalogPath, readAccess, h.catalog)
	mux.Handle("GET "+playbookPath, readAccess, h.playbook)
	mux.Handle("POST "+installsPath, writeAccess, h.create)
	mux.Handle("GET "+installsPath, readAccess, h.list)
	mux.Handle("GET "+installPath, readAccess, h.get)
	mux.Handle("PATCH "+installPath, writeAccess, h.answer)
	mux.Handle("DELETE "+installPath, writeAccess, h.delete)
	// Preflight changes nothing; it is POST because it is a computation the client asks
	// for, audited like every POST.
	mux.Handle("POST "+installPath+"/preflight", writeAccess, h.preflight)
	mux.Handle("POST "+installPath+"/install", writeAccess, h.install)
	mux.Handle("POST "+installPath+"/upgrade", writeAccess, h.upgrade)
	mux.Handle("GET "+installPath+"/kpis", readAccess, h.kpis)
}

func (h *handlers) catalog(w http.ResponseWriter, r *http.Request) error {
	vertical := r.URL.Query().Get("vertical")
	if r.URL.Query().Has("vertical") && !slices.Contains(catalog.Verticals(), vertical) {
		return httpapi.InvalidParam("vertical", "vertical must be one of "+strings.Join(catalog.Verticals(), ", "))
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.List[catalog.Playbook]{Data: h.svc.Catalog(vertical)})
}

func (h *handlers) playbook(w http.ResponseWriter, r *http.Request) error {
	version := 0
	if v := r.URL.Query().Get("version"); v != "" || r.URL.Query().Has("version") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return httpapi.InvalidParam("version", "version must be a positive integer")
		}
		version = n
	}
	p, err := h.svc.Playbook(r.PathValue("playbookID"), version)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
}

func (h *handlers) create(w http.ResponseWriter, r *http.Request) error {
	var req CreateRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	in, err := h.svc.Create(r.Context(), httpapi.Caller(r), req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", installsPath+"/"+in.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, in)
}

func (h *handlers) list(w http.ResponseWriter, r *http.Request) error {
	bot := r.URL.Query().Get("bot_id")
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Install, string, error) {
		return h.svc.List(r.Context(), httpapi.Caller(r), bot, limit, cursor)
	})
}

func (h *handlers) get(w http.ResponseWriter, r *http.Request) error {
	in, err := h.svc.Get(r.Context(), httpapi.Caller(r), r.PathValue("installID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, in)
}

func (h *handlers) answer(w http.ResponseWriter, r *http.Request) error {
	var req PatchRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	in, err := h.svc.Answer(r.Context(), httpapi.Caller(r), r.PathValue("installID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, in)
}

func (h *handlers) delete(w http.ResponseWriter, r *http.Request) error {
	rev, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), httpapi.Caller(r), r.PathValue("installID"), rev); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

func (h *handlers) preflight(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	p, err := h.svc.Preflight(r.Context(), httpapi.Caller(r), r.PathValue("installID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
}

func (h *handlers) install(w http.ResponseWriter, r *http.Request) error {
	var req InstallRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	in, err := h.svc.Install(r.Context(), httpapi.Caller(r), r.PathValue("installID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, in)
}

func (h *handlers) upgrade(w http.ResponseWriter, r *http.Request) error {
	var req UpgradeRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	u, err := h.svc.Upgrade(r.Context(), httpapi.Caller(r), r.PathValue("installID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, u)
}

func (h *handlers) kpis(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	from, to, err := ParseRange(h.svc.now(), q.Get("from"), q.Get("to"))
	if err != nil {
		return err
	}
	k, err := h.svc.KPIs(r.Context(), httpapi.Caller(r), r.PathValue("installID"), from, to)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, k)
}
