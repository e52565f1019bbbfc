package reactions

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/botplatform/api/shared/text"
)

// TriggerType names what starts a reaction.
type TriggerType string

// The trigger types.
const (
	// TriggerStart fires on the /start command or a subscriber's first contact.
	TriggerStart TriggerType = "start"
	// TriggerKeyword fires on an incoming text that equals a keyword or matches a pattern.
	TriggerKeyword TriggerType = "keyword"
	// TriggerLabelAdded fires when a label is added to a subscriber.
	TriggerLabelAdded TriggerType = "label_added"
	// TriggerButton fires when a subscriber presses a button carrying the payload.
	TriggerButton TriggerType = "button"
	// TriggerAPI fires only when a client invokes the reaction over the API.
	TriggerAPI TriggerType = "api"
)

// TriggerTypes lists every trigger type, in documentation order.
func TriggerTypes() []TriggerType {
	return []TriggerType{TriggerStart, TriggerKeyword, TriggerLabelAdded, TriggerButton, TriggerAPI}
}

func knownTrigger(t TriggerType) bool {
	for _, k := range TriggerTypes() {
		if k == t {
			return true
		}
	}
	return false
}

// Trigger says when a reaction starts. Which fields it has depends on Type.
type Trigger struct {
	Type TriggerType `json:"type"`
	// Keywords (keyword): the whole message, trimmed and with runs of white space as one
	// space, equals one of them, ignoring case.
	Keywords []string `json:"keywords,omitempty"`
	// Pattern (keyword): an RE2 regular expression found anywhere in the message, ignoring case.
	Pattern string `json:"pattern,omitempty"`
	// LabelID (label_added): the label whose addition fires the trigger.
	LabelID string `json:"label_id,omitempty"`
	// Payload (button): the payload of the pressed button.
	Payload string `json:"payload,omitempty"`
}

// payloadRe is what every channel carries unchanged as button data.
var payloadRe = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// check adds the trigger's shape problems to r; an unknown type is a flaw (422), since a
// bundle from a newer server may carry one.
func (t Trigger) check(r *report, path string) {
	if t.Type == "" {
		r.shape.Add(path+".type", "is required: one of start, keyword, label_added, button, api")
		return
	}
	if !knownTrigger(t.Type) {
		r.flaws.Add(path+".type", "unknown trigger type %q; known: start, keyword, label_added, button, api", t.Type)
		return
	}
	allowed := map[string]bool{}
	switch t.Type {
	case TriggerKeyword:
		allowed["keywords"], allowed["pattern"] = true, true
		t.checkKeyword(r, path)
	case TriggerLabelAdded:
		allowed["label_id"] = true
		if t.LabelID == "" {
			r.shape.Add(path+".label_id", "is required for a label_added trigger")
		}
	case TriggerButton:
		allowed["payload"] = true
		checkPayload(r, path+".payload", t.Payload)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"keywords", t.Keywords != nil}, {"pattern", t.Pattern != ""}, {"label_id", t.LabelID != ""}, {"payload", t.Payload != ""}} {
		if f.set && !allowed[f.name] {
			r.shape.Add(path+"."+f.name, "is not a field of %s triggers", t.Type)
		}
	}
}

func (t Trigger) checkKeyword(r *report, path string) {
	switch {
	case t.Keywords == nil && t.Pattern == "":
		r.shape.Add(path, "a keyword trigger needs keywords or a pattern")
		return
	case t.Keywords != nil && t.Pattern != "":
		r.shape.Add(path, "a keyword trigger takes keywords or a pattern, not both")
		return
	}
	if t.Pattern != "" {
		switch {
		case utf8.RuneCountInString(t.Pattern) > MaxPatternLen:
			r.shape.Add(path+".pattern", "must be at most %d characters", MaxPatternLen)
		case !r.shape.Text(path+".pattern", t.Pattern, text.Line):
		default:
			// RE2 (Go's regexp) runs in time linear in the input: no pattern can stall the runtime.
			if _, err := regexp.Compile("(?i)" + t.Pattern); err != nil {
				r.shape.Add(path+".pattern", "is not a valid RE2 regular expression: %v", err)
			}
		}
		return
	}
	switch {
	case len(t.Keywords) == 0:
		r.shape.Add(path+".keywords", "must list at least one keyword")
	case len(t.Keywords) > MaxKeywords:
		r.shape.Add(path+".keywords", "must list at most %d keywords", MaxKeywords)
	}
	seen := map[string]int{}
	for i, k := range t.Keywords {
		kp := path + ".keywords[" + itoa(i) + "]"
		norm := NormalizeKeyword(k)
		switch {
		case norm == "":
			r.shape.Add(kp, "must not be empty")
		case utf8.RuneCountInString(k) > MaxKeywordLen:
			r.shape.Add(kp, "must be at most %d characters", MaxKeywordLen)
		case !r.shape.Text(kp, k, text.Line):
		default:
			if j, dup := seen[norm]; dup {
				r.shape.Add(kp, "repeats keywords[%d] (keywords are compared ignoring case)", j)
			}
			seen[norm] = i
		}
	}
}

// NormalizeKeyword is how keywords and incoming texts are compared: trimmed, runs of white
// space as one space, lower case.
func NormalizeKeyword(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

func checkPayload(r *report, path, payload string) {
	switch {
	case payload == "":
		r.shape.Add(path, "is required")
	case len(payload) > MaxPayloadLen:
		r.shape.Add(path, "must be at most %d characters", MaxPayloadLen)
	case !payloadRe.MatchString(payload):
		r.shape.Add(path, "may contain only A-Z a-z 0-9 _ . : -")
	}
}
