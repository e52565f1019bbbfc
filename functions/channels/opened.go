package channels

import (
	"bytes"
	"context"
	"sync"

	"github.com/botplatform/api/shared/secrets"
)

// opened keeps the credentials and webhook secret of the channels a process resolved,
// opened, so that every inbound update and every send does not open them again (locally two
// AES-GCM opens; on AWS a KMS Decrypt whenever the sealer's data-key cache misses). An
// entry is used only while the record still holds the very sealed bytes it was opened from:
// reconnecting a channel with new credentials seals new bytes (a new nonce), and a deleted
// channel's record is gone, so no entry outlives what it was opened from, in this process or
// because of another (a second Lambda container, the admin CLI), and no clock is involved.
type opened struct {
	mu      sync.Mutex
	entries map[string]openedEntry // by channel id
}

type openedEntry struct {
	sealedCreds, sealedSecret []byte
	creds, secret             []byte
}

// maxOpened bounds the entries: past it, the cache starts over (a process serves a few
// channels; a bound keeps a many-tenant container's memory flat).
const maxOpened = 1024

// open returns rec's credentials and webhook secret opened, from the cache when the record
// still holds the sealed bytes the entry was opened from.
func (o *opened) open(ctx context.Context, sealer secrets.Sealer, rec record) (creds, secret []byte, err error) {
	o.mu.Lock()
	e, ok := o.entries[rec.ID]
	o.mu.Unlock()
	if ok && bytes.Equal(e.sealedCreds, rec.Credentials) && bytes.Equal(e.sealedSecret, rec.WebhookSecret) {
		return bytes.Clone(e.creds), bytes.Clone(e.secret), nil // a caller may keep or change its copy
	}
	if creds, err = sealer.Open(ctx, rec.Credentials, aad(rec.ID, "credentials")); err != nil {
		return nil, nil, errOpen("credentials", rec.ID, err)
	}
	if secret, err = sealer.Open(ctx, rec.WebhookSecret, aad(rec.ID, "webhook_secret")); err != nil {
		return nil, nil, errOpen("webhook secret", rec.ID, err)
	}
	o.mu.Lock()
	if o.entries == nil || len(o.entries) >= maxOpened {
		o.entries = make(map[string]openedEntry)
	}
	o.entries[rec.ID] = openedEntry{sealedCreds: bytes.Clone(rec.Credentials), sealedSecret: bytes.Clone(rec.WebhookSecret),
		creds: bytes.Clone(creds), secret: bytes.Clone(secret)} // the caller's copies stay the caller's
	o.mu.Unlock()
	return creds, secret, nil
}
