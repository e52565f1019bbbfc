package emaildomains

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// Status is where a domain stands.
type Status string

// The statuses of a domain.
const (
	// StatusPending: added, never verified.
	StatusPending Status = "pending"
	// StatusVerified: the last verify found every required record. Only a verified domain
	// signs mail (Signer).
	StatusVerified Status = "verified"
	// StatusFailed: the last verify found a required record missing or wrong.
	StatusFailed Status = "failed"
)

// RecordStatus is what the last verify found for one record.
type RecordStatus string

// The statuses of a record.
const (
	RecordUnchecked  RecordStatus = "unchecked"
	RecordFound      RecordStatus = "found"
	RecordMissing    RecordStatus = "missing"
	RecordWrongValue RecordStatus = "wrong_value"
)

// Purposes of the records a domain publishes.
const (
	PurposeDKIM       = "dkim"
	PurposeSPF        = "spf"
	PurposeReturnPath = "return_path"
	PurposeDMARC      = "dmarc"
	PurposeTracking   = "tracking"
	// PurposeInbound is the MX that sends the domain's mail to the deployment (SES
	// receiving on AWS): optional, listed only by a deployment that receives mail.
	PurposeInbound = "inbound"
)

// Labels of the subdomains a domain's records use.
const (
	// ReturnPathLabel is the MAIL FROM (return-path, bounce) subdomain: bounce.<domain>.
	ReturnPathLabel = "bounce"
	// TrackingLabel is the subdomain of tracked links and the open pixel: track.<domain>.
	TrackingLabel = "track"
)

// Limits.
const (
	// MaxDomains is how many sending domains a bot may have.
	MaxDomains = 20
	// MaxDomainLen bounds a domain name: its DKIM record's name, 24 characters longer, must
	// stay within DNS's 253.
	MaxDomainLen = 200
	// mxPriority is the priority the return-path MX is published with.
	mxPriority = 10
)

// Record is one DNS record a domain must (Required) or should publish, with what the last
// verify found.
type Record struct {
	// Type is TXT, MX or CNAME.
	Type string `json:"type"`
	// Name is the record's fully qualified name, without the final dot.
	Name  string `json:"name"`
	Value string `json:"value"`
	// Priority is an MX record's priority.
	Priority *int `json:"priority,omitempty"`
	// Purpose is dkim, spf, return_path, dmarc or tracking.
	Purpose string `json:"purpose"`
	// Required records must all be found for the domain to verify; the others are
	// recommended (DMARC, tracking).
	Required bool         `json:"required"`
	Status   RecordStatus `json:"status"`
	// Found lists the values of the record's type the last verify found at Name.
	Found []string `json:"found"`
}

// Domain is a sending domain of a bot.
type Domain struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	// DKIMSelector names the domain's DKIM key: its public key is published at
	// <selector>._domainkey.<name>. The private key never leaves the platform.
	DKIMSelector string    `json:"dkim_selector"`
	Records      []Record  `json:"records"`
	Revision     int64     `json:"revision"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// VerifiedAt is when the domain first verified; CheckedAt when verify last ran.
	VerifiedAt *time.Time `json:"verified_at"`
	CheckedAt  *time.Time `json:"checked_at"`
}

// domainRecord is a stored domain: the Domain and what is never shown.
type domainRecord struct {
	Domain
	// SealedKey is the PKCS #8 DER private key, sealed under aad(bot, id, "dkim").
	SealedKey []byte `json:"sealed_key"`
	// Claimed tells that the deployment-wide claim of the name is this domain's (since it
	// first verified).
	Claimed bool `json:"claimed"`
	// Registered tells that Identities registered the domain (it is deregistered on delete).
	Registered bool `json:"registered"`
}

func (r domainRecord) item(bot string) (store.Item, error) {
	b, err := store.Encode(r)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: domainKey(bot, r.ID), Revision: r.Revision, Data: b}, nil
}

// NewDomain is an add request.
type NewDomain struct {
	Name string `json:"name"`
}

// Validate checks what decoding cannot.
func (n *NewDomain) Validate() error {
	var p httpapi.Problems
	if name, ok := checkDomainName(&p, "name", n.Name); ok {
		n.Name = name
	}
	return p.Err()
}

// checkDomainName adds the problems of a domain name and returns it in canonical form (lower
// case, no final dot). Internationalized names are taken in their ASCII (punycode) form only:
// converting them needs IDNA tables this module does not carry.
func checkDomainName(p *httpapi.Problems, field, raw string) (string, bool) {
	name := strings.TrimSuffix(strings.ToLower(raw), ".")
	if name == "" {
		p.Add(field, "is required")
		return "", false
	}
	if len(name) > MaxDomainLen {
		p.Add(field, "at most %d characters", MaxDomainLen)
		return "", false
	}
	if err := checkHost(name); err != nil {
		p.Add(field, "%s", err.Error())
		return "", false
	}
	labels := strings.Split(name, ".")
	switch labels[len(labels)-1] {
	case "localhost", "local", "internal", "arpa", "onion":
		p.Add(field, "must be a domain on the public internet, not a .%s name", labels[len(labels)-1])
		return "", false
	}
	// A public suffix (com, co.uk, github.io) is no one's to send as.
	if suffix, _ := publicsuffix.PublicSuffix(name); suffix == name {
		p.Add(field, "%s is a public suffix, not a registrable domain: give your domain (example.com) or a subdomain of it", name)
		return "", false
	}
	return name, true
}

// checkHost reports why name is not a DNS host name of ASCII letters, digits and hyphens.
func checkHost(name string) error {
	if len(name) > 253 {
		return errors.New("is longer than DNS allows (253 characters)")
	}
	labels := strings.Split(name, ".")
	if len(labels) < 2 {
		return errors.New("must be a fully qualified domain name, such as example.com")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return errors.New("each dot-separated label must be 1 to 63 characters")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q may not start or end with a hyphen", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if c >= 0x80 {
				return errors.New("must be ASCII: give an internationalized name in its punycode form (xn--...)")
			}
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("label %q may hold only letters, digits and hyphens", l)
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return errors.New("must be a domain name, not an IP address")
	}
	return nil
}

// newSelector makes a DKIM selector: "bp" and 8 random characters, new for every domain, so
// that a domain deleted and added again (or added by another bot before either verifies)
// never collides with a key published earlier.
func newSelector() string { return "bp" + strings.ToLower(rand.Text()[:8]) }

// buildRecords lists the records a domain publishes.
func buildRecords(v RecordValues, name, selector, dkim string) []Record {
	prio := mxPriority
	rp := ReturnPathLabel + "." + name
	recs := []Record{
		{Type: "TXT", Name: selector + "._domainkey." + name, Value: dkim, Purpose: PurposeDKIM, Required: true},
		{Type: "TXT", Name: rp, Value: "v=spf1 " + v.SPFInclude + " ~all", Purpose: PurposeSPF, Required: true},
		{Type: "MX", Name: rp, Value: v.MailFromMX, Priority: &prio, Purpose: PurposeReturnPath, Required: true},
		{Type: "TXT", Name: "_dmarc." + name, Value: "v=DMARC1; p=none; rua=mailto:dmarc-reports@" + name, Purpose: PurposeDMARC},
	}
	if v.TrackingHost != "" {
		recs = append(recs, Record{Type: "CNAME", Name: TrackingLabel + "." + name, Value: v.TrackingHost, Purpose: PurposeTracking})
	}
	if v.InboundMX != "" {
		recs = append(recs, Record{Type: "MX", Name: name, Value: v.InboundMX, Priority: &prio, Purpose: PurposeInbound})
	}
	for i := range recs {
		recs[i].Status, recs[i].Found = RecordUnchecked, []string{}
	}
	return recs
}

// errDomainTaken is the 409 for a name another bot of the deployment verified.
func errDomainTaken(name string) error {
	return httpapi.Errorf(httpapi.KindConflict, "domain_taken", "%s is verified by another bot; a domain sends and receives for one bot only", name)
}

// readClaim returns the deployment-wide claim of name and its revision (ok false: none).
func (s *Service) readClaim(ctx context.Context, name string) (claim, int64, bool, error) {
	it, err := s.store.Get(ctx, claimKey(name))
	if errors.Is(err, store.ErrNotFound) {
		return claim{}, 0, false, nil
	}
	if err != nil {
		return claim{}, 0, false, err
	}
	c, err := store.Decode[claim](it)
	return c, it.Revision, err == nil, err
}

// Add adds a sending domain: a new DKIM key pair (the private key sealed), and the records
// to publish. The domain is pending until verify finds the required ones.
func (s *Service) Add(ctx context.Context, bot string, in NewDomain) (Domain, error) {
	if err := in.Validate(); err != nil {
		return Domain{}, err
	}
	// Refused early for the user's sake; verify is what holds the rule (the claim). A name
	// being released is free in a few minutes: it may be added now, and verified then.
	if c, _, ok, err := s.readClaim(ctx, in.Name); err != nil {
		return Domain{}, err
	} else if ok && c.BotID != bot && !c.Releasing {
		return Domain{}, errDomainTaken(in.Name)
	}
	key, err := s.genKey()
	if err != nil {
		return Domain{}, fmt.Errorf("generate dkim key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Domain{}, err
	}
	dkim, err := email.DNSRecord(key.Public())
	if err != nil {
		return Domain{}, err
	}
	now := stamp(s.now())
	rec := domainRecord{Domain: Domain{ID: ids.At("edom", now), Name: in.Name, Status: StatusPending, Revision: 1,
		CreatedAt: now, UpdatedAt: now}}
	rec.DKIMSelector = newSelector()
	rec.Records = buildRecords(s.records, rec.Name, rec.DKIMSelector, dkim)
	if rec.SealedKey, err = s.sealer.Seal(ctx, der, aad(bot, rec.ID, "dkim")); err != nil {
		return Domain{}, fmt.Errorf("seal dkim key: %w", err)
	}
	it, err := rec.item(bot)
	if err != nil {
		return Domain{}, err
	}
	ptr, err := store.Encode(pointer{DomainID: rec.ID})
	if err != nil {
		return Domain{}, err
	}
	err = store.Counted(ctx, s.store, countKey(bot, "DOM"), 1, func(c store.Counter) error {
		if c.Count >= MaxDomains {
			return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a bot has at most %d sending domains", MaxDomains).With("limit", MaxDomains)
		}
		return s.store.Transact(ctx, []store.Write{c.Write, store.PutOp(it, store.MustNotExist),
			store.PutOp(store.Item{Key: nameKey(bot, rec.Name), Data: ptr, Revision: 1}, store.MustNotExist)})
	})
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Index == 2 {
		return Domain{}, s.nameTaken(ctx, bot, rec.Name)
	}
	if err != nil {
		return Domain{}, fmt.Errorf("add domain: %w", err)
	}
	return rec.Domain, nil
}

// nameTaken is the 409 for a name the bot has already.
func (s *Service) nameTaken(ctx context.Context, bot, name string) error {
	e := httpapi.Errorf(httpapi.KindConflict, "name_taken", "the bot already has the domain %s", name)
	if it, err := s.store.Get(ctx, nameKey(bot, name)); err == nil {
		if p, err := store.Decode[pointer](it); err == nil {
			e = e.With("conflicting_id", p.DomainID)
		}
	}
	return e
}

func (s *Service) load(ctx context.Context, bot, id string) (domainRecord, error) {
	if !ids.Valid("edom", id) {
		return domainRecord{}, httpapi.NotFound("sending domain")
	}
	it, err := s.store.Get(ctx, domainKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return domainRecord{}, httpapi.NotFound("sending domain")
	}
	if err != nil {
		return domainRecord{}, err
	}
	return store.Decode[domainRecord](it)
}

// Get returns a domain with its records as the last verify found them.
func (s *Service) Get(ctx context.Context, bot, id string) (Domain, error) {
	rec, err := s.load(ctx, bot, id)
	return rec.Domain, err
}

// List returns a page of the bot's domains, oldest first.
func (s *Service) List(ctx context.Context, bot string, limit int, cursor string) ([]Domain, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: emailPK(bot), Prefix: domainPrefix, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Domain, 0, len(page.Items))
	for _, it := range page.Items {
		rec, err := store.Decode[domainRecord](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, rec.Domain)
	}
	return out, page.Next, nil
}

// Delete deletes a domain (expected is the revision read, nil for any) and releases its
// deployment-wide claim in the same transaction: at once without a provider, else through a
// release job that deregisters the name from the provider first (releaseWrites). A domain
// that inbound routes use is not deleted (409 domain_in_use): mail to it would silently stop
// being routed.
func (s *Service) Delete(ctx context.Context, bot, id string, expected *int64) error {
	for range updateAttempts {
		rec, err := s.load(ctx, bot, id)
		if err != nil {
			return err
		}
		if expected != nil && rec.Revision != *expected {
			return httpapi.StaleRevision(rec.Revision)
		}
		routes, err := s.domainRoutes(ctx, bot, id)
		if err != nil {
			return err
		}
		if routes.Count > 0 {
			used, err := s.routeIDs(ctx, bot, id)
			if err != nil {
				return err
			}
			return httpapi.Errorf(httpapi.KindConflict, "domain_in_use", "inbound routes use %s; delete them first", rec.Name).
				With("route_ids", used)
		}
		c, claimRev, claimed, err := s.readClaim(ctx, rec.Name)
		if err != nil {
			return err
		}
		delivered := func(context.Context) {}
		err = store.Counted(ctx, s.store, countKey(bot, "DOM"), -1, func(cnt store.Counter) error {
			writes := []store.Write{cnt.Write,
				store.DeleteOp(domainKey(bot, id), store.RevisionIs(rec.Revision)),
				store.DeleteOp(nameKey(bot, rec.Name), store.Always),
				routes.unchanged(),
			}
			if claimed && c.BotID == bot && c.DomainID == id && !c.Releasing {
				release, deliver, err := s.releaseWrites(bot, rec, claimRev)
				if err != nil {
					return err
				}
				writes = append(writes, release...)
				delivered = deliver
			}
			return s.store.Transact(ctx, writes)
		})
		var ce *store.ConditionError
		if errors.As(err, &ce) && ce.Index > 0 {
			continue // the domain, its routes or its claim changed meanwhile: read again
		}
		if err != nil {
			return fmt.Errorf("delete domain: %w", err)
		}
		delivered(ctx)
		return nil
	}
	return fmt.Errorf("delete domain %s: it keeps changing: %w", id, store.ErrUnavailable)
}
