package popups

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/text"
)

// fieldName is a subscriber custom field name, as the subscribers family spells them.
var fieldName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// variantKey is a variant's key: it goes into stats keys and the script, so it is plain.
var variantKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// hhmm is a time of day.
var hhmm = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)

// checkShape adds every problem of p that needs nothing but p: required members, ranges,
// lengths, text rules, enumerations, URLs, origins and globs. It also puts p's origins and
// schedule instants in their canonical spelling, which the duplicate check compares.
// withContent false leaves the content out (it was not given at all).
func checkShape(p *httpapi.Problems, pop *Popup, withContent bool) {
	checkName(p, "name", pop.Name)
	if pop.Status != StatusActive && pop.Status != StatusPaused {
		p.Add("status", "must be active or paused")
	}
	if withContent {
		checkContent(p, "content", pop.Content)
	}
	checkTargeting(p, "targeting", pop.Targeting)
	checkFrequency(p, "frequency", pop.Frequency)
	if pop.Schedule != nil {
		checkSchedule(p, "schedule", pop.Schedule)
	}
	if pop.Experiment != nil {
		checkExperiment(p, "experiment", pop.Experiment.Variants)
	}
	pop.AllowedOrigins = checkOrigins(p, "allowed_origins", pop.AllowedOrigins)
}

func checkName(p *httpapi.Problems, field, name string) {
	switch {
	case strings.TrimSpace(name) == "":
		p.Add(field, "is required")
	case utf8.RuneCountInString(name) > MaxNameLen:
		p.Add(field, "is %d characters; at most %d", utf8.RuneCountInString(name), MaxNameLen)
	default:
		p.Text(field, name, text.Name)
	}
}

// checkLen adds a problem when s is longer than max characters or breaks rule.
func checkLen(p *httpapi.Problems, field, s string, max int, rule text.Rule) {
	if n := utf8.RuneCountInString(s); n > max {
		p.Add(field, "is %d characters; at most %d", n, max)
		return
	}
	p.Text(field, s, rule)
}

// checkRequired is checkLen for a member that may not be blank.
func checkRequired(p *httpapi.Problems, field, s string, max int, rule text.Rule) {
	if strings.TrimSpace(s) == "" {
		p.Add(field, "is required")
		return
	}
	checkLen(p, field, s, max, rule)
}

// checkURL accepts absolute http and https URLs: the browser loads them on the customer's site.
func checkURL(p *httpapi.Problems, field, s string) {
	if len(s) > MaxURLLen {
		p.Add(field, "is %d bytes; at most %d", len(s), MaxURLLen)
		return
	}
	if !p.Text(field, s, text.Line) {
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		p.Add(field, "must be an absolute http or https URL")
	}
}

func checkContent(p *httpapi.Problems, path string, c Content) {
	checkRequired(p, path+".title", c.Title, MaxTitleLen, text.Line)
	checkLen(p, path+".body", c.Body, MaxBodyLen, text.Message)
	if c.ImageURL != nil {
		checkURL(p, path+".image_url", *c.ImageURL)
	}
	checkRequired(p, path+".button_text", c.ButtonText, MaxButtonTextLen, text.Line)
	if c.CloseText != nil {
		checkRequired(p, path+".close_text", *c.CloseText, MaxButtonTextLen, text.Line)
	}
	if len(c.Fields) > MaxFields {
		p.Add(path+".fields", "has %d fields; at most %d", len(c.Fields), MaxFields)
		return
	}
	seen := map[string]bool{}
	for i, f := range c.Fields {
		fp := fmt.Sprintf("%s.fields[%d]", path, i)
		switch {
		case f.Name == "":
			p.Add(fp+".name", "is required")
		case len(f.Name) > MaxFieldNameLen:
			p.Add(fp+".name", "is %d characters; at most %d", len(f.Name), MaxFieldNameLen)
		case !fieldName.MatchString(f.Name):
			p.Add(fp+".name", "must be a custom field name in lower_snake_case (a-z, 0-9, _; starting with a letter)")
		case seen[f.Name]:
			p.Add(fp+".name", "%q is already a field of this form", f.Name)
		}
		seen[f.Name] = true
		checkRequired(p, fp+".label", f.Label, MaxLabelLen, text.Line)
		switch f.Type {
		case FieldText, FieldEmail, FieldPhone, FieldNumber, FieldCheckbox:
		default:
			p.Add(fp+".type", "must be one of text, email, phone, number, checkbox")
		}
	}
}

func checkTargeting(p *httpapi.Problems, path string, t Targeting) {
	checkRules(p, path+".url_rules", t.URLRules)
	checkRules(p, path+".exclude_url_rules", t.ExcludeURLRules)
	checkDevices(p, path+".devices", t.Devices)
	switch t.Visitors {
	case VisitorsAll, VisitorsNew, VisitorsReturning:
	default:
		p.Add(path+".visitors", "must be one of all, new, returning")
	}
	if t.DelaySeconds < 0 || t.DelaySeconds > MaxDelaySeconds {
		p.Add(path+".delay_seconds", "must be from 0 to %d", MaxDelaySeconds)
	}
	if t.ScrollPercent < 0 || t.ScrollPercent > 100 {
		p.Add(path+".scroll_percent", "must be from 0 to 100")
	}
}

func checkDevices(p *httpapi.Problems, path string, ds []Device) {
	if len(ds) > 3 {
		p.Add(path, "has %d devices; there are 3 (desktop, mobile, tablet)", len(ds))
		return
	}
	seen := map[Device]bool{}
	for i, d := range ds {
		dp := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case d != DeviceDesktop && d != DeviceMobile && d != DeviceTablet:
			p.Add(dp, "must be one of desktop, mobile, tablet")
		case seen[d]:
			p.Add(dp, "%s is listed twice", d)
		}
		seen[d] = true
	}
}

func checkRules(p *httpapi.Problems, path string, rules []URLRule) {
	if len(rules) > MaxURLRules {
		p.Add(path, "has %d rules; at most %d", len(rules), MaxURLRules)
		return
	}
	for i, r := range rules {
		rp := fmt.Sprintf("%s[%d]", path, i)
		if r.Value == "" {
			p.Add(rp+".value", "is required")
		} else if len(r.Value) > MaxURLLen {
			p.Add(rp+".value", "is %d bytes; at most %d", len(r.Value), MaxURLLen)
			continue
		} else if !p.Text(rp+".value", r.Value, text.Line) {
			continue
		}
		switch r.Match {
		case MatchEquals, MatchPrefix:
			// A whole URL or the start of one: the scheme and host must be there to match
			// anything, since the script compares the page's full URL.
			if r.Value != "" && !strings.HasPrefix(r.Value, "https://") && !strings.HasPrefix(r.Value, "http://") {
				p.Add(rp+".value", "must start with https:// or http:// (%s compares the page's full URL)", r.Match)
			}
		case MatchContains:
		case MatchGlob:
			if _, err := globRegexp(r.Value); err != nil && r.Value != "" {
				p.Add(rp+".value", "is not a valid glob: %s", err)
			}
		default:
			p.Add(rp+".match", "must be one of equals, prefix, contains, glob")
		}
	}
}

func checkFrequency(p *httpapi.Problems, path string, f Frequency) {
	if f.MaxImpressionsPerVisitor < 1 || f.MaxImpressionsPerVisitor > MaxImpressionsPerVisitor {
		p.Add(path+".max_impressions_per_visitor", "must be from 1 to %d", MaxImpressionsPerVisitor)
	}
	if f.MinHoursBetween < 0 || f.MinHoursBetween > MaxHoursBetween {
		p.Add(path+".min_hours_between", "must be from 0 to %d", MaxHoursBetween)
	}
}

// checkSchedule checks s and spells its instants in UTC, to the second.
func checkSchedule(p *httpapi.Problems, path string, s *Schedule) {
	starts := checkInstant(p, path+".starts_at", s.StartsAt)
	ends := checkInstant(p, path+".ends_at", s.EndsAt)
	if starts != nil && ends != nil && !ends.After(*starts) {
		p.Add(path+".ends_at", "must be after starts_at")
	}
	if len(s.DaysOfWeek) > len(weekdays) {
		p.Add(path+".days_of_week", "has %d days; a week has %d", len(s.DaysOfWeek), len(weekdays))
	} else {
		seen := map[string]bool{}
		for i, d := range s.DaysOfWeek {
			dp := fmt.Sprintf("%s.days_of_week[%d]", path, i)
			switch {
			case !slices.Contains(weekdays, d):
				p.Add(dp, "must be one of mon, tue, wed, thu, fri, sat, sun")
			case seen[d]:
				p.Add(dp, "%s is listed twice", d)
			}
			seen[d] = true
		}
	}
	if s.Timezone != "" {
		if _, err := time.LoadLocation(s.Timezone); err != nil || s.Timezone == "Local" {
			p.Add(path+".timezone", "unknown time zone %q; use an IANA name such as Europe/Berlin", s.Timezone)
		}
	}
	if h := s.Hours; h != nil {
		okFrom, okTo := hhmm.MatchString(h.From), hhmm.MatchString(h.To)
		if !okFrom {
			p.Add(path+".hours.from", "must be a time of day HH:MM (00:00 to 23:59)")
		}
		if !okTo {
			p.Add(path+".hours.to", "must be a time of day HH:MM (00:00 to 23:59)")
		}
		if okFrom && okTo && h.From == h.To {
			p.Add(path+".hours.to", "must differ from hours.from (leave hours out to show all day)")
		}
	}
}

// checkInstant parses an RFC 3339 instant and rewrites it in UTC, whole seconds.
func checkInstant(p *httpapi.Problems, field string, s *string) *time.Time {
	if s == nil {
		return nil
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		p.Add(field, "must be an RFC 3339 time such as 2026-05-01T09:00:00Z")
		return nil
	}
	t = t.UTC().Truncate(time.Second)
	*s = t.Format(time.RFC3339)
	return &t
}

// emptySchedule reports whether s restricts nothing: such a schedule is stored as none.
func emptySchedule(s *Schedule) bool {
	return s == nil || s.StartsAt == nil && s.EndsAt == nil && len(s.DaysOfWeek) == 0 && s.Hours == nil
}

func checkExperiment(p *httpapi.Problems, path string, vs []Variant) {
	if len(vs) < MinVariants || len(vs) > MaxVariants {
		p.Add(path+".variants", "has %d variants; an experiment has %d to %d", len(vs), MinVariants, MaxVariants)
		if len(vs) > MaxVariants {
			return
		}
	}
	sum := 0
	seen := map[string]bool{}
	for i, v := range vs {
		vp := fmt.Sprintf("%s.variants[%d]", path, i)
		switch {
		case v.Key == "":
			p.Add(vp+".key", "is required")
		case len(v.Key) > MaxVariantKeyLen || !variantKey.MatchString(v.Key):
			p.Add(vp+".key", "must be 1 to %d characters a-z, 0-9, _, starting with a letter", MaxVariantKeyLen)
		case seen[v.Key]:
			p.Add(vp+".key", "%q is already a variant of this experiment", v.Key)
		}
		seen[v.Key] = true
		if v.Share < 1 || v.Share > 100 {
			p.Add(vp+".share", "must be a percentage from 1 to 100")
		}
		sum += v.Share
		if o := v.Content; o != nil {
			cp := vp + ".content"
			if o.Title != nil {
				checkRequired(p, cp+".title", *o.Title, MaxTitleLen, text.Line)
			}
			if o.Body != nil {
				checkLen(p, cp+".body", *o.Body, MaxBodyLen, text.Message)
			}
			if o.ImageURL != nil {
				checkURL(p, cp+".image_url", *o.ImageURL)
			}
			if o.ButtonText != nil {
				checkRequired(p, cp+".button_text", *o.ButtonText, MaxButtonTextLen, text.Line)
			}
			if o.CloseText != nil {
				checkRequired(p, cp+".close_text", *o.CloseText, MaxButtonTextLen, text.Line)
			}
		}
	}
	if len(vs) >= MinVariants && sum != 100 {
		p.Add(path+".variants", "shares sum to %d; they must sum to 100", sum)
	}
}

// checkOrigins checks the allowed origins and returns them in canonical spelling.
func checkOrigins(p *httpapi.Problems, path string, origins []string) []string {
	switch {
	case len(origins) == 0:
		p.Add(path, "is required: the websites (such as https://shop.example) the popup runs on")
		return origins
	case len(origins) > MaxOrigins:
		p.Add(path, "has %d origins; at most %d", len(origins), MaxOrigins)
		return origins
	}
	out := make([]string, len(origins))
	seen := map[string]bool{}
	for i, o := range origins {
		op := fmt.Sprintf("%s[%d]", path, i)
		c, err := canonicalOrigin(o)
		if err != nil {
			p.Add(op, "%s", err)
			out[i] = o
			continue
		}
		if seen[c] {
			p.Add(op, "%s is listed twice", c)
		}
		seen[c] = true
		out[i] = c
	}
	return out
}

// canonicalOrigin spells an origin the way browsers send the Origin header: lower-case
// scheme and host, no default port, nothing after the host.
func canonicalOrigin(s string) (string, error) {
	const want = "must be an origin: http:// or https:// and a host, an optional port, nothing else (https://shop.example)"
	if len(s) > MaxOriginLen {
		return "", fmt.Errorf("is %d bytes; at most %d", len(s), MaxOriginLen)
	}
	if err := text.Check(s, text.Line); err != nil {
		return "", err
	}
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.User != nil || u.Host == "" || u.RawQuery != "" || u.ForceQuery ||
		u.Fragment != "" || strings.Contains(s, "#") || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("%s", want)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("%s", want)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" || strings.ContainsAny(host, "*%") {
		return "", fmt.Errorf("%s", want)
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("has port %s; a port is 1 to 65535", port)
		}
		if scheme == "https" && n == 443 || scheme == "http" && n == 80 {
			port = ""
		} else {
			port = strconv.Itoa(n)
		}
	}
	if strings.Contains(host, ":") { // IPv6
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

// globRegexp compiles a glob (see MatchGlob) into an anchored regular expression that Go's
// RE2 and browsers' RegExp (with the u flag) read alike: the script receives the compiled
// expression, so the glob has one meaning, checked here.
func globRegexp(g string) (string, error) {
	var b strings.Builder
	b.WriteString("^")
	rs := []rune(g)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '\\':
			if i+1 == len(rs) {
				return "", fmt.Errorf(`ends with \, which escapes nothing`)
			}
			i++
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		case '[':
			end, class, err := globClass(rs, i)
			if err != nil {
				return "", err
			}
			b.WriteString(class)
			i = end
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	if _, err := regexp.Compile(b.String()); err != nil {
		return "", fmt.Errorf("cannot be compiled: %v", err)
	}
	return b.String(), nil
}

// globClass reads the class that starts at rs[start] ('['), returning the index of its ']'
// and the class as a regular expression.
func globClass(rs []rune, start int) (int, string, error) {
	var b strings.Builder
	b.WriteString("[")
	i := start + 1
	if i < len(rs) && (rs[i] == '!' || rs[i] == '^') {
		b.WriteString("^")
		i++
	}
	n := 0
	for ; i < len(rs) && rs[i] != ']'; i++ {
		lo, next, err := classChar(rs, i)
		if err != nil {
			return 0, "", err
		}
		i = next
		b.WriteString(escapeClass(lo))
		if i+2 < len(rs) && rs[i+1] == '-' && rs[i+2] != ']' {
			hi, next, err := classChar(rs, i+2)
			if err != nil {
				return 0, "", err
			}
			if hi < lo {
				return 0, "", fmt.Errorf("has the range %c-%c, whose end comes before its start", lo, hi)
			}
			i = next
			b.WriteString("-" + escapeClass(hi))
		}
		n++
	}
	if i >= len(rs) {
		return 0, "", fmt.Errorf("has a [ at character %d without its closing ]", start+1)
	}
	if n == 0 {
		return 0, "", fmt.Errorf("has an empty class [] at character %d", start+1)
	}
	b.WriteString("]")
	return i, b.String(), nil
}

// classChar reads one character of a class at rs[i], an escaped one included, and returns
// it with the index of its last rune.
func classChar(rs []rune, i int) (rune, int, error) {
	if rs[i] != '\\' {
		return rs[i], i, nil
	}
	if i+1 == len(rs) {
		return 0, 0, fmt.Errorf(`ends with \, which escapes nothing`)
	}
	return rs[i+1], i + 1, nil
}

// escapeClass spells c inside a class so that neither engine reads it as syntax.
func escapeClass(c rune) string {
	if strings.ContainsRune(`\]^-[`, c) {
		return `\` + string(c)
	}
	return string(c)
}
