package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// placeholderRe matches {{answer.<id>}} and {{<kind>.<key>}} of every resource kind. It
// takes no spaces, so a content document's merge fields ({{ subscriber.first_name }}) are
// not playbook placeholders.
var placeholderRe = regexp.MustCompile(`\{\{(answer|label|field|content|popup|collection|reaction)\.([a-z0-9_]+)\}\}`)

// Placeholder is one {{kind.name}} of a body.
type Placeholder struct {
	Kind string // answer, or a resource kind
	Name string
}

// Placeholders returns the placeholders of a body, in order of appearance.
func Placeholders(body json.RawMessage) []Placeholder {
	var out []Placeholder
	for _, m := range placeholderRe.FindAllSubmatch(body, -1) {
		out = append(out, Placeholder{Kind: string(m[1]), Name: string(m[2])})
	}
	return out
}

// Resource is one thing an install creates, rendered: its kind, its key in the playbook, its
// name in the bot and the body its family's create takes.
type Resource struct {
	Kind string          `json:"kind"`
	Key  string          `json:"key"`
	Name string          `json:"name"`
	Spec json.RawMessage `json:"spec"`
}

// Ref is how placeholders name a resource: "label.cart_abandoned".
func Ref(kind, key string) string { return kind + "." + key }

// Answers returns the answers a render uses: those given, then each unanswered question's
// default. A question with neither is left out (Missing reports the required ones).
func (p Playbook) Answers(given map[string]any) map[string]any {
	out := map[string]any{}
	for _, q := range p.Questions {
		if v, ok := given[q.ID]; ok {
			out[q.ID] = v
		} else if q.Default != nil {
			out[q.ID] = q.Default
		}
	}
	return out
}

// Missing returns the required questions given has no answer for and that have no default,
// in the playbook's order.
func (p Playbook) Missing(given map[string]any) []string {
	out := []string{}
	for _, q := range p.Questions {
		if _, ok := given[q.ID]; !ok && q.Required && q.Default == nil {
			out = append(out, q.ID)
		}
	}
	return out
}

// CheckAnswer reports why v is not an answer to q, or "".
func CheckAnswer(q Question, v any) string {
	switch q.Type {
	case TypeText:
		s, ok := v.(string)
		if !ok {
			return "must be a string"
		}
		if s = strings.TrimSpace(s); s == "" || len([]rune(s)) > MaxTextAnswer {
			return fmt.Sprintf("must be 1 to %d characters", MaxTextAnswer)
		}
		if strings.ContainsAny(s, "\n\r\t") {
			return "must be one line"
		}
	case TypeChoice:
		s, ok := v.(string)
		if !ok || !contains(q.Choices, s) {
			return "must be one of " + strings.Join(q.Choices, ", ")
		}
	case TypeBool:
		if _, ok := v.(bool); !ok {
			return "must be true or false"
		}
	case TypeWebsite:
		s, ok := v.(string)
		if !ok {
			return "must be a string"
		}
		if _, err := website(s); err != nil {
			return err.Error()
		}
	default:
		return "has an unknown question type"
	}
	return ""
}

// NormalizeAnswer returns a valid answer to q as it is saved: text trimmed, a website in
// its canonical spelling (lower-case scheme and host, no default port, no trailing slash),
// so that "{{answer.website}}/cart" is one URL whatever the customer typed.
func NormalizeAnswer(q Question, v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	s = strings.TrimSpace(s)
	if q.Type == TypeWebsite {
		if w, err := website(s); err == nil {
			return w
		}
	}
	return s
}

// website checks a website answer and returns its canonical spelling: the origin a
// browser sends, which is what a popup's allowed_origins take.
func website(s string) (string, error) {
	const want = "must be a website: http:// or https:// and a host, an optional port, nothing after it (https://shop.example)"
	s = strings.TrimSpace(s)
	if s == "" || len([]rune(s)) > MaxTextAnswer || strings.ContainsAny(s, "\n\r\t ") {
		return "", errors.New(want)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#") {
		return "", errors.New(want)
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

// MaxTextAnswer bounds a text answer, in characters.
const MaxTextAnswer = 200

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Render returns what the playbook creates with answers (Answers' result), in creation
// order. refs maps Ref(kind, key) to the id of a resource already created; a placeholder of
// a resource without one is left in place, so that two renders compare equal exactly when
// they would create the same thing.
func (p Playbook) Render(answers map[string]any, refs map[string]string) ([]Resource, error) {
	var out []Resource
	add := func(kind, key, name string, spec any) error {
		b, err := json.Marshal(spec)
		if err != nil {
			return err
		}
		out = append(out, Resource{Kind: kind, Key: key, Name: name, Spec: b})
		return nil
	}
	for _, l := range p.Installs.Labels {
		if err := add(KindLabel, l.Key, l.Name, map[string]any{"name": l.Name}); err != nil {
			return nil, err
		}
	}
	for _, f := range p.Installs.Fields {
		if err := add(KindField, f.Key, f.Name, map[string]any{"name": f.Name, "type": f.Type}); err != nil {
			return nil, err
		}
	}
	// A body's resource is named by its body's name.
	addBody := func(kind, key string, body json.RawMessage) error {
		b, err := RenderBody(body, answers, refs)
		if err != nil {
			return fmt.Errorf("catalog: %s %s %s: %w", p.ID, kind, key, err)
		}
		var named struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(b, &named); err != nil {
			return err
		}
		out = append(out, Resource{Kind: kind, Key: key, Name: named.Name, Spec: b})
		return nil
	}
	for _, c := range p.Installs.Content {
		if err := addBody(KindContent, c.Key, c.Body); err != nil {
			return nil, err
		}
	}
	for _, pop := range p.Installs.Popups {
		if err := addBody(KindPopup, pop.Key, pop.Body); err != nil {
			return nil, err
		}
	}
	for _, c := range p.Installs.Collections {
		if err := add(KindCollection, c.Key, c.Name, map[string]any{"name": c.Name, "fields": c.Fields}); err != nil {
			return nil, err
		}
	}
	for _, r := range p.Installs.Reactions {
		if err := addBody(KindReaction, r.Key, r.Body); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RenderBody fills the placeholders of body: a string that is exactly one answer
// placeholder becomes the answer's JSON value (a bool stays a bool), any other placeholder
// inside a string becomes its text; resource placeholders become the ids of refs.
func RenderBody(body json.RawMessage, answers map[string]any, refs map[string]string) (json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	v = fill(v, answers, refs)
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func fill(v any, answers map[string]any, refs map[string]string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = fill(e, answers, refs)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = fill(e, answers, refs)
		}
		return x
	case string:
		if m := placeholderRe.FindStringSubmatch(x); m != nil && m[0] == x && m[1] == "answer" {
			if a, ok := answers[m[2]]; ok {
				return a
			}
			return x
		}
		return placeholderRe.ReplaceAllStringFunc(x, func(ph string) string {
			m := placeholderRe.FindStringSubmatch(ph)
			if m[1] == "answer" {
				a, ok := answers[m[2]]
				if !ok {
					return ph
				}
				return fmt.Sprint(a)
			}
			if id, ok := refs[Ref(m[1], m[2])]; ok {
				return id
			}
			return ph
		})
	}
	return v
}
