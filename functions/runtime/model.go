package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/store"
)

// Flow is one published version of a reaction, as the runtime executes it. Its JSON form is
// the one docs/reactions.md specifies and GET .../reactions/{id}/versions/{n} serves: the
// runtime executes the documented format, not the reactions family's Go types.
type Flow struct {
	ReactionID string  `json:"reaction_id"`
	Version    int64   `json:"version"`
	Name       string  `json:"name"`
	Trigger    Trigger `json:"trigger"`
	Steps      []Step  `json:"steps"`
}

// FlowOf reads v, a reaction's version or draft in any Go form that marshals to the JSON
// docs/reactions.md specifies (the reactions family's), as the runtime's Flow: the families
// speak that JSON to each other, not each other's types.
func FlowOf(v any) (Flow, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Flow{}, err
	}
	var f Flow
	if err := json.Unmarshal(b, &f); err != nil {
		return Flow{}, fmt.Errorf("runtime: a reaction as a flow: %w", err)
	}
	return f, nil
}

// Trigger says when a reaction starts (docs/reactions.md, "Triggers").
type Trigger struct {
	Type     string   `json:"type"`
	Keywords []string `json:"keywords,omitempty"`
	Pattern  string   `json:"pattern,omitempty"`
	LabelID  string   `json:"label_id,omitempty"`
	Payload  string   `json:"payload,omitempty"`
}

// The trigger types the runtime fires ("api" reactions start only over the API).
const (
	TriggerStart      = "start"
	TriggerKeyword    = "keyword"
	TriggerLabelAdded = "label_added"
	TriggerButton     = "button"
)

// Step is one step of a flow (docs/reactions.md, "Steps"): one flat object whose fields
// depend on Type.
type Step struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text,omitempty"`
	MediaType        string          `json:"media_type,omitempty"`
	URL              string          `json:"url,omitempty"`
	Caption          string          `json:"caption,omitempty"`
	TemplateName     string          `json:"template_name,omitempty"`
	TemplateLanguage string          `json:"template_language,omitempty"`
	Params           []TemplateParam `json:"params,omitempty"`
	FallbackText     string          `json:"fallback_text,omitempty"`
	Style            string          `json:"style,omitempty"`
	Buttons          []Button        `json:"buttons,omitempty"`
	FieldID          string          `json:"field_id,omitempty"`
	Value            json.RawMessage `json:"value,omitempty"`
	LabelID          string          `json:"label_id,omitempty"`
	Match            string          `json:"match,omitempty"`
	Conditions       []Condition     `json:"conditions,omitempty"`
	Then             string          `json:"then,omitempty"`
	Else             string          `json:"else,omitempty"`
	Seconds          int64           `json:"seconds,omitempty"`
	StepID           string          `json:"step_id,omitempty"`
	ReactionID       string          `json:"reaction_id,omitempty"`
}

// The step types.
const (
	StepSendText     = "send_text"
	StepSendMedia    = "send_media"
	StepSendTemplate = "send_template"
	StepButtons      = "buttons"
	StepSetField     = "set_field"
	StepClearField   = "clear_field"
	StepAddLabel     = "add_label"
	StepRemoveLabel  = "remove_label"
	StepCondition    = "condition"
	StepWait         = "wait"
	StepGoto         = "goto"
	StepEnd          = "end"
)

// The styles of a buttons step.
const (
	styleInline       = "inline"
	styleQuickReplies = "quick_replies"
)

// Button is one button of a buttons step: a title and exactly one of Payload, URL, StepID.
type Button struct {
	Title   string `json:"title"`
	Payload string `json:"payload,omitempty"`
	URL     string `json:"url,omitempty"`
	StepID  string `json:"step_id,omitempty"`
}

// TemplateParam is one body parameter of a send_template step: literal Text, or the
// subscriber's value of the custom field FieldID (Default when they have none).
type TemplateParam struct {
	Text    string `json:"text,omitempty"`
	FieldID string `json:"field_id,omitempty"`
	Default string `json:"default,omitempty"`
}

// Condition is one test of a condition step, on a label or on a custom field.
type Condition struct {
	FieldID string          `json:"field_id,omitempty"`
	LabelID string          `json:"label_id,omitempty"`
	Op      string          `json:"op"`
	Value   json.RawMessage `json:"value,omitempty"`
}

// Published is a reaction's newest published version: what events are matched against.
type Published struct {
	ReactionID string
	Version    int64
	Trigger    Trigger
}

// Reactions is what the runtime needs of the reactions family.
type Reactions interface {
	// Published lists the bot's reactions that have a published version, oldest first, with
	// that version's trigger. It is called for every event, so it must be cheap.
	Published(ctx context.Context, bot string) ([]Published, error)
	// Flow returns version n of a reaction; ErrNotFound once the reaction is deleted.
	Flow(ctx context.Context, bot, reaction string, version int64) (Flow, error)
}

// Subscriber is a subscriber as the runtime sees it.
type Subscriber struct {
	ID         string
	Channel    channel.Kind
	ExternalID string
	// Labels are label ids.
	Labels []string
	// Fields are the custom field values keyed by field name, as the subscribers family
	// serves them; conditions name fields by id and go through Subscribers.Fields.
	Fields    map[string]any
	CreatedAt time.Time
}

// Profile is what an inbound update tells about its sender.
type Profile struct {
	FirstName, LastName, Locale string
	// SeenAt is when the sender was last seen (the update's time).
	SeenAt time.Time
}

// Field is a custom field of the bot.
type Field struct {
	ID, Name string
	// Type is string, number, boolean or datetime.
	Type string
}

// Subscribers is what the runtime needs of the subscribers family.
type Subscribers interface {
	// Upsert creates or updates the subscriber of a channel identity; created says which.
	// with, when not nil, returns writes to commit in the upsert's transaction, after the
	// upsert's own, given the subscriber as the upsert leaves it: it only plans, since it
	// runs again when another writer changed the subscriber meanwhile. A failed condition
	// of its writes fails the upsert with a *store.ConditionError whose Index counts from
	// with's first write, and nothing is written.
	Upsert(ctx context.Context, bot string, k channel.Kind, externalID string, p Profile,
		with func(sub Subscriber, created bool) ([]store.Write, error)) (sub Subscriber, created bool, err error)
	// Get returns a subscriber; ErrNotFound when erased.
	Get(ctx context.Context, bot, id string) (Subscriber, error)
	// SetField sets (nil: clears) a custom field by id; ErrNotFound when the subscriber is
	// gone, ErrInvalid when the bot no longer has the field.
	SetField(ctx context.Context, bot, id, field string, value any) (Subscriber, error)
	// AddLabel and RemoveLabel change a label by id; ErrNotFound when the subscriber is gone,
	// ErrInvalid when the bot no longer has the label.
	AddLabel(ctx context.Context, bot, id, label string) (Subscriber, error)
	RemoveLabel(ctx context.Context, bot, id, label string) (Subscriber, error)
	// Fields lists the bot's custom fields.
	Fields(ctx context.Context, bot string) ([]Field, error)
	// Labels lists the ids of the bot's labels.
	Labels(ctx context.Context, bot string) ([]string, error)
}

// Channels is what the runtime needs of the channels family.
type Channels interface {
	// Open returns the adapter and the connection (credentials opened) of the bot's channel
	// of type k; ErrNotFound when the bot has none.
	Open(ctx context.Context, bot string, k channel.Kind) (channel.Adapter, channel.Connection, error)
}

// Errors the adapters of the interfaces above map their families' answers to.
var (
	// ErrNotFound: the subscriber, reaction, version or channel does not exist (any more).
	ErrNotFound = errors.New("runtime: not found")
	// ErrInvalid: the family refused the change as invalid (a label or field deleted since
	// the reaction was published).
	ErrInvalid = errors.New("runtime: refused as invalid")
)
