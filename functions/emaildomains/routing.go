package emaildomains

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// ActionType is what an inbound route does with a message, besides storing it.
type ActionType string

// The action types. Every message is stored whatever the action.
const (
	// ActionStore only stores the message.
	ActionStore ActionType = "store"
	// ActionForward forwards it to an address.
	ActionForward ActionType = "forward"
	// ActionReaction runs a reaction for the subscriber whose email is the sender's.
	ActionReaction ActionType = "reaction"
)

// Action is a route's action: {"type": "store"}, {"type": "forward", "to": "address"} or
// {"type": "reaction", "reaction_id": "rct_..."}.
type Action struct {
	Type       ActionType `json:"type"`
	To         string     `json:"to,omitempty"`
	ReactionID string     `json:"reaction_id,omitempty"`
}

// Limits of routes.
const (
	// MaxRoutes is how many inbound routes a bot may have.
	MaxRoutes = 50
	// MaxMatchLen bounds a match (a local part is at most 64 characters).
	MaxMatchLen = 64
	maxAddress  = 254
)

// InboundRoute maps the addresses of a verified domain that Match matches to an Action.
type InboundRoute struct {
	ID       string `json:"id"`
	DomainID string `json:"domain_id"`
	// Domain is the domain's name, for reading.
	Domain string `json:"domain"`
	// Match is a local part ("support"), a prefix pattern ("orders+*": orders+ followed by
	// anything) or "*" (every address). Letters compare ignoring case. A message goes to the
	// exact match, else the longest pattern that matches.
	Match     string    `json:"match"`
	Action    Action    `json:"action"`
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// NewRoute is a create request.
type NewRoute struct {
	DomainID string  `json:"domain_id"`
	Match    string  `json:"match"`
	Action   *Action `json:"action"`
}

// Validate checks what needs no store.
func (n *NewRoute) Validate() error {
	var p httpapi.Problems
	p.Require("domain_id", n.DomainID)
	if m, ok := checkMatch(&p, "match", n.Match); ok {
		n.Match = m
	}
	if n.Action == nil {
		p.Add("action", "is required")
	} else {
		checkAction(&p, "action", n.Action)
	}
	return p.Err()
}

// RouteChange is a PATCH body: the revision read and the members to change.
type RouteChange struct {
	ExpectedRevision *int64  `json:"expected_revision"`
	DomainID         *string `json:"domain_id"`
	Match            *string `json:"match"`
	Action           *Action `json:"action"`
}

// Validate checks what needs no store.
func (c *RouteChange) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(c.ExpectedRevision)
	if c.DomainID == nil && c.Match == nil && c.Action == nil {
		p.Add("action", "give domain_id, match, action or several")
	}
	if c.DomainID != nil && *c.DomainID == "" {
		p.Add("domain_id", "cannot be empty")
	}
	if c.Match != nil {
		if m, ok := checkMatch(&p, "match", *c.Match); ok {
			c.Match = &m
		}
	}
	if c.Action != nil {
		checkAction(&p, "action", c.Action)
	}
	return p.Err()
}

// checkMatch adds the problems of a match and returns it in lower case.
func checkMatch(p *httpapi.Problems, field, raw string) (string, bool) {
	m := strings.ToLower(raw)
	switch {
	case m == "":
		p.Add(field, "is required: a local part (support), a pattern (orders+*) or *")
		return "", false
	case len(m) > MaxMatchLen:
		p.Add(field, "at most %d characters", MaxMatchLen)
		return "", false
	}
	local := strings.TrimSuffix(m, "*")
	for i := 0; i < len(local); i++ {
		c := local[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '+' || c == '-') {
			p.Add(field, "may hold letters, digits, . _ + - and one * at the end only")
			return "", false
		}
	}
	return m, true
}

// checkAction adds the problems of an action that need no store.
func checkAction(p *httpapi.Problems, field string, a *Action) {
	switch a.Type {
	case ActionStore:
		if a.To != "" || a.ReactionID != "" {
			p.Add(field, "a store action takes no to or reaction_id")
		}
	case ActionForward:
		if a.ReactionID != "" {
			p.Add(field+".reaction_id", "is not taken by a forward action")
		}
		addr, err := mail.ParseAddress(a.To)
		switch {
		case a.To == "":
			p.Add(field+".to", "is required: the address to forward to")
		case err != nil || addr.Address != a.To || len(a.To) > maxAddress:
			p.Add(field+".to", "must be one email address, without a display name (at most %d characters)", maxAddress)
		default:
			a.To = lowerDomain(a.To)
		}
	case ActionReaction:
		if a.To != "" {
			p.Add(field+".to", "is not taken by a reaction action")
		}
		if !ids.Valid("rct", a.ReactionID) {
			p.Add(field+".reaction_id", "must be a reaction id (rct_...)")
		}
	case "":
		p.Add(field+".type", "is required: store, forward or reaction")
	default:
		p.Add(field+".type", "must be store, forward or reaction")
	}
}

// lowerDomain lower-cases the domain of an address (its local part is the receiver's).
func lowerDomain(addr string) string {
	at := strings.LastIndexByte(addr, '@')
	return addr[:at+1] + strings.ToLower(addr[at+1:])
}

func domainOf(addr string) string { return addr[strings.LastIndexByte(addr, '@')+1:] }

// routeDomain loads the domain a route names: it must be the bot's (400) and verified (409).
func (s *Service) routeDomain(ctx context.Context, bot, id string) (domainRecord, error) {
	rec, err := s.load(ctx, bot, id)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		var p httpapi.Problems
		p.Add("domain_id", "no sending domain %q in this bot", id)
		return domainRecord{}, p.Err()
	}
	if err != nil {
		return domainRecord{}, err
	}
	if !rec.Claimed {
		return domainRecord{}, httpapi.Errorf(httpapi.KindConflict, "domain_not_verified",
			"%s has not verified yet; mail reaches only verified domains: publish its records and verify it", rec.Name)
	}
	return rec, nil
}

// checkLoop refuses forwarding to the route's own domain: the forwarded message would come
// back to the route.
func checkLoop(a Action, domain string) error {
	if a.Type == ActionForward && domainOf(a.To) == domain {
		var p httpapi.Problems
		p.Add("action.to", "forwarding to an address of %s would come back to this route", domain)
		return p.Err()
	}
	return nil
}

type routeRecord struct {
	InboundRoute
}

func (r routeRecord) item(bot string) (store.Item, error) {
	b, err := store.Encode(r)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: routeKey(bot, r.ID), Revision: r.Revision, Data: b}, nil
}

// matchItem makes a route's match unique in its domain.
func matchItem(bot string, r InboundRoute) (store.Item, error) {
	b, err := store.Encode(struct {
		RouteID string `json:"route_id"`
	}{r.ID})
	return store.Item{Key: matchKey(bot, r.DomainID, r.Match), Revision: 1, Data: b}, err
}

func domainRoutesKey(bot, domainID string) store.Key { return countKey(bot, "RTD#"+domainID) }

// errRetry is a write that lost a race on a counter other than the one store.Counted moves.
var errRetry = errors.New("retry")

// CreateRoute adds an inbound route to a verified domain of the bot.
func (s *Service) CreateRoute(ctx context.Context, bot string, in NewRoute) (InboundRoute, error) {
	if err := in.Validate(); err != nil {
		return InboundRoute{}, err
	}
	dom, err := s.routeDomain(ctx, bot, in.DomainID)
	if err != nil {
		return InboundRoute{}, err
	}
	if err := checkLoop(*in.Action, dom.Name); err != nil {
		return InboundRoute{}, err
	}
	now := stamp(s.now())
	r := InboundRoute{ID: ids.At("eir", now), DomainID: dom.ID, Domain: dom.Name, Match: in.Match, Action: *in.Action,
		Revision: 1, CreatedAt: now, UpdatedAt: now}
	it, err := routeRecord{r}.item(bot)
	if err != nil {
		return InboundRoute{}, err
	}
	mit, err := matchItem(bot, r)
	if err != nil {
		return InboundRoute{}, err
	}
	for range updateAttempts {
		err = store.Counted(ctx, s.store, countKey(bot, "RT"), 1, func(c store.Counter) error {
			if c.Count >= MaxRoutes {
				return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a bot has at most %d inbound routes", MaxRoutes).With("limit", MaxRoutes)
			}
			perDomain, err := store.ReadCounter(ctx, s.store, domainRoutesKey(bot, dom.ID), 1)
			if err != nil {
				return err
			}
			err = s.store.Transact(ctx, []store.Write{c.Write, perDomain.Write, store.PutOp(it, store.MustNotExist),
				store.PutOp(mit, store.MustNotExist), store.CheckOp(domainKey(bot, dom.ID), store.MustExist)})
			var ce *store.ConditionError
			switch {
			case errors.As(err, &ce) && ce.Index == 1:
				return errRetry
			case errors.As(err, &ce) && ce.Index == 3:
				return s.matchTaken(ctx, bot, r)
			case errors.As(err, &ce) && ce.Index == 4:
				var p httpapi.Problems
				p.Add("domain_id", "no sending domain %q in this bot", dom.ID)
				return p.Err()
			}
			return err
		})
		if !errors.Is(err, errRetry) {
			break
		}
	}
	if errors.Is(err, errRetry) {
		return InboundRoute{}, fmt.Errorf("create route: the domain's routes keep changing: %w", store.ErrUnavailable)
	}
	if err != nil {
		return InboundRoute{}, fmt.Errorf("create route: %w", err)
	}
	return r, nil
}

// matchTaken is the 409 for a match the domain has a route for already.
func (s *Service) matchTaken(ctx context.Context, bot string, r InboundRoute) error {
	e := httpapi.Errorf(httpapi.KindConflict, "name_taken", "%s already has a route matching %q", r.Domain, r.Match)
	if it, err := s.store.Get(ctx, matchKey(bot, r.DomainID, r.Match)); err == nil {
		if m, err := store.Decode[struct {
			RouteID string `json:"route_id"`
		}](it); err == nil {
			e = e.With("conflicting_id", m.RouteID)
		}
	}
	return e
}

func (s *Service) loadRoute(ctx context.Context, bot, id string) (InboundRoute, error) {
	if !ids.Valid("eir", id) {
		return InboundRoute{}, httpapi.NotFound("inbound route")
	}
	it, err := s.store.Get(ctx, routeKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return InboundRoute{}, httpapi.NotFound("inbound route")
	}
	if err != nil {
		return InboundRoute{}, err
	}
	rec, err := store.Decode[routeRecord](it)
	return rec.InboundRoute, err
}

// GetRoute returns an inbound route.
func (s *Service) GetRoute(ctx context.Context, bot, id string) (InboundRoute, error) {
	return s.loadRoute(ctx, bot, id)
}

// ListRoutes returns a page of the bot's inbound routes, oldest first.
func (s *Service) ListRoutes(ctx context.Context, bot string, limit int, cursor string) ([]InboundRoute, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: emailPK(bot), Prefix: routePrefix, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]InboundRoute, 0, len(page.Items))
	for _, it := range page.Items {
		rec, err := store.Decode[routeRecord](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, rec.InboundRoute)
	}
	return out, page.Next, nil
}

// allRoutes returns every route of the bot (there are at most MaxRoutes).
func (s *Service) allRoutes(ctx context.Context, bot string) ([]InboundRoute, error) {
	out, next, err := s.ListRoutes(ctx, bot, store.MaxQueryLimit, "")
	for err == nil && next != "" {
		var more []InboundRoute
		more, next, err = s.ListRoutes(ctx, bot, store.MaxQueryLimit, next)
		out = append(out, more...)
	}
	return out, err
}

// UpdateRoute changes a route under its revision.
func (s *Service) UpdateRoute(ctx context.Context, bot, id string, ch RouteChange) (InboundRoute, error) {
	if err := ch.Validate(); err != nil {
		return InboundRoute{}, err
	}
	for range updateAttempts {
		old, err := s.loadRoute(ctx, bot, id)
		if err != nil {
			return InboundRoute{}, err
		}
		if old.Revision != *ch.ExpectedRevision {
			return InboundRoute{}, httpapi.StaleRevision(old.Revision)
		}
		r := old
		if ch.DomainID != nil && *ch.DomainID != old.DomainID {
			dom, err := s.routeDomain(ctx, bot, *ch.DomainID)
			if err != nil {
				return InboundRoute{}, err
			}
			r.DomainID, r.Domain = dom.ID, dom.Name
		}
		if ch.Match != nil {
			r.Match = *ch.Match
		}
		if ch.Action != nil {
			r.Action = *ch.Action
		}
		if err := checkLoop(r.Action, r.Domain); err != nil {
			return InboundRoute{}, err
		}
		r.Revision++
		r.UpdatedAt = stamp(s.now())
		it, err := routeRecord{r}.item(bot)
		if err != nil {
			return InboundRoute{}, err
		}
		writes := []store.Write{store.PutOp(it, store.RevisionIs(old.Revision))}
		moved := r.DomainID != old.DomainID || r.Match != old.Match
		if moved {
			mit, err := matchItem(bot, r)
			if err != nil {
				return InboundRoute{}, err
			}
			writes = append(writes, store.DeleteOp(matchKey(bot, old.DomainID, old.Match), store.Always), store.PutOp(mit, store.MustNotExist))
		}
		if r.DomainID != old.DomainID {
			from, err := store.ReadCounter(ctx, s.store, domainRoutesKey(bot, old.DomainID), -1)
			if err != nil {
				return InboundRoute{}, err
			}
			to, err := store.ReadCounter(ctx, s.store, domainRoutesKey(bot, r.DomainID), 1)
			if err != nil {
				return InboundRoute{}, err
			}
			writes = append(writes, from.Write, to.Write, store.CheckOp(domainKey(bot, r.DomainID), store.MustExist))
		}
		err = s.store.Transact(ctx, writes)
		var ce *store.ConditionError
		switch {
		case errors.As(err, &ce) && ce.Index == 0:
			cur, err := s.loadRoute(ctx, bot, id)
			if err != nil {
				return InboundRoute{}, err
			}
			return InboundRoute{}, httpapi.StaleRevision(cur.Revision)
		case errors.As(err, &ce) && moved && ce.Index == 2:
			return InboundRoute{}, s.matchTaken(ctx, bot, r)
		case errors.As(err, &ce):
			continue // a counter or the new domain changed meanwhile: again
		case err != nil:
			return InboundRoute{}, fmt.Errorf("update route: %w", err)
		}
		return r, nil
	}
	return InboundRoute{}, fmt.Errorf("update route %s: it keeps changing: %w", id, store.ErrUnavailable)
}

// DeleteRoute deletes a route (expected is the revision read, nil for any).
func (s *Service) DeleteRoute(ctx context.Context, bot, id string, expected *int64) error {
	for range updateAttempts {
		r, err := s.loadRoute(ctx, bot, id)
		if err != nil {
			return err
		}
		if expected != nil && r.Revision != *expected {
			return httpapi.StaleRevision(r.Revision)
		}
		err = store.Counted(ctx, s.store, countKey(bot, "RT"), -1, func(c store.Counter) error {
			perDomain, err := store.ReadCounter(ctx, s.store, domainRoutesKey(bot, r.DomainID), -1)
			if err != nil {
				return err
			}
			return s.store.Transact(ctx, []store.Write{c.Write, store.DeleteOp(routeKey(bot, id), store.RevisionIs(r.Revision)),
				store.DeleteOp(matchKey(bot, r.DomainID, r.Match), store.Always), perDomain.Write})
		})
		var ce *store.ConditionError
		if errors.As(err, &ce) && ce.Index > 0 {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete route: %w", err)
		}
		return nil
	}
	return fmt.Errorf("delete route %s: it keeps changing: %w", id, store.ErrUnavailable)
}

// routeCount is how many routes a domain has, as read, for its deletion: the write that goes
// with the deletion fails if a route was added meanwhile.
type routeCount struct {
	Count  int64
	exists bool
	rev    int64
	key    store.Key
}

func (s *Service) domainRoutes(ctx context.Context, bot, domainID string) (routeCount, error) {
	k := domainRoutesKey(bot, domainID)
	it, err := s.store.Get(ctx, k)
	if errors.Is(err, store.ErrNotFound) {
		return routeCount{key: k}, nil
	}
	if err != nil {
		return routeCount{}, err
	}
	return routeCount{Count: it.Count, exists: true, rev: it.Revision, key: k}, nil
}

// unchanged deletes the (zero) counter with the domain, on the condition it did not move.
func (c routeCount) unchanged() store.Write {
	if c.exists {
		return store.DeleteOp(c.key, store.RevisionIs(c.rev))
	}
	return store.CheckOp(c.key, store.MustNotExist)
}

// routeIDs lists the routes of a domain.
func (s *Service) routeIDs(ctx context.Context, bot, domainID string) ([]string, error) {
	routes, err := s.allRoutes(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, r := range routes {
		if r.DomainID == domainID {
			out = append(out, r.ID)
		}
	}
	return out, nil
}

// pick returns the route of routes that takes mail for local@ the domain: the exact match,
// else the longest matching pattern ("*" is the shortest); nil when none does.
func pick(routes []InboundRoute, domainID, local string) *InboundRoute {
	local = strings.ToLower(local)
	var best *InboundRoute
	for i := range routes {
		r := &routes[i]
		if r.DomainID != domainID {
			continue
		}
		if r.Match == local {
			return r
		}
		prefix, pattern := strings.CutSuffix(r.Match, "*")
		if pattern && strings.HasPrefix(local, prefix) && (best == nil || len(r.Match) > len(best.Match)) {
			best = r
		}
	}
	return best
}
