package emailevents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// The reasons an address is suppressed, from the least to the most severe.
const (
	ReasonUnsubscribed = "unsubscribed"
	ReasonBounced      = "bounced"
	ReasonComplained   = "complained"
)

// reasons lists the reasons in order of severity.
var reasons = []string{ReasonUnsubscribed, ReasonBounced, ReasonComplained}

func validReason(r string) bool { return slices.Contains(reasons, r) }

func severity(r string) int { return slices.Index(reasons, r) }

// Limits of the suppression list.
const (
	// MaxLookup bounds the addresses of one Suppressed call: one batch of a send.
	MaxLookup = store.MaxGetMany
	// MaxAddressLen is the longest address there is (RFC 5321's path limit less its
	// brackets).
	MaxAddressLen = 254
)

// Suppression is an address the bot sends no more email to, whatever the campaign.
//
// An address is suppressed once: a later event of another reason (a complaint about a
// message still in flight when the recipient unsubscribed) upgrades Reason to the most
// severe one seen, complained over bounced over unsubscribed, so that a customer about to
// re-allow the address sees the strongest reason not to; History keeps the first time of
// each reason. The same reason again changes nothing: a repeated one-click POST or a
// provider's redelivery is no new event.
type Suppression struct {
	Address string `json:"address"`
	Reason  string `json:"reason"`
	// At is when the address was first suppressed, CampaignID the campaign whose message
	// led to it (null when the suppression came without one).
	At         time.Time `json:"at"`
	CampaignID *string   `json:"campaign_id"`
	// UpdatedAt is the time of the latest event in History.
	UpdatedAt time.Time          `json:"updated_at"`
	History   []SuppressionEvent `json:"history"`
	Revision  int64              `json:"revision"`
}

// SuppressionEvent is the first time one reason reached the address.
type SuppressionEvent struct {
	Reason     string    `json:"reason"`
	At         time.Time `json:"at"`
	CampaignID *string   `json:"campaign_id"`
}

func (sup Suppression) item(bot string) (store.Item, error) {
	b, err := store.Encode(sup)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{
		Key:      suppressKey(bot, sup.Address),
		GSI1:     store.IndexKey{PK: byReasonPK(bot, sup.Reason), SK: sup.Address},
		Revision: sup.Revision,
		Data:     b,
	}, nil
}

// normalize returns the address as the list keys it, lower-cased, and whether it looks
// like an address at all (something@something of plain printable text).
func normalize(address string) (string, bool) {
	a := strings.ToLower(strings.TrimSpace(address))
	if len(a) < 3 || len(a) > MaxAddressLen || !utf8.ValidString(a) {
		return "", false
	}
	if at := strings.LastIndexByte(a, '@'); at <= 0 || at == len(a)-1 {
		return "", false
	}
	for _, r := range a {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return "", false
		}
	}
	return a, true
}

// errNotAddress is what the service answers for a suppression of something that is no
// address; the address is not in it, since errors are logged.
var errNotAddress = errors.New("emailevents: not an email address")

// Suppress adds address to the bot's suppression list for reason ("unsubscribed",
// "bounced", "complained"). It is idempotent (see Suppression for a second reason).
func (s *Service) Suppress(ctx context.Context, bot, address, reason string) error {
	_, err := s.suppress(ctx, bot, address, reason, "")
	return err
}

// MaxImport bounds the addresses of one POST .../email/suppressions.
const MaxImport = 500

// NewSuppressions is the body of POST .../email/suppressions: addresses the bot's
// campaigns must not mail (a list brought from another platform, a person who asked by
// phone), each suppressed for reason.
type NewSuppressions struct {
	Addresses []string `json:"addresses"`
	Reason    string   `json:"reason"`
}

// Validate checks the reason and every address, naming an address by its index only (the
// problem is logged, the address is personal data).
func (n *NewSuppressions) Validate() error {
	var p httpapi.Problems
	if !validReason(n.Reason) {
		p.Add("reason", "is required: unsubscribed, bounced or complained")
	}
	switch {
	case len(n.Addresses) == 0:
		p.Add("addresses", "is required: 1 to %d addresses", MaxImport)
	case len(n.Addresses) > MaxImport:
		p.Add("addresses", "at most %d addresses a request", MaxImport)
	default:
		for i, a := range n.Addresses {
			if _, ok := normalize(a); !ok {
				p.Add(fmt.Sprintf("addresses[%d]", i), "is not an email address")
			}
		}
	}
	return p.Err()
}

// ImportResult counts what a POST .../email/suppressions did, each address once: added
// to the list or given the new reason (Suppressed), or already on it with that reason
// (Unchanged).
type ImportResult struct {
	Suppressed int `json:"suppressed"`
	Unchanged  int `json:"unchanged"`
}

// Import suppresses every address of n (validated) for its reason, as an event of that
// reason would (see Suppression for an address already on the list). Addresses that are
// the same once lower-cased count once. A failure partway leaves the addresses before it
// suppressed: the request can be sent again as it was.
func (s *Service) Import(ctx context.Context, bot string, n NewSuppressions) (ImportResult, error) {
	var res ImportResult
	seen := make(map[string]bool, len(n.Addresses))
	for _, a := range n.Addresses {
		addr, _ := normalize(a)
		if seen[addr] {
			continue
		}
		seen[addr] = true
		changed, err := s.suppress(ctx, bot, addr, n.Reason, "")
		if err != nil {
			return ImportResult{}, err
		}
		if changed {
			res.Suppressed++
		} else {
			res.Unchanged++
		}
	}
	return res, nil
}

// suppressRetries bounds the rounds Suppress runs when concurrent events for the same
// address keep changing it between its read and its write.
const suppressRetries = 3

// suppress adds address for reason; changed is false when it had that reason already.
func (s *Service) suppress(ctx context.Context, bot, address, reason, campaign string) (changed bool, err error) {
	addr, ok := normalize(address)
	if !ok {
		return false, errNotAddress
	}
	if !validReason(reason) {
		return false, fmt.Errorf("emailevents: unknown suppression reason %q", reason)
	}
	var cid *string
	if campaign != "" {
		cid = &campaign
	}
	for range suppressRetries {
		now := stamp(s.now())
		ev := SuppressionEvent{Reason: reason, At: now, CampaignID: cid}
		it, err := s.store.Get(ctx, suppressKey(bot, addr))
		var sup Suppression
		cond := store.MustNotExist
		switch {
		case errors.Is(err, store.ErrNotFound):
			sup = Suppression{Address: addr, Reason: reason, At: now, CampaignID: cid, UpdatedAt: now,
				History: []SuppressionEvent{ev}, Revision: 1}
		case err != nil:
			return false, fmt.Errorf("read suppression: %w", err)
		default:
			if sup, err = store.Decode[Suppression](it); err != nil {
				return false, err
			}
			if slices.ContainsFunc(sup.History, func(e SuppressionEvent) bool { return e.Reason == reason }) {
				return false, nil
			}
			cond = store.RevisionIs(sup.Revision)
			sup.History = append(sup.History, ev)
			if severity(reason) > severity(sup.Reason) {
				sup.Reason = reason
			}
			sup.UpdatedAt = now
			sup.Revision++
		}
		put, err := sup.item(bot)
		if err != nil {
			return false, err
		}
		err = s.store.Put(ctx, put, cond)
		if errors.Is(err, store.ErrConditionFailed) {
			continue // another event for the address won the race: read it again
		}
		if err != nil {
			return false, fmt.Errorf("write suppression: %w", err)
		}
		return true, nil
	}
	return false, fmt.Errorf("suppress: the address kept changing: %w", store.ErrUnavailable)
}

// Suppressed returns which of addresses (at most MaxLookup) the bot may not send to:
// each suppressed one, lower-cased, with its reason. Strings that are no address are not
// suppressed (the send refuses them for what they are).
func (s *Service) Suppressed(ctx context.Context, bot string, addresses []string) (map[string]string, error) {
	if len(addresses) > MaxLookup {
		return nil, fmt.Errorf("emailevents: %d addresses in one lookup, at most %d", len(addresses), MaxLookup)
	}
	var addrs []string
	for _, a := range addresses {
		if n, ok := normalize(a); ok && !slices.Contains(addrs, n) {
			addrs = append(addrs, n)
		}
	}
	if len(addrs) == 0 {
		return map[string]string{}, nil
	}
	// One batch read (MaxLookup is store.MaxGetMany): on SQLite one query instead of a
	// statement per address, on DynamoDB one BatchGetItem instead of a round trip each.
	keys := make([]store.Key, len(addrs))
	for i, a := range addrs {
		keys[i] = suppressKey(bot, a)
	}
	items, err := s.store.GetMany(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("read suppressions: %w", err)
	}
	out := make(map[string]string)
	for i, it := range items {
		if it.Key.PK == "" {
			continue // not suppressed
		}
		sup, err := store.Decode[Suppression](it)
		if err != nil {
			return nil, err
		}
		out[addrs[i]] = sup.Reason
	}
	return out, nil
}

// List returns a page of the bot's suppressions in address order, only those of reason
// when it is not empty.
func (s *Service) List(ctx context.Context, bot, reason string, limit int, cursor string) ([]Suppression, string, error) {
	q := store.Query{PK: suppressPK(bot), Limit: limit, Cursor: cursor}
	if reason != "" {
		q = store.Query{Index: store.GSI1, PK: byReasonPK(bot, reason), Limit: limit, Cursor: cursor}
	}
	page, err := s.store.Query(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]Suppression, 0, len(page.Items))
	for _, it := range page.Items {
		sup, err := store.Decode[Suppression](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, sup)
	}
	return out, page.Next, nil
}

// Delete takes address off the bot's suppression list, so that campaigns may send to it
// again (after a bounce the customer knows was a mistake). expected, when not nil, must be
// the suppression's revision: a complaint that arrived since it was read is then not
// dismissed unseen (409 stale_revision).
func (s *Service) Delete(ctx context.Context, bot, address string, expected *int64) error {
	addr, ok := normalize(address)
	if !ok {
		return httpapi.NotFound("suppression")
	}
	it, err := s.store.Get(ctx, suppressKey(bot, addr))
	if errors.Is(err, store.ErrNotFound) {
		return httpapi.NotFound("suppression")
	}
	if err != nil {
		return err
	}
	if expected == nil {
		return s.store.Delete(ctx, it.Key, store.Always)
	}
	if *expected != it.Revision {
		return httpapi.StaleRevision(it.Revision)
	}
	err = s.store.Delete(ctx, it.Key, store.RevisionIs(*expected))
	if errors.Is(err, store.ErrConditionFailed) {
		// Changed or deleted since the read: say which, as the read would now.
		cur, gerr := s.store.Get(ctx, it.Key)
		if errors.Is(gerr, store.ErrNotFound) {
			return httpapi.NotFound("suppression")
		}
		if gerr != nil {
			return gerr
		}
		return httpapi.StaleRevision(cur.Revision)
	}
	return err
}
