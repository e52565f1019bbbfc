// Package channels serves the channel routes of the API (spec 4.1): the capability matrix,
// connecting, listing and disconnecting a bot's channels, and the message templates of the
// template-based messenger. It stores each channel with its credentials sealed and resolves
// channels for the webhooks and the conversation runtime.
package channels

import (
	"encoding/json"
	"time"

	"github.com/botplatform/api/shared/channel"
)

// Channel is a connected channel as the API shows it: never its credentials.
type Channel struct {
	ID    string       `json:"id"`
	BotID string       `json:"bot_id"`
	Type  channel.Kind `json:"type"`
	Name  string       `json:"name"`
	// Settings are the provider's public facts about the channel (bot username, phone number
	// id, community id).
	Settings json.RawMessage `json:"settings"`
	// WebhookURL is where the provider delivers this channel's updates.
	WebhookURL string    `json:"webhook_url,omitempty"`
	Status     string    `json:"status"`
	CreatedAt  time.Time `json:"created_at"`
}

// StatusActive is the status of a connected channel.
const StatusActive = "active"

// record is a channel as stored: the API form plus what only the platform may read.
type record struct {
	Channel
	AccountID string `json:"account_id"`
	// Credentials and WebhookSecret are sealed (shared/secrets) with the channel id as
	// associated data, so a sealed value cannot be moved to another channel.
	Credentials   []byte `json:"credentials"`
	WebhookSecret []byte `json:"webhook_secret"`
	// LookupKey finds the channel from an update that names no channel id (WhatsApp's one
	// webhook for every number: the phone number id).
	LookupKey string `json:"lookup_key,omitempty"`
}

// Resolved is a channel ready for use by the webhooks and the runtime: the record and its
// credentials opened.
type Resolved struct {
	Channel
	AccountID     string
	WebhookSecret string
	Conn          channel.Connection
}
