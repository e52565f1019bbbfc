// Package reactions serves a bot's reactions: what the bot does when something happens (a
// /start, a keyword, a label added, a button pressed, a call over the API). A reaction has a
// trigger and a list of typed steps; its draft is edited under a revision and published as
// numbered, immutable versions. The package also exports a bot's reactions as a portable
// bundle and imports such a bundle, remapping every id, in one transaction.
//
// docs/reactions.md is the contract: every field, limit, rule and the precise meaning of each
// step, so that the runtime of a later issue can execute a published version as written.
package reactions

import (
	"time"
)

// Content is what a version freezes: the name, the trigger and the steps.
type Content struct {
	Name    string  `json:"name"`
	Trigger Trigger `json:"trigger"`
	Steps   []Step  `json:"steps"`
}

// Reaction is a reaction's draft with the state of its publication.
type Reaction struct {
	ID string `json:"id"`
	Content
	// Revision counts the changes of the draft (and publications); send it as expected_revision.
	Revision int64 `json:"revision"`
	// PublishedVersion is the number of the newest version, nil until the first publish.
	PublishedVersion *int64 `json:"published_version"`
	// PublishedAt is when PublishedVersion was published.
	PublishedAt *time.Time `json:"published_at"`
	// HasUnpublishedChanges is true when the draft differs from the published version (or
	// nothing is published yet).
	HasUnpublishedChanges bool      `json:"has_unpublished_changes"`
	CreatedAt             time.Time `json:"created_at"`
	UpdatedAt             time.Time `json:"updated_at"`
}

// Summary is a reaction as lists show it: everything but the steps, which can be large.
type Summary struct {
	ID                    string     `json:"id"`
	Name                  string     `json:"name"`
	Trigger               Trigger    `json:"trigger"`
	StepCount             int        `json:"step_count"`
	Revision              int64      `json:"revision"`
	PublishedVersion      *int64     `json:"published_version"`
	PublishedAt           *time.Time `json:"published_at"`
	HasUnpublishedChanges bool       `json:"has_unpublished_changes"`
	CreatedAt             time.Time  `json:"created_at"`
	UpdatedAt             time.Time  `json:"updated_at"`
}

// Summary returns the list form of r.
func (r Reaction) Summary() Summary {
	return Summary{
		ID: r.ID, Name: r.Name, Trigger: r.Trigger, StepCount: len(r.Steps), Revision: r.Revision,
		PublishedVersion: r.PublishedVersion, PublishedAt: r.PublishedAt,
		HasUnpublishedChanges: r.HasUnpublishedChanges, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

// Version is one published, immutable state of a reaction.
type Version struct {
	ReactionID string `json:"reaction_id"`
	Version    int64  `json:"version"`
	Content
	// DraftRevision is the draft revision that was published.
	DraftRevision int64     `json:"draft_revision"`
	PublishedAt   time.Time `json:"published_at"`
}

// VersionSummary is a version as the versions list shows it, without its steps.
type VersionSummary struct {
	ReactionID    string    `json:"reaction_id"`
	Version       int64     `json:"version"`
	Name          string    `json:"name"`
	Trigger       Trigger   `json:"trigger"`
	StepCount     int       `json:"step_count"`
	DraftRevision int64     `json:"draft_revision"`
	PublishedAt   time.Time `json:"published_at"`
}

// Summary returns the list form of v.
func (v Version) Summary() VersionSummary {
	return VersionSummary{
		ReactionID: v.ReactionID, Version: v.Version, Name: v.Name, Trigger: v.Trigger,
		StepCount: len(v.Steps), DraftRevision: v.DraftRevision, PublishedAt: v.PublishedAt,
	}
}

// Limits of a bot's reactions; docs/reactions.md and the OpenAPI document state each.
const (
	// MaxReactionsPerBot bounds a bot's reactions (and the registry item that names them).
	MaxReactionsPerBot = 1000
	// MaxNameLen is in characters, after trimming.
	MaxNameLen = 100
	// MaxSteps bounds one reaction's steps.
	MaxSteps = 200
	// MaxContentBytes bounds a reaction's name, trigger and steps as stored JSON, so that an
	// item stays well inside DynamoDB's 400 KB.
	MaxContentBytes = 256 << 10
	// MaxTextLen bounds a message's text (Telegram's limit, the smallest of the channels').
	MaxTextLen = 4096
	// MaxCaptionLen bounds a media caption (Telegram's caption limit).
	MaxCaptionLen = 1024
	// MaxURLLen bounds media and button URLs.
	MaxURLLen = 2048
	// MaxButtons bounds the buttons of one message.
	MaxButtons = 10
	// MaxButtonTitleLen bounds a button's title.
	MaxButtonTitleLen = 64
	// MaxPayloadLen bounds a button payload (Telegram's callback data is at most 64 bytes).
	MaxPayloadLen = 64
	// MaxKeywords bounds a keyword trigger's keywords.
	MaxKeywords = 20
	// MaxKeywordLen bounds one keyword.
	MaxKeywordLen = 100
	// MaxPatternLen bounds a keyword trigger's regular expression.
	MaxPatternLen = 200
	// MaxConditions bounds the conditions of one condition step.
	MaxConditions = 10
	// MaxWaitSeconds bounds a wait step: 30 days.
	MaxWaitSeconds = 30 * 24 * 60 * 60
	// MaxStringValueLen bounds a string value a step sets or compares: the subscribers
	// family's bound on a string field's value.
	MaxStringValueLen = 2000
	// MaxTemplateParams bounds a send_template step's body parameters.
	MaxTemplateParams = 20
	// MaxTemplateParamLen bounds one template parameter's text (and a default): WhatsApp's
	// bound on a template's body.
	MaxTemplateParamLen = 1024
	// MaxStepIDLen bounds a step id.
	MaxStepIDLen = 64
)
