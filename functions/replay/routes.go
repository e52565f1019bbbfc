package replay

import (
	"net/http"

	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Route patterns.
const (
	base       = "/api/bots/{botID}/replay"
	executions = base + "/executions"
	execution  = executions + "/{executionID}"
	simulation = base + "/simulations"
	fixtures   = base + "/fixtures"
	fixture    = fixtures + "/{fixtureID}"
	runs       = base + "/runs"
	run        = runs + "/{runID}"
	result     = run + "/results/{fixtureID}"
)

// Access of the routes (and of the MCP tools, which have the same). Reads need
// reactions:read, like the runtime's trace routes; a simulation, a fixture's export or
// deletion and a regression run are operations on the bot's reactions, so they need
// reactions:write and the Reactions right, as editing a reaction does. Every route needs
// the replay rollout feature (403 feature_not_enabled without it).
var (
	readAccess  = httpapi.Need("reactions:read").InRollout(auth.RolloutReplay)
	writeAccess = httpapi.Need("reactions:write", auth.RightReactions).InRollout(auth.RolloutReplay)
)

// Routes registers the replay routes.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &handlers{svc: svc, cursors: cursors}
	mux.Handle("GET "+executions, readAccess, h.listExecutions)
	mux.Handle("GET "+execution, readAccess, h.getExecution)
	// A simulation stores nothing, but it is an operation (it runs a flow), not a read: POST,
	// audited, with the write access.
	mux.Handle("POST "+simulation, writeAccess, h.simulate)
	mux.Handle("GET "+fixtures, readAccess, h.listFixtures)
	mux.Handle("POST "+fixtures, writeAccess, h.exportFixture)
	mux.Handle("GET "+fixture, readAccess, h.getFixture)
	mux.Handle("DELETE "+fixture, writeAccess, h.deleteFixture)
	mux.Handle("GET "+runs, readAccess, h.listRuns)
	mux.Handle("POST "+runs, writeAccess, h.startRun)
	mux.Handle("GET "+run, readAccess, h.getRun)
	mux.Handle("GET "+result, readAccess, h.getResult)
}

type handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

func (h *handlers) listExecutions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := ExecutionFilter{ReactionID: q.Get("reaction_id"), Status: q.Get("status")}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]runtime.Execution, string, error) {
		return h.svc.Executions(r.Context(), r.PathValue("botID"), f, limit, cursor)
	})
}

func (h *handlers) getExecution(w http.ResponseWriter, r *http.Request) error {
	d, err := h.svc.Execution(r.Context(), r.PathValue("botID"), r.PathValue("executionID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

func (h *handlers) simulate(w http.ResponseWriter, r *http.Request) error {
	var req SimulationRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	sim, err := h.svc.Simulate(r.Context(), r.PathValue("botID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, sim)
}

func (h *handlers) listFixtures(w http.ResponseWriter, r *http.Request) error {
	reaction := r.URL.Query().Get("reaction_id")
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]FixtureSummary, string, error) {
		return h.svc.Fixtures(r.Context(), r.PathValue("botID"), reaction, limit, cursor)
	})
}

func (h *handlers) exportFixture(w http.ResponseWriter, r *http.Request) error {
	var req FixtureRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	f, err := h.svc.ExportFixture(r.Context(), bot, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/replay/fixtures/"+f.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, f)
}

func (h *handlers) getFixture(w http.ResponseWriter, r *http.Request) error {
	f, err := h.svc.Fixture(r.Context(), r.PathValue("botID"), r.PathValue("fixtureID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, f)
}

func (h *handlers) deleteFixture(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.DeleteFixture(r.Context(), r.PathValue("botID"), r.PathValue("fixtureID")); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

func (h *handlers) listRuns(w http.ResponseWriter, r *http.Request) error {
	reaction := r.URL.Query().Get("reaction_id")
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Run, string, error) {
		return h.svc.Runs(r.Context(), r.PathValue("botID"), reaction, limit, cursor)
	})
}

func (h *handlers) startRun(w http.ResponseWriter, r *http.Request) error {
	var req RunRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	run, err := h.svc.StartRun(r.Context(), bot, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/replay/runs/"+run.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, run)
}

func (h *handlers) getRun(w http.ResponseWriter, r *http.Request) error {
	run, err := h.svc.Run(r.Context(), r.PathValue("botID"), r.PathValue("runID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, run)
}

func (h *handlers) getResult(w http.ResponseWriter, r *http.Request) error {
	res, err := h.svc.RunResult(r.Context(), r.PathValue("botID"), r.PathValue("runID"), r.PathValue("fixtureID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}
