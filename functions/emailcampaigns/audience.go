package emailcampaigns

import (
	"context"
	"fmt"
	"net/mail"
	"strings"

	"github.com/botplatform/api/shared/httpapi"
)

// Why a recipient row is skipped. The first six are decided when the audience is planned;
// deleted, address_changed and left_audience when the send reads the subscriber again (as
// can no_email, no_consent and the suppressions, for a subscriber changed meanwhile).
const (
	SkipNoEmail        = "no_email"
	SkipNoConsent      = "no_consent"
	SkipUnsubscribed   = "unsubscribed"
	SkipBounced        = "bounced"
	SkipComplained     = "complained"
	SkipDuplicate      = "duplicate"
	SkipDeleted        = "deleted"
	SkipAddressChanged = "address_changed"
	// SkipLeftAudience: the subscriber no longer has any of the audience's labels.
	SkipLeftAudience = "left_audience"
)

// skipReasons lists every skip reason, in the report's order.
var skipReasons = []string{SkipNoEmail, SkipNoConsent, SkipUnsubscribed, SkipBounced, SkipComplained, SkipDuplicate, SkipDeleted, SkipAddressChanged, SkipLeftAudience}

// suppressionReason maps the suppression list's reasons to skip reasons (the same words;
// an unknown one is counted as unsubscribed, the safe reading of "do not send").
func suppressionReason(r string) string {
	switch r {
	case SkipBounced, SkipComplained:
		return r
	default:
		return SkipUnsubscribed
	}
}

// address returns a person's address as given (trimmed) and lower-cased, or "" when the
// person has none that can be sent to: a bare ASCII addr-spec of at most 254 bytes.
func address(p Person) (string, string) {
	a := strings.TrimSpace(p.Email)
	if a == "" || len(a) > 254 {
		return "", ""
	}
	for i := 0; i < len(a); i++ {
		if c := a[i]; c <= ' ' || c > '~' {
			return "", ""
		}
	}
	parsed, err := mail.ParseAddress(a)
	if err != nil || parsed.Address != a || parsed.Name != "" {
		return "", ""
	}
	return a, strings.ToLower(a)
}

// verdict is what classify decided for one person: reason "" means sendable.
type verdict struct {
	address, lower, reason string
}

// classify decides, for each person, whether the campaign can send to them: an address,
// consent, not suppressed, and an address not already taken by someone before (seen,
// which classify extends). It asks the suppression list about the candidates only.
func (s *Service) classify(ctx context.Context, bot string, people []Person, seen map[string]bool) ([]verdict, error) {
	out := make([]verdict, len(people))
	var candidates []string
	asked := map[string]bool{}
	for i, p := range people {
		a, lower := address(p)
		out[i].address, out[i].lower = a, lower
		switch {
		case a == "":
			out[i].reason = SkipNoEmail
		case !p.Consent:
			out[i].reason = SkipNoConsent
		case !asked[lower]:
			asked[lower] = true
			candidates = append(candidates, lower)
		}
	}
	suppressed, err := s.suppressed(ctx, bot, candidates)
	if err != nil {
		return nil, err
	}
	for i := range out {
		v := &out[i]
		if v.reason != "" {
			continue
		}
		if r, ok := suppressed[v.lower]; ok {
			v.reason = suppressionReason(r)
			continue
		}
		if seen[v.lower] {
			v.reason = SkipDuplicate
			continue
		}
		seen[v.lower] = true
	}
	return out, nil
}

// suppressed asks the suppression list about addresses, MaxSuppressionBatch at a time.
func (s *Service) suppressed(ctx context.Context, bot string, addresses []string) (map[string]string, error) {
	out := map[string]string{}
	for len(addresses) > 0 {
		n := min(len(addresses), MaxSuppressionBatch)
		m, err := s.d.Suppressions.Suppressed(ctx, bot, addresses[:n])
		if err != nil {
			return nil, fmt.Errorf("suppression list: %w", err)
		}
		for a, r := range m {
			out[strings.ToLower(a)] = r
		}
		addresses = addresses[n:]
	}
	return out, nil
}

// walkPage is the page size of a walk over the whole audience.
const walkPage = 500

// maxSamples bounds the subscriber ids a consent preview shows per category.
const maxSamples = 5

// PreviewCounts break an audience down by whether it can be sent to. They add up to Total.
type PreviewCounts struct {
	Sendable     int `json:"sendable"`
	Unsubscribed int `json:"unsubscribed"`
	Bounced      int `json:"bounced"`
	Complained   int `json:"complained"`
	NoEmail      int `json:"no_email"`
	NoConsent    int `json:"no_consent"`
	// Duplicate counts subscribers whose address another subscriber before them has: an
	// address gets one message.
	Duplicate int `json:"duplicate"`
	Total     int `json:"total"`
}

func (c *PreviewCounts) add(reason string) {
	c.Total++
	switch reason {
	case "":
		c.Sendable++
	case SkipUnsubscribed:
		c.Unsubscribed++
	case SkipBounced:
		c.Bounced++
	case SkipComplained:
		c.Complained++
	case SkipNoEmail:
		c.NoEmail++
	case SkipNoConsent:
		c.NoConsent++
	case SkipDuplicate:
		c.Duplicate++
	}
}

// why says what keeps an audience with no one sendable from being sent to.
func (c PreviewCounts) why() string {
	if c.Total == 0 {
		return "the audience is empty"
	}
	return fmt.Sprintf("%d have no email address, %d no consent, %d unsubscribed, %d bounced, %d complained, %d share an address",
		c.NoEmail, c.NoConsent, c.Unsubscribed, c.Bounced, c.Complained, c.Duplicate)
}

// Preview is consent-preview's answer: the audience as the campaign would plan it now.
type Preview struct {
	CampaignID string        `json:"campaign_id"`
	Counts     PreviewCounts `json:"counts"`
	// Samples are up to five subscriber ids of each category that has any.
	Samples map[string][]string `json:"samples"`
}

// tally walks the whole audience (at most MaxAudience subscribers; 422 audience_too_large
// beyond) and classifies everyone as the plan would.
func (s *Service) tally(ctx context.Context, bot string, labels []string) (Preview, error) {
	out := Preview{Samples: map[string][]string{}}
	seen := map[string]bool{}
	cursor := ""
	for {
		people, next, err := s.d.Audience.Page(ctx, bot, labels, walkPage, cursor)
		if err != nil {
			return Preview{}, err
		}
		if out.Counts.Total+len(people) > s.cfg.MaxAudience {
			return Preview{}, httpapi.Errorf(httpapi.KindUnprocessable, "audience_too_large", "the audience has more than %d subscribers, the most a campaign goes to; narrow it with labels", s.cfg.MaxAudience).
				With("limit", s.cfg.MaxAudience)
		}
		verdicts, err := s.classify(ctx, bot, people, seen)
		if err != nil {
			return Preview{}, err
		}
		for i, v := range verdicts {
			out.Counts.add(v.reason)
			cat := v.reason
			if cat == "" {
				cat = "sendable"
			}
			if len(out.Samples[cat]) < maxSamples {
				out.Samples[cat] = append(out.Samples[cat], people[i].SubscriberID)
			}
		}
		if next == "" {
			return out, nil
		}
		if next == cursor {
			return Preview{}, fmt.Errorf("emailcampaigns: the audience's walk does not move on from %q", cursor)
		}
		cursor = next
	}
}

// ConsentPreview breaks the campaign's audience down by consent as the send would now,
// changing nothing.
func (s *Service) ConsentPreview(ctx context.Context, bot, id string) (Preview, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Preview{}, err
	}
	p, err := s.tally(ctx, bot, rec.Audience.LabelIDs)
	if err != nil {
		return Preview{}, err
	}
	p.CampaignID = id
	return p, nil
}
