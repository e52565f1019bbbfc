package subscribers

import (
	"context"
	"net/mail"
	"strings"

	"github.com/botplatform/api/shared/store"
)

// EmailFieldName is the custom field that holds a subscriber's email address: the one email
// campaigns send to (docs/emailcampaigns.md) and inbound email routes find a sender by
// (docs/email.md). Its values are indexed, so a subscriber is found by address without
// reading the others.
const EmailFieldName = "email"

// The email index is sparse, on the record itself (GSI2, so it costs no extra write): a record
// whose email field holds an address that can be mailed is indexed under that address, lower
// case. The index follows every write of the record: a value changed or cleared, a field's
// values erased after its deletion, the subscriber erased. It knows the field by the id it
// had when its value was last written (record.EmailField), so a record written before the
// index existed is found once its email value is written again.

// maxEmailCandidates bounds the subscribers FindByEmail reads for one address.
const maxEmailCandidates = 20

// emailIndex places a subscriber in the GSI2 partition of its address.
func emailIndex(bot, address, id string) store.IndexKey {
	return store.IndexKey{PK: emailPartition(bot, address), SK: id}
}

func emailPartition(bot, address string) string { return botPrefix(bot) + "#EMAIL#" + address }

// indexedEmail is the address the record is indexed under, "" for none.
func (r record) indexedEmail() string {
	if r.EmailField == "" {
		return ""
	}
	v, _ := r.Values[r.EmailField].(string)
	return EmailAddress(v)
}

// EmailAddress returns an email field's value as the address it is indexed and compared
// by: trimmed and lower-cased, or "" when it is not one bare ASCII address (no display name,
// no spaces) of at most 254 bytes, the rule email campaigns send by.
func EmailAddress(v string) string {
	a := strings.TrimSpace(v)
	if a == "" || len(a) > 254 {
		return ""
	}
	for i := 0; i < len(a); i++ {
		if c := a[i]; c <= ' ' || c > '~' {
			return ""
		}
	}
	parsed, err := mail.ParseAddress(a)
	if err != nil || parsed.Address != a || parsed.Name != "" {
		return ""
	}
	return strings.ToLower(a)
}

// FindByEmail returns the bot's oldest subscriber whose email field holds address (compared
// lower case); 404 when none does. Every candidate of the index is read again and checked,
// so a value of an email field deleted since it was written never matches.
func (s *Service) FindByEmail(ctx context.Context, bot, address string) (Subscriber, error) {
	a := EmailAddress(address)
	if a == "" {
		return Subscriber{}, subscriberNotFound()
	}
	page, err := s.store.Query(ctx, store.Query{Index: store.GSI2, PK: emailPartition(bot, a), Limit: maxEmailCandidates})
	if err != nil {
		return Subscriber{}, err
	}
	if len(page.Items) == 0 {
		return Subscriber{}, subscriberNotFound()
	}
	recs := make([]record, 0, len(page.Items))
	for _, it := range page.Items {
		r, err := decodeRecord(it)
		if err != nil {
			return Subscriber{}, err
		}
		recs = append(recs, r)
	}
	subs, err := s.render(ctx, bot, recs)
	if err != nil {
		return Subscriber{}, err
	}
	for _, sub := range subs {
		if v, ok := sub.Fields[EmailFieldName].(string); ok && EmailAddress(v) == a {
			return sub, nil
		}
	}
	return Subscriber{}, subscriberNotFound()
}
