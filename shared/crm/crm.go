// Package crm is the contract between the CRM family (functions/crm) and the provider
// clients (shared/crm/hubspot, salesforce, pipedrive, dynamics): what a connection's
// credentials are, what the family asks of a CRM (who am I, which objects and fields, which
// pipelines, write a record by key or by id, find a record, open and read deals, add a note,
// revoke) and the errors a client returns so that the family maps them to documented problem
// codes without knowing the provider's wire format.
//
// Each client is a real HTTP client of its provider's documented API with a configurable base
// URL; tests run them against the fakes in tests/fakes/crm, which check tokens, signatures
// and payloads as the providers do.
package crm

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The providers, as they appear in paths and connection summaries.
const (
	HubSpot    = "hubspot"    // OAuth 2.0 authorization code with PKCE
	Salesforce = "salesforce" // OAuth 2.0 authorization code with PKCE
	Pipedrive  = "pipedrive"  // API key
	Dynamics   = "dynamics"   // OIDC client credentials (Microsoft Entra ID), Dataverse Web API
)

// AuthKind is how a provider's connection authenticates.
type AuthKind string

// The ways a connection authenticates.
const (
	AuthOAuth  AuthKind = "oauth"
	AuthAPIKey AuthKind = "api_key"
	AuthOIDC   AuthKind = "oidc"
)

// Kind returns how provider authenticates, and false for an unknown provider.
func Kind(provider string) (AuthKind, bool) {
	switch provider {
	case HubSpot, Salesforce:
		return AuthOAuth, true
	case Pipedrive:
		return AuthAPIKey, true
	case Dynamics:
		return AuthOIDC, true
	}
	return "", false
}

// Credentials are what a client needs to call the provider for one connection. The family
// seals them at rest and never returns or logs them.
type Credentials struct {
	// AccessToken, RefreshToken and Expiry: OAuth providers (the code exchange and its
	// refreshes) and the OIDC provider (client-credentials tokens, no refresh token).
	AccessToken  string    `json:"access_token,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// APIKey is Pipedrive's API token.
	APIKey string `json:"api_key,omitempty"`
	// InstanceURL is where the account's API lives when the provider says so per account:
	// Salesforce's instance_url from the token response, Pipedrive's company domain
	// (https://<company>.pipedrive.com), the Dataverse environment URL. Empty means the
	// client's configured base URL.
	InstanceURL string `json:"instance_url,omitempty"`
	// TenantID, ClientID and ClientSecret: the OIDC provider's application.
	TenantID     string `json:"tenant_id,omitempty"`
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
}

// Account is who the credentials act as, read when connecting (which also proves them).
type Account struct {
	ID   string `json:"id"`             // the provider's account, portal or organization id
	Name string `json:"name,omitempty"` // its display name, or domain
	User string `json:"user,omitempty"` // the login the credentials act as, when known
}

// FieldType is a CRM field's type, normalized across providers.
type FieldType string

// The normalized field types. A mapping is validated against them: a subscriber field of
// type number maps to number or string, and so on (functions/crm).
const (
	TypeString   FieldType = "string"
	TypeNumber   FieldType = "number"
	TypeBool     FieldType = "bool"
	TypeDate     FieldType = "date"
	TypeDateTime FieldType = "datetime"
	TypeEnum     FieldType = "enum"
	TypeEmail    FieldType = "email"
	TypePhone    FieldType = "phone"
)

// Object is a CRM object type the platform writes or reads, e.g. "contacts" or "deals"
// (HubSpot), "Contact" (Salesforce), "persons" (Pipedrive), "contacts" (Dataverse entity set).
type Object struct {
	Name  string `json:"name"`
	Label string `json:"label"`
}

// Field is one field of an object.
type Field struct {
	Object   string    `json:"object"`
	Name     string    `json:"name"` // the API name the client writes
	Label    string    `json:"label"`
	Type     FieldType `json:"type"`
	Options  []string  `json:"options,omitempty"` // enum values
	ReadOnly bool      `json:"read_only,omitempty"`
	Required bool      `json:"required,omitempty"`
}

// Pipeline is a deal pipeline and its stages, in the provider's order.
type Pipeline struct {
	ID     string  `json:"id"`
	Label  string  `json:"label"`
	Stages []Stage `json:"stages"`
}

// Stage is one stage of a pipeline.
type Stage struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// Record is one CRM record as the platform reads or wrote it: its id, the values of the
// fields asked for (normalized: strings, float64, bool, nil) and when the CRM last changed it.
type Record struct {
	Object     string         `json:"object"`
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties"`
	UpdatedAt  time.Time      `json:"updated_at"`
}

// The states of a deal.
const (
	DealOpen = "open"
	DealWon  = "won"
	DealLost = "lost"
)

// DealInput is the deal the platform opens for a contact.
type DealInput struct {
	Pipeline string // a Pipeline.ID, as Pipelines lists it
	Stage    string // a Stage.ID of that pipeline
	Name     string // the deal's title
}

// Deal is a deal as the CRM holds it, normalized across providers.
type Deal struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Pipeline string `json:"pipeline"` // a Pipeline.ID
	Stage    string `json:"stage"`    // a Stage.ID
	// Status is DealOpen, DealWon or DealLost.
	Status string `json:"status"`
	// Amount is the deal's value, and Currency its ISO 4217 code, when the CRM has them.
	Amount    *float64  `json:"amount,omitempty"`
	Currency  string    `json:"currency,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Client is one connection's view of a CRM. Every method is safe for concurrent use.
type Client interface {
	// Account reads who the credentials act as; connecting calls it to check them.
	Account(ctx context.Context) (Account, error)
	// Objects lists the object types the platform can write (at least contacts and deals).
	Objects(ctx context.Context) ([]Object, error)
	// Fields lists an object's fields with their types.
	Fields(ctx context.Context, object string) ([]Field, error)
	// Pipelines lists the deal pipelines and their stages.
	Pipelines(ctx context.Context) ([]Pipeline, error)
	// Upsert writes props to the record of object whose field key equals value (for
	// contacts, the email address), creating it when there is none, and returns the record
	// as stored. It is idempotent: the same call twice leaves one record.
	Upsert(ctx context.Context, object, key, value string, props map[string]any) (Record, error)
	// Update writes props to the record of object with that id (a Record.ID an earlier write
	// returned) in one write, without a search, and returns the record as stored. It never
	// creates a record: ErrNotFound when the CRM has no record with that id (deleted, or
	// merged into another), and the caller falls back to Upsert.
	Update(ctx context.Context, object, id string, props map[string]any) (Record, error)
	// Get reads a record by id with the fields named (all mapped fields, say).
	Get(ctx context.Context, object, id string, fields []string) (Record, error)
	// Find reads the record of object whose field key equals value; ErrNotFound when none.
	Find(ctx context.Context, object, key, value string, fields []string) (Record, error)
	// ChangedSince lists records of object changed at or after since, oldest first, a page
	// at a time: pass the returned cursor back; an empty cursor means the last page.
	ChangedSince(ctx context.Context, object string, since time.Time, fields []string, cursor string) ([]Record, string, error)
	// OpenDeal returns an open deal in d.Pipeline associated with the contact record (object,
	// contactID), creating one at d.Stage named d.Name and associated with the contact when
	// the contact has none; created says which. It finds deals through the contact's
	// associations (reads that do not lag like a search index), so a repeated call, a
	// resumed job say, finds the deal the first call created instead of opening another.
	OpenDeal(ctx context.Context, object, contactID string, d DealInput) (deal Deal, created bool, err error)
	// Deals lists the deals associated with the contact record, most recently changed
	// first, at most 100.
	Deals(ctx context.Context, object, contactID string) ([]Deal, error)
	// DealsChangedSince lists deals changed at or after since, oldest first, a page at a
	// time: pass the returned cursor back; an empty cursor means the last page.
	DealsChangedSince(ctx context.Context, since time.Time, cursor string) ([]Deal, string, error)
	// AddNote attaches a plain-text note (a conversation transcript) to a record.
	AddNote(ctx context.Context, object, id, text string) error
	// Revoke asks the provider to revoke the credentials, where it offers that; a provider
	// without revocation returns nil.
	Revoke(ctx context.Context) error
}

// ErrNotFound is returned when the record (or object) asked for does not exist.
var ErrNotFound = errors.New("crm: not found")

// ErrUnauthorized is returned when the provider refuses the credentials (401, an invalid
// grant, a revoked key). The family answers crm_credentials_rejected and, for a stored
// connection, marks it as needing reconnection.
var ErrUnauthorized = errors.New("crm: credentials rejected")

// ErrForbidden is returned when the credentials are valid but lack a permission or scope.
var ErrForbidden = errors.New("crm: permission denied by the provider")

// RateLimitedError is returned when the provider asks the caller to slow down (429, or the
// provider's equivalent). Jobs wait RetryAfter and go on.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("crm: rate limited by the provider, retry after %s", e.RetryAfter)
}

// ProviderError is any other refusal or failure the provider answered with: Status is its
// HTTP status, Code and Message what its error body said (never a credential). Temporary
// is true for 5xx and transport failures worth retrying.
type ProviderError struct {
	Status    int
	Code      string
	Message   string
	Temporary bool
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("crm: provider answered %d %s: %s", e.Status, e.Code, e.Message)
}

// UnusableObjectError is a CRM's answer that the object a connection's setting names (the
// Dataverse entity set of Dynamics' entities.contacts) does not exist there, or cannot hold
// the records the platform writes: Reason says which, for a person. It wraps ErrNotFound
// when the CRM has no such object.
type UnusableObjectError struct {
	Object string
	Reason string
	// Missing is true when the CRM has no such object.
	Missing bool
}

func (e *UnusableObjectError) Error() string {
	return fmt.Sprintf("crm: object %q: %s", e.Object, e.Reason)
}

// Unwrap makes a missing object ErrNotFound.
func (e *UnusableObjectError) Unwrap() error {
	if e.Missing {
		return ErrNotFound
	}
	return nil
}
