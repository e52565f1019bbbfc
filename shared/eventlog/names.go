package eventlog

// The names of the events the platform appends itself. Customers cannot post them (the
// custom events route refuses a reserved name), so a report over one counts only what the
// platform saw happen.
const (
	// The conversation runtime (SourceRuntime).
	ReactionStarted   = "reaction_started"
	ReactionCompleted = "reaction_completed"
	ReactionFailed    = "reaction_failed"
	MessageReceived   = "message_received"
	MessageSent       = "message_sent"
	SubscriberCreated = "subscriber_created"
	LabelAdded        = "label_added"
	LabelRemoved      = "label_removed"
	FieldChanged      = "field_changed"
	// Experiments: a subscriber was assigned a variant and met it.
	ExperimentExposure = "experiment_exposure"
	// The builder (SourceBuilder): published versions of reactions and content.
	ReactionPublished = "reaction_published"
	ContentPublished  = "content_published"
	// Broadcasts and push (SourceBroadcast, SourcePush).
	BroadcastSent = "broadcast_sent"
	PushSent      = "push_sent"
	PushClicked   = "push_clicked"
	// Email (SourceEmail).
	EmailSent         = "email_sent"
	EmailDelivered    = "email_delivered"
	EmailOpened       = "email_opened"
	EmailClicked      = "email_clicked"
	EmailUnsubscribed = "email_unsubscribed"
	EmailBounced      = "email_bounced"
	EmailComplained   = "email_complained"
	// Popups (SourcePopup).
	PopupShown     = "popup_shown"
	PopupClosed    = "popup_closed"
	PopupSubmitted = "popup_submitted"
)

// reserved are the platform's event names.
var reserved = map[string]bool{
	ReactionStarted: true, ReactionCompleted: true, ReactionFailed: true,
	MessageReceived: true, MessageSent: true, SubscriberCreated: true,
	LabelAdded: true, LabelRemoved: true, FieldChanged: true, ExperimentExposure: true,
	ReactionPublished: true, ContentPublished: true,
	BroadcastSent: true, PushSent: true, PushClicked: true,
	EmailSent: true, EmailDelivered: true, EmailOpened: true, EmailClicked: true,
	EmailUnsubscribed: true, EmailBounced: true, EmailComplained: true,
	PopupShown: true, PopupClosed: true, PopupSubmitted: true,
}

// ReservedPrefix starts the names kept for platform events added later: a custom event
// cannot take one, so a future platform event never shares its name with a customer's.
const ReservedPrefix = "platform."

// Reserved reports whether name is the platform's (a custom event may not use it).
func Reserved(name string) bool {
	return reserved[name] || len(name) >= len(ReservedPrefix) && name[:len(ReservedPrefix)] == ReservedPrefix
}

// ReservedNames returns the platform's event names, in no particular order.
func ReservedNames() []string {
	out := make([]string, 0, len(reserved))
	for n := range reserved {
		out = append(out, n)
	}
	return out
}
