package crm

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// DiscoveryTTL is how long a connection's discovered objects, fields and pipelines are
// served from the store before the CRM is asked again: long enough that a user building a
// mapping does not wait on the CRM at every step, short enough that a field just added in
// the CRM shows up soon (and ?refresh=true shows it at once).
const DiscoveryTTL = 10 * time.Minute

// Discovery is one answer of field discovery with when the CRM gave it.
type Discovery[T any] struct {
	Data []T `json:"data"`
	// FetchedAt is when the CRM answered: older than the request when it came from the
	// cache.
	FetchedAt time.Time `json:"fetched_at"`
	// cached is whether it came from the store.
	cached bool
}

// cached is a discovery answer as stored, expiring after DiscoveryTTL.
type cached[T any] struct {
	Data      []T       `json:"data"`
	FetchedAt time.Time `json:"fetched_at"`
}

// discover returns what fetch answers for c, from the cache at key unless refresh or
// expired. A provider's error is mapped to the family's problems (and a refusal of the
// credentials marks the connection for reconnection).
func discover[T any](ctx context.Context, s *Service, bot string, c Connection, key store.Key, refresh bool,
	fetch func(context.Context, crmapi.Client) ([]T, error)) (Discovery[T], error) {
	if !refresh {
		it, err := s.store.Get(ctx, key)
		switch {
		case err == nil:
			if v, err := store.Decode[cached[T]](it); err == nil {
				return Discovery[T]{Data: v.Data, FetchedAt: v.FetchedAt, cached: true}, nil
			}
		case !errors.Is(err, store.ErrNotFound):
			return Discovery[T]{}, err
		}
	}
	cl, err := s.clientOf(ctx, bot, c)
	if err != nil {
		return Discovery[T]{}, err
	}
	data, err := fetch(ctx, cl)
	if err != nil {
		return Discovery[T]{}, s.callProblem(ctx, bot, c.ID, err)
	}
	if data == nil {
		data = []T{}
	}
	now := s.now()
	v := cached[T]{Data: data, FetchedAt: stamp(now)}
	if it, err := item(key, 1, v); err == nil {
		it.ExpiresAt = now.Add(DiscoveryTTL)
		// A cache that cannot be written (an object with more fields than an item holds)
		// only costs the next request a call to the CRM.
		if err := s.store.Put(ctx, it, store.Always); err != nil {
			s.log.WarnContext(ctx, "crm: cache discovery", "connection", c.ID, "key", key.SK, "error", err)
		}
	}
	return Discovery[T]{Data: v.Data, FetchedAt: v.FetchedAt}, nil
}

// clientOf is client for a connection already loaded.
func (s *Service) clientOf(ctx context.Context, bot string, c Connection) (crmapi.Client, error) {
	creds, err := s.credentials(ctx, bot, c)
	if err != nil {
		return nil, err
	}
	cl, err := s.newClient(c.Provider, creds, c.entities())
	if err != nil {
		return nil, httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "this deployment has no client for the connection's CRM").Wrap(err)
	}
	return cl, nil
}

// callProblem maps the error of a call to the CRM, marking the connection for
// reconnection when the CRM refused its credentials.
func (s *Service) callProblem(ctx context.Context, bot, id string, err error) error {
	if errors.Is(err, crmapi.ErrUnauthorized) {
		s.markReconnect(context.WithoutCancel(ctx), bot, id)
	}
	if errors.Is(err, crmapi.ErrNotFound) {
		return httpapi.NotFound("CRM object")
	}
	return providerProblem(err)
}

// Objects returns the object types of the connection's CRM.
func (s *Service) Objects(ctx context.Context, bot, id string, refresh bool) (Discovery[crmapi.Object], error) {
	c, err := s.load(ctx, bot, id)
	if err != nil {
		return Discovery[crmapi.Object]{}, err
	}
	return discover(ctx, s, bot, c, objectsKey(bot, id), refresh, func(ctx context.Context, cl crmapi.Client) ([]crmapi.Object, error) {
		return cl.Objects(ctx)
	})
}

// Fields returns the fields of one object of the connection's CRM; 404 for an object the
// CRM does not have.
func (s *Service) Fields(ctx context.Context, bot, id, object string, refresh bool) (Discovery[crmapi.Field], error) {
	c, err := s.load(ctx, bot, id)
	if err != nil {
		return Discovery[crmapi.Field]{}, err
	}
	return s.fields(ctx, bot, c, object, refresh)
}

func (s *Service) fields(ctx context.Context, bot string, c Connection, object string, refresh bool) (Discovery[crmapi.Field], error) {
	if !objectName.MatchString(object) {
		return Discovery[crmapi.Field]{}, httpapi.NotFound("CRM object")
	}
	return discover(ctx, s, bot, c, fieldsKey(bot, c.ID, object), refresh, func(ctx context.Context, cl crmapi.Client) ([]crmapi.Field, error) {
		return cl.Fields(ctx, object)
	})
}

// Pipelines returns the deal pipelines and their stages.
func (s *Service) Pipelines(ctx context.Context, bot, id string, refresh bool) (Discovery[crmapi.Pipeline], error) {
	c, err := s.load(ctx, bot, id)
	if err != nil {
		return Discovery[crmapi.Pipeline]{}, err
	}
	return s.pipelines(ctx, bot, c, refresh)
}

func (s *Service) pipelines(ctx context.Context, bot string, c Connection, refresh bool) (Discovery[crmapi.Pipeline], error) {
	return discover(ctx, s, bot, c, pipelinesKey(bot, c.ID), refresh, func(ctx context.Context, cl crmapi.Client) ([]crmapi.Pipeline, error) {
		return cl.Pipelines(ctx)
	})
}

// refreshParam reads ?refresh=true|false.
func refreshParam(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("refresh")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil || (v != "true" && v != "false") {
		return false, httpapi.InvalidParam("refresh", "refresh must be true or false")
	}
	return b, nil
}

func (h *Handlers) objects(w http.ResponseWriter, r *http.Request) error {
	refresh, err := refreshParam(r)
	if err != nil {
		return err
	}
	d, err := h.svc.Objects(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"), refresh)
	if err != nil {
		return retryAfter(w, err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

func (h *Handlers) fields(w http.ResponseWriter, r *http.Request) error {
	refresh, err := refreshParam(r)
	if err != nil {
		return err
	}
	d, err := h.svc.Fields(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"), r.PathValue("object"), refresh)
	if err != nil {
		return retryAfter(w, err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

func (h *Handlers) pipelines(w http.ResponseWriter, r *http.Request) error {
	refresh, err := refreshParam(r)
	if err != nil {
		return err
	}
	d, err := h.svc.Pipelines(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"), refresh)
	if err != nil {
		return retryAfter(w, err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}
