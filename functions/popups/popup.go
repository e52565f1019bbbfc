// Package popups serves website popups: forms and announcements a bot shows on its owner's
// website through one embeddable script. The token API manages them (create, edit, preflight,
// stats, experiment results); the public side serves the script (GET /p/{botID}/popups.js)
// and takes the events it posts (POST /p/{botID}/events), counting impressions, closes and
// conversions per popup, UTC day and variant, and handing the fields of a conversion's form
// to the subscriber store.
package popups

import (
	"time"
)

// Status is whether a popup is shown.
type Status string

// The popup statuses. A new popup is paused until it is activated.
const (
	StatusActive Status = "active"
	StatusPaused Status = "paused"
)

// Popup is a popup as the API shows it.
type Popup struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Revision counts every change; mutations send it back as expected_revision.
	Revision  int64     `json:"revision"`
	Content   Content   `json:"content"`
	Targeting Targeting `json:"targeting"`
	Frequency Frequency `json:"frequency"`
	// Schedule is null when the popup is shown at any time.
	Schedule *Schedule `json:"schedule"`
	// Experiment is null when every visitor sees Content.
	Experiment *Experiment `json:"experiment"`
	// AllowedOrigins are the websites (scheme://host[:port]) that may post the popup's
	// events; the union over the bot's popups is what CORS allows.
	AllowedOrigins []string  `json:"allowed_origins"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// Content is what a popup shows: a title, a text, an image, a form and its button.
type Content struct {
	Title      string  `json:"title"`
	Body       string  `json:"body"`
	ImageURL   *string `json:"image_url"`
	ButtonText string  `json:"button_text"`
	// CloseText, when given, is a second button that closes the popup (the corner × always does).
	CloseText *string `json:"close_text"`
	// Fields are the form's inputs; a conversion writes their values to the subscriber's
	// custom fields of the same names.
	Fields []Field `json:"fields"`
}

// FieldType is the kind of input of a form field.
type FieldType string

// The form field types.
const (
	FieldText     FieldType = "text"
	FieldEmail    FieldType = "email"
	FieldPhone    FieldType = "phone"
	FieldNumber   FieldType = "number"
	FieldCheckbox FieldType = "checkbox"
)

// Field is one input of a popup's form.
type Field struct {
	// Name is the subscriber custom field the value is written to (lower_snake_case).
	Name     string    `json:"name"`
	Label    string    `json:"label"`
	Type     FieldType `json:"type"`
	Required bool      `json:"required"`
}

// Match is how a URL rule compares the page's URL (without its #fragment) to its value.
type Match string

// The URL rule matches. Every comparison is case-sensitive.
const (
	MatchEquals   Match = "equals"
	MatchPrefix   Match = "prefix"
	MatchContains Match = "contains"
	// MatchGlob takes * (any run of characters, / included), ? (one character), [abc],
	// [a-z], [!a-z] and \ to take the next character literally; the whole URL must match.
	MatchGlob Match = "glob"
)

// URLRule is one condition on the page's URL.
type URLRule struct {
	Match Match  `json:"match"`
	Value string `json:"value"`
}

// Device is a kind of device a visitor browses with.
type Device string

// The devices.
const (
	DeviceDesktop Device = "desktop"
	DeviceMobile  Device = "mobile"
	DeviceTablet  Device = "tablet"
)

// Visitors is which visitors a popup is for: new ones are on their first visit (browser
// session) to the site, returning ones came before.
type Visitors string

// The visitor kinds.
const (
	VisitorsAll       Visitors = "all"
	VisitorsNew       Visitors = "new"
	VisitorsReturning Visitors = "returning"
)

// Targeting is where, to whom and when on the page a popup is shown. The popup shows on a
// page that matches one of URLRules (any page when there is none) and none of
// ExcludeURLRules, on one of Devices (any when empty), once DelaySeconds have passed and the
// visitor scrolled ScrollPercent of the page; with ExitIntent, only then when the pointer
// leaves the window.
type Targeting struct {
	URLRules        []URLRule `json:"url_rules"`
	ExcludeURLRules []URLRule `json:"exclude_url_rules"`
	Devices         []Device  `json:"devices"`
	Visitors        Visitors  `json:"visitors"`
	DelaySeconds    int       `json:"delay_seconds"`
	ScrollPercent   int       `json:"scroll_percent"`
	ExitIntent      bool      `json:"exit_intent"`
}

// Frequency caps how often one visitor (one browser) sees a popup. The browser keeps the
// count, so clearing its storage starts over.
type Frequency struct {
	MaxImpressionsPerVisitor int  `json:"max_impressions_per_visitor"`
	MinHoursBetween          int  `json:"min_hours_between"`
	StopAfterConversion      bool `json:"stop_after_conversion"`
}

// defaultFrequency is a new popup's frequency when none is given: a few times, a day apart,
// never again once the visitor converted.
var defaultFrequency = Frequency{MaxImpressionsPerVisitor: 3, MinHoursBetween: 24, StopAfterConversion: true}

// Schedule is when a popup may show. StartsAt and EndsAt are instants (RFC 3339); the days
// and hours are read in the bot's time zone. Hours from later than to span midnight.
type Schedule struct {
	StartsAt   *string  `json:"starts_at"`
	EndsAt     *string  `json:"ends_at"`
	DaysOfWeek []string `json:"days_of_week"`
	Hours      *Hours   `json:"hours"`
	// Timezone is the IANA zone days_of_week and hours are read in. A schedule written
	// without one gets the bot's time zone of that moment (Routes), so that a popup keeps
	// showing when it was meant to even if the bot's settings change later.
	Timezone string `json:"timezone,omitempty"`
}

// Hours is a daily window, "HH:MM" to "HH:MM" (the end excluded).
type Hours struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// weekdays are the names days_of_week takes, in the order time.Weekday counts them.
var weekdays = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// Experiment splits visitors between variants of the content; each visitor keeps the one
// the script picked for it.
type Experiment struct {
	Variants []Variant `json:"variants"`
	// StartedAt is when the variants (keys and shares) were last set: the default start of
	// the experiment's results.
	StartedAt time.Time `json:"started_at"`
}

// Variant is one arm of an experiment: its share of visitors and what it changes.
type Variant struct {
	Key string `json:"key"`
	// Share is the percentage of visitors who see the variant; the shares sum to 100.
	Share int `json:"share"`
	// Content replaces the members it gives of the popup's content (never the form).
	Content *ContentOverride `json:"content"`
}

// ContentOverride is a variant's change to the content.
type ContentOverride struct {
	Title      *string `json:"title"`
	Body       *string `json:"body"`
	ImageURL   *string `json:"image_url"`
	ButtonText *string `json:"button_text"`
	CloseText  *string `json:"close_text"`
}

// Definition is a popup as a client writes it: the body of create and preflight, and the
// members of a PATCH. A member that is absent (or null) is not changed; a given member
// replaces the whole member. An empty schedule ({}) removes the schedule, and an experiment
// without variants ({"variants": []}) removes the experiment.
type Definition struct {
	Name           *string          `json:"name"`
	Status         *Status          `json:"status"`
	Content        *Content         `json:"content"`
	Targeting      *Targeting       `json:"targeting"`
	Frequency      *Frequency       `json:"frequency"`
	Schedule       *Schedule        `json:"schedule"`
	Experiment     *ExperimentInput `json:"experiment"`
	AllowedOrigins *[]string        `json:"allowed_origins"`
}

// ExperimentInput is an experiment as a client writes it.
type ExperimentInput struct {
	Variants []Variant `json:"variants"`
}

// Limits of a popup. Every list and string is bounded so that a popup stays a few
// kilobytes: the script embeds every active popup of the bot.
const (
	MaxPopups                = 200
	MaxNameLen               = 200
	MaxTitleLen              = 200
	MaxBodyLen               = 2000
	MaxButtonTextLen         = 64
	MaxURLLen                = 2048
	MaxFields                = 10
	MaxFieldNameLen          = 64
	MaxLabelLen              = 100
	MaxURLRules              = 20
	MaxDelaySeconds          = 3600
	MaxImpressionsPerVisitor = 100
	MaxHoursBetween          = 8760
	MaxOrigins               = 20
	MaxOriginLen             = 255
	MinVariants              = 2
	MaxVariants              = 4
	MaxVariantKeyLen         = 32
)
