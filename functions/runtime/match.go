package runtime

import (
	"regexp"
	"strings"
	"sync"
)

// Which reaction an update starts (docs/reactions.md, "Which reaction runs", made precise in
// docs/runtime.md). Published reactions come oldest first, so the first match of each rule
// is the oldest reaction with that trigger.
//
//  1. A button payload starts the reaction whose button trigger has that payload.
//  2. A text that is the /start command starts the start reaction; so does any first
//     contact (the subscriber did not exist before this update), whatever it says.
//  3. A text starts the reaction with a keyword equal to it (trimmed, runs of white space as
//     one, ignoring case); failing that, the reaction whose pattern it matches.
func (r *Runtime) match(published []Published, payload, text string, first bool) (Published, TriggerInfo, bool) {
	if payload != "" {
		for _, p := range published {
			if p.Trigger.Type == TriggerButton && p.Trigger.Payload == payload {
				return p, TriggerInfo{Type: TriggerButton, Payload: payload}, true
			}
		}
		return Published{}, TriggerInfo{}, false
	}
	command := isStartCommand(text)
	if command || first {
		for _, p := range published {
			if p.Trigger.Type == TriggerStart {
				reason := "first_contact"
				if command {
					reason = "command"
				}
				return p, TriggerInfo{Type: TriggerStart, Reason: reason}, true
			}
		}
	}
	if text == "" {
		return Published{}, TriggerInfo{}, false
	}
	norm := normalize(text)
	for _, p := range published {
		if p.Trigger.Type != TriggerKeyword {
			continue
		}
		for _, k := range p.Trigger.Keywords {
			if normalize(k) == norm {
				return p, TriggerInfo{Type: TriggerKeyword, Reason: "keyword", Keyword: k}, true
			}
		}
	}
	for _, p := range published {
		if p.Trigger.Type != TriggerKeyword || p.Trigger.Pattern == "" {
			continue
		}
		if re := r.patterns.get(p.Trigger.Pattern); re != nil && re.MatchString(text) {
			return p, TriggerInfo{Type: TriggerKeyword, Reason: "pattern", Pattern: p.Trigger.Pattern}, true
		}
	}
	return Published{}, TriggerInfo{}, false
}

// normalize is how keywords and texts compare: trimmed, runs of white space as one space,
// lower case (reactions.NormalizeKeyword).
func normalize(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// isStartCommand reports Telegram's /start command: "/start", "/start <parameter>" (a deep
// link) or "/start@botname" (in groups).
func isStartCommand(text string) bool {
	f := strings.Fields(text)
	if len(f) == 0 {
		return false
	}
	c := strings.ToLower(f[0])
	return c == "/start" || strings.HasPrefix(c, "/start@")
}

// patternCache keeps compiled trigger patterns (RE2, case-insensitive). Patterns were
// compiled once at validation; one that no longer compiles matches nothing.
type patternCache struct {
	mu sync.Mutex
	m  map[string]*regexp.Regexp
}

const maxPatterns = 2000

func (c *patternCache) get(pattern string) *regexp.Regexp {
	c.mu.Lock()
	defer c.mu.Unlock()
	if re, ok := c.m[pattern]; ok {
		return re
	}
	if c.m == nil || len(c.m) >= maxPatterns {
		c.m = map[string]*regexp.Regexp{}
	}
	re, err := regexp.Compile("(?i)" + pattern)
	if err != nil {
		re = nil
	}
	c.m[pattern] = re
	return re
}
