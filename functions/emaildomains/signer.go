package emaildomains

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// ErrNotVerified means the bot has no verified sending domain for an address.
var ErrNotVerified = errors.New("emaildomains: no verified sending domain for this address")

// ReverifyAfter is how long a verified domain signs before its records are looked up again:
// the first signer asked for after that verifies it once more (Signer), so that records
// removed since are noticed by the next send rather than by the receivers.
const ReverifyAfter = 24 * time.Hour

// Signer returns the DKIM signer of the bot's verified sending domain of fromAddress (a bare
// address or "Name <address>"), for the senders: the domain must be the address's own (a
// subdomain is a domain of its own). Without one the error wraps ErrNotVerified. A domain
// last checked more than ReverifyAfter ago is verified again first: one whose required
// records are gone is failed from then on, and the error says so; one whose lookups fail
// for now (DNS unavailable) still signs, and is checked again at the next signer.
func (s *Service) Signer(ctx context.Context, bot, fromAddress string) (*email.Signer, error) {
	a, err := mail.ParseAddress(fromAddress)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not an email address", ErrNotVerified, fromAddress)
	}
	at := strings.LastIndexByte(a.Address, '@')
	name := strings.TrimSuffix(strings.ToLower(a.Address[at+1:]), ".")
	rec, err := s.byName(ctx, bot, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: the bot has no sending domain %s", ErrNotVerified, name)
	}
	if err != nil {
		return nil, err
	}
	if rec.Status == StatusVerified && (rec.CheckedAt == nil || s.now().Sub(*rec.CheckedAt) > ReverifyAfter) {
		d, err := s.Verify(ctx, bot, rec.ID)
		switch {
		case err == nil:
			rec.Domain = d
		case httpapi.KindOf(err) == httpapi.KindNotFound:
			return nil, fmt.Errorf("%w: the bot has no sending domain %s", ErrNotVerified, name)
		default:
			s.log.WarnContext(ctx, "sending domain not verified again for now; it signs as verified", "bot_id", bot,
				"domain_id", rec.ID, "error", err)
		}
	}
	if rec.Status != StatusVerified {
		return nil, fmt.Errorf("%w: the sending domain %s is %s", ErrNotVerified, name, rec.Status)
	}
	key, err := s.privateKey(ctx, bot, rec)
	if err != nil {
		return nil, err
	}
	return &email.Signer{Domain: rec.Name, Selector: rec.DKIMSelector, Key: key}, nil
}

// byName reads the bot's domain of a name; store.ErrNotFound when there is none.
func (s *Service) byName(ctx context.Context, bot, name string) (domainRecord, error) {
	it, err := s.store.Get(ctx, nameKey(bot, name))
	if err != nil {
		return domainRecord{}, err
	}
	p, err := store.Decode[pointer](it)
	if err != nil {
		return domainRecord{}, err
	}
	if it, err = s.store.Get(ctx, domainKey(bot, p.DomainID)); err != nil {
		return domainRecord{}, err
	}
	return store.Decode[domainRecord](it)
}

// privateKey opens the domain's sealed DKIM key.
func (s *Service) privateKey(ctx context.Context, bot string, rec domainRecord) (crypto.Signer, error) {
	der, err := s.sealer.Open(ctx, rec.SealedKey, aad(bot, rec.ID, "dkim"))
	if err != nil {
		return nil, fmt.Errorf("open dkim key of %s: %w", rec.ID, err)
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parse dkim key of %s: %w", rec.ID, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("dkim key of %s is a %T", rec.ID, key)
	}
	return signer, nil
}
