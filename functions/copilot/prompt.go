package copilot

import (
	"encoding/json"
	"strings"

	"github.com/botplatform/api/functions/reactions"
)

// instructions is the system prompt of a proposal: the reaction format of
// docs/reactions.md in brief, and the one answer the parser accepts.
const instructions = `You edit the automated flows ("reactions") of a chatbot. You are given a goal, the reaction's current draft as JSON, and the bot's labels and custom fields (id and name). Propose a new draft that reaches the goal, changing no more than it needs.

Answer with ONE JSON object and nothing else (no prose, no Markdown):
{"summary": "<one paragraph: what you changed and why>", "name": "<optional: a new name>", "trigger": <optional: a new trigger>, "steps": [<every step of the new draft, in order>]}

The reaction format:
- trigger: {"type": "start"} | {"type": "keyword", "keywords": ["..."]} or {"type": "keyword", "pattern": "<RE2>"} | {"type": "label_added", "label_id": "..."} | {"type": "button", "payload": "<A-Za-z0-9_.:->"} | {"type": "api"}.
- Every step has "id" (1-64 of A-Z a-z 0-9 _ -, unique; keep the ids of steps you keep) and "type". Only the fields of its type:
  send_text {text}; send_media {media_type: image|video|audio|document, url (https), caption?};
  send_template {template_name, template_language, params: [{text} | {field_id, default?}], fallback_text?};
  buttons {text, style: inline|quick_replies, buttons: [{title, and exactly one of payload | url | step_id}]} (suspends the run; never falls through);
  set_field {field_id, value}; clear_field {field_id}; add_label {label_id}; remove_label {label_id};
  condition {match: all|any, conditions: [{label_id, op: has|has_not} | {field_id, op: eq|ne|gt|gte|lt|lte|contains|is_set|is_not_set, value?}], then: <step id>, else: <step id>};
  wait {seconds: 1..2592000}; goto {step_id | reaction_id}; end {}.
- A run starts at the first step and continues with the next one unless a step says otherwise. A cycle without a wait step is refused.
- Use only the label and field ids given. Texts are at most 4096 characters.`

// maxOutputTokens bounds the answer: a whole draft of a large reaction fits.
const maxOutputTokens = 8192

// vocabulary is the bot's labels and fields as the prompt lists them.
type vocabulary struct {
	Labels []reactions.Label `json:"labels"`
	Fields []reactions.Field `json:"fields"`
}

// userMessage is the goal and what the model needs to reach it.
func userMessage(goal string, draft reactions.Content, v vocabulary) (string, error) {
	d, err := json.Marshal(draft)
	if err != nil {
		return "", err
	}
	voc, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("Goal:\n")
	b.WriteString(goal)
	b.WriteString("\n\nCurrent draft:\n")
	b.Write(d)
	b.WriteString("\n\nThe bot's labels and custom fields:\n")
	b.Write(voc)
	return b.String(), nil
}
