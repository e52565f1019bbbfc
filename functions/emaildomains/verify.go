package emaildomains

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// Resolver looks up the records verify checks. *net.Resolver is one; NewResolver makes the
// deployment's. Names are passed fully qualified, with the final dot.
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
	LookupCNAME(ctx context.Context, host string) (string, error)
	LookupMX(ctx context.Context, name string) ([]*net.MX, error)
}

var _ Resolver = (*net.Resolver)(nil)

// NewResolver returns a resolver that asks the DNS server at server ("host:port", over UDP,
// and TCP when an answer is truncated), or the system's resolver when server is "". A
// deployment names a server to check what the world sees rather than what a local cache or
// split-horizon DNS says; tests name their own.
func NewResolver(server string) Resolver {
	if server == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{
		PreferGo: true,
		// A failing server is an error, not "no such record".
		StrictErrors: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, server)
		},
	}
}

// lookupTimeout bounds each lookup of a verify.
const lookupTimeout = 5 * time.Second

// Bounds of what a verify keeps of what it found at a name.
const (
	maxFound     = 10
	maxFoundText = 1024
)

// errDNS is the 503 for a verify whose lookups failed (not: found nothing).
func errDNS(err error) error {
	return httpapi.E(httpapi.KindUnavailable, "dns_unavailable", "the DNS lookups failed; nothing changed, retry shortly").Wrap(err)
}

// check looks every record up and returns them with what was found.
func (s *Service) check(ctx context.Context, recs []Record) ([]Record, error) {
	out := slices.Clone(recs)
	errs := make([]error, len(out))
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
			defer cancel()
			errs[i] = s.checkOne(ctx, &out[i])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errDNS(err)
	}
	return out, nil
}

// checkOne looks r up: missing when the name has no record of its type (NXDOMAIN, or no
// answer), wrong_value when it has others, found when one is what it must be.
func (s *Service) checkOne(ctx context.Context, r *Record) error {
	fqdn := r.Name + "."
	var found []string
	var err error
	switch r.Type {
	case "TXT":
		found, err = s.resolver.LookupTXT(ctx, fqdn)
	case "MX":
		var mxs []*net.MX
		mxs, err = s.resolver.LookupMX(ctx, fqdn)
		for _, mx := range mxs {
			found = append(found, canonicalHost(mx.Host))
		}
	case "CNAME":
		var cname string
		cname, err = s.resolver.LookupCNAME(ctx, fqdn)
		if cname != "" {
			found = []string{canonicalHost(cname)}
		}
	default:
		return fmt.Errorf("unknown record type %q", r.Type)
	}
	var de *net.DNSError
	if errors.As(err, &de) && de.IsNotFound {
		found, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("look up %s %s: %w", r.Type, r.Name, err)
	}
	r.Found = bounded(found)
	switch {
	case len(found) == 0:
		r.Status = RecordMissing
	case matches(*r, found):
		r.Status = RecordFound
	default:
		r.Status = RecordWrongValue
	}
	return nil
}

func canonicalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

func bounded(found []string) []string {
	out := []string{}
	for _, f := range found {
		if len(out) == maxFound {
			break
		}
		if len(f) > maxFoundText {
			f = f[:maxFoundText]
		}
		out = append(out, strings.ToValidUTF8(f, "\uFFFD"))
	}
	return out
}

// matches reports whether the values found at r's name satisfy r.
func matches(r Record, found []string) bool {
	switch r.Purpose {
	case PurposeDKIM:
		want := tags(r.Value)["p"]
		for _, f := range found {
			t := tags(f)
			if t["p"] == want && (t["v"] == "" || t["v"] == "DKIM1") && (t["k"] == "" || t["k"] == "rsa") {
				return true
			}
		}
		return false
	case PurposeSPF:
		// Two SPF records are an error for receivers (RFC 7208 section 4.5): wrong_value.
		spf := prefixed(found, "v=spf1")
		if len(spf) != 1 {
			return false
		}
		have := strings.Fields(strings.ToLower(spf[0]))
		for _, mech := range strings.Fields(strings.ToLower(r.Value)) {
			if strings.HasPrefix(mech, "include:") && !slices.Contains(have, mech) && !slices.Contains(have, "+"+mech) {
				return false
			}
		}
		return true
	case PurposeDMARC:
		// Any policy will do: the record is a suggestion. Two records void DMARC (RFC 7489).
		return len(prefixed(found, "v=dmarc1")) == 1
	case PurposeReturnPath, PurposeTracking, PurposeInbound:
		return slices.Contains(found, r.Value)
	}
	return false
}

// prefixed returns the values that start with prefix (case-insensitively), after spaces.
func prefixed(values []string, prefix string) []string {
	var out []string
	for _, v := range values {
		v = strings.TrimSpace(v)
		if len(v) >= len(prefix) && strings.EqualFold(v[:len(prefix)], prefix) {
			out = append(out, v)
		}
	}
	return out
}

// tags parses a DKIM record (tag=value; ...), with the whitespace DNS providers insert into
// long values removed.
func tags(record string) map[string]string {
	out := map[string]string{}
	for part := range strings.SplitSeq(record, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		out[strings.TrimSpace(k)] = strings.Join(strings.Fields(v), "")
	}
	return out
}

func requiredFound(recs []Record) bool {
	for _, r := range recs {
		if r.Required && r.Status != RecordFound {
			return false
		}
	}
	return true
}

// Verify looks up the domain's records and records what it found: verified when every
// required record is found, else failed (a verified domain that fails stops signing). The
// first time the domain verifies it claims its name for the bot in the whole deployment (409
// domain_taken when another bot did first) and is registered with the provider. It takes
// no revision: it is safe to call any time, and changes the revision every time.
func (s *Service) Verify(ctx context.Context, bot, id string) (Domain, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Domain{}, err
	}
	checked, err := s.check(ctx, rec.Records)
	if err != nil {
		return Domain{}, err
	}
	ok := requiredFound(checked)
	claimedNow := false
	if ok && !rec.Claimed {
		if claimedNow, err = s.claim(ctx, bot, rec); err != nil {
			return Domain{}, err
		}
	}
	registeredNow := false
	if ok && !rec.Registered && s.identities != nil {
		if err := s.register(ctx, bot, rec); err != nil {
			// The claim stays this domain's: the records proved the name the bot's, and
			// the next verify registers again (a registration replaces a partial one).
			// Giving it up would need the identity deregistered first (a release).
			return Domain{}, err
		}
		registeredNow = true
	}
	now := stamp(s.now())
	for attempt := range updateAttempts {
		if attempt > 0 {
			deleted := rec
			if rec, err = s.load(ctx, bot, id); err != nil {
				if httpapi.KindOf(err) == httpapi.KindNotFound && (claimedNow || registeredNow) {
					// Deleted meanwhile: its deletion released the claim, or this does, and
					// the release deregisters what this verify registered.
					s.releaseClaim(ctx, bot, deleted)
				}
				return Domain{}, err
			}
		}
		rec.Records, rec.CheckedAt = checked, &now
		rec.Status = StatusFailed
		if ok {
			rec.Status, rec.Claimed = StatusVerified, true
			rec.Registered = rec.Registered || registeredNow
			if rec.VerifiedAt == nil {
				rec.VerifiedAt = &now
			}
		}
		read := rec.Revision
		rec.Revision++
		rec.UpdatedAt = now
		it, err := rec.item(bot)
		if err != nil {
			return Domain{}, err
		}
		err = s.store.Put(ctx, it, store.RevisionIs(read))
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		if err != nil {
			return Domain{}, fmt.Errorf("verify domain: %w", err)
		}
		return rec.Domain, nil
	}
	return Domain{}, fmt.Errorf("verify domain %s: it keeps changing: %w", id, store.ErrUnavailable)
}

// claim makes the domain's name the bot's in the deployment. It reports whether it wrote the
// claim (false: the bot held it already).
func (s *Service) claim(ctx context.Context, bot string, rec domainRecord) (bool, error) {
	data, err := store.Encode(claim{BotID: bot, DomainID: rec.ID})
	if err != nil {
		return false, err
	}
	for range updateAttempts {
		c, rev, exists, err := s.readClaim(ctx, rec.Name)
		if err != nil {
			return false, err
		}
		cond := store.MustNotExist
		switch {
		case exists && c.Releasing:
			return false, errDomainReleasing(rec.Name)
		case exists && c.BotID != bot:
			return false, errDomainTaken(rec.Name)
		case exists && c.DomainID == rec.ID:
			return false, nil
		case exists:
			// The bot's own claim for a domain of the same name that is gone.
			cond = store.RevisionIs(rev)
		}
		err = s.store.Put(ctx, store.Item{Key: claimKey(rec.Name), Data: data, Revision: rev + 1}, cond)
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		return err == nil, err
	}
	return false, fmt.Errorf("claim %s: it keeps changing: %w", rec.Name, store.ErrUnavailable)
}

// register registers the domain with the provider, with its DKIM key.
func (s *Service) register(ctx context.Context, bot string, rec domainRecord) error {
	key, err := s.privateKey(ctx, bot, rec)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	block := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err := s.identities.Register(ctx, rec.Name, rec.DKIMSelector, block); err != nil {
		return httpapi.E(httpapi.KindUnavailable, "provider_unavailable",
			"the email provider did not register the domain; nothing changed, retry verify shortly").Wrap(err)
	}
	return nil
}
