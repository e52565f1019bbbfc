package customersdk

import (
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/shared/httpapi"
)

// Project is a bot's customer SDK project as the token API shows it: never a secret.
type Project struct {
	BotID string `json:"bot_id"`
	// ProjectKey identifies the project to devices. It is public (it ships in web pages and
	// apps) and signed with the deployment's SDK key, so a forged one is refused unread.
	ProjectKey      string   `json:"project_key"`
	Region          string   `json:"region"`
	WebOrigins      []string `json:"web_origins"`
	IOSBundleIDs    []string `json:"ios_bundle_ids"`
	AndroidPackages []string `json:"android_packages"`
	Enabled         bool     `json:"enabled"`
	// IdentitySecretVersion is the identity epoch devices send with a user hash: 1 at
	// creation, one more at each rotation.
	IdentitySecretVersion int `json:"identity_secret_version"`
	// PreviousSecretLapsesAt is, during the 24 hours after a rotation, when the previous
	// secret (version IdentitySecretVersion-1) stops being accepted; null otherwise.
	PreviousSecretLapsesAt *time.Time `json:"previous_secret_lapses_at"`
	Revision               int64      `json:"revision"`
	CreatedAt              time.Time  `json:"created_at"`
	UpdatedAt              time.Time  `json:"updated_at"`
}

// record is the stored project: the shown part and the sealed identity secrets.
type record struct {
	Project
	// Sealed is the current identity secret, sealed under aad(bot, version).
	Sealed []byte `json:"sealed_secret"`
	// PreviousSealed is the secret before the last rotation (version-1), until
	// PreviousSecretLapsesAt.
	PreviousSealed []byte `json:"previous_sealed_secret,omitempty"`
}

// shown is the project as of now: a previous secret that has lapsed is no longer mentioned.
func (r record) shown(now time.Time) Project {
	p := r.Project
	if p.PreviousSecretLapsesAt != nil && !now.Before(*p.PreviousSecretLapsesAt) {
		p.PreviousSecretLapsesAt = nil
	}
	p.WebOrigins = nonNil(p.WebOrigins)
	p.IOSBundleIDs = nonNil(p.IOSBundleIDs)
	p.AndroidPackages = nonNil(p.AndroidPackages)
	return p
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Limits of a project's allowlists.
const (
	MaxAllowlist   = 50
	maxAppIDLength = 255
)

// Settings are the members enable and PATCH change; a member left out keeps its value.
type Settings struct {
	WebOrigins      *[]string `json:"web_origins"`
	IOSBundleIDs    *[]string `json:"ios_bundle_ids"`
	AndroidPackages *[]string `json:"android_packages"`
	Enabled         *bool     `json:"enabled"`
}

var (
	bundleID       = regexp.MustCompile(`^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$`)
	androidPackage = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$`)
)

// Validate checks the allowlists and puts origins in canonical form.
func (s *Settings) Validate() error {
	var p httpapi.Problems
	s.check(&p)
	return p.Err()
}

func (s *Settings) check(p *httpapi.Problems) {
	if s.WebOrigins != nil {
		out := make([]string, 0, len(*s.WebOrigins))
		for i, o := range *s.WebOrigins {
			c, err := CanonicalOrigin(o)
			if err != nil {
				p.Add(fieldAt("web_origins", i), "%s", err.Error())
				continue
			}
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
		*s.WebOrigins = out
	}
	checkList(p, "web_origins", s.WebOrigins, nil)
	checkList(p, "ios_bundle_ids", s.IOSBundleIDs, bundleID)
	checkList(p, "android_packages", s.AndroidPackages, androidPackage)
}

func fieldAt(name string, i int) string { return name + "[" + strconv.Itoa(i) + "]" }

func checkList(p *httpapi.Problems, name string, list *[]string, re *regexp.Regexp) {
	if list == nil {
		return
	}
	if len(*list) > MaxAllowlist {
		p.Add(name, "has %d entries; at most %d", len(*list), MaxAllowlist)
		return
	}
	if re == nil {
		return
	}
	seen := map[string]bool{}
	out := (*list)[:0:0]
	for i, v := range *list {
		if len(v) > maxAppIDLength || !re.MatchString(v) {
			p.Add(fieldAt(name, i), "must be a reverse-DNS application id (letters, digits and dots), at most %d characters", maxAppIDLength)
			continue
		}
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	*list = out
}

// errOrigin is why an origin is refused.
type errOrigin string

func (e errOrigin) Error() string { return string(e) }

// CanonicalOrigin checks a web origin (scheme://host[:port], nothing more) and returns it
// as browsers send it in the Origin header: lower case, without the scheme's default port.
// Only https is allowed, except for localhost and loopback addresses (development).
func CanonicalOrigin(s string) (string, error) {
	if len(s) > 300 || strings.ContainsAny(s, " \t\r\n") {
		return "", errOrigin("must be an origin such as https://shop.example (scheme, host and port only)")
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || strings.HasSuffix(s, "/") {
		return "", errOrigin("must be an origin such as https://shop.example (scheme, host and port only)")
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	local := host == "localhost" || strings.HasSuffix(host, ".localhost")
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		local = true
	}
	switch {
	case scheme == "https":
	case scheme == "http" && local:
	default:
		return "", errOrigin("must use https (http only for localhost)")
	}
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	h := host
	if strings.Contains(host, ":") {
		h = "[" + host + "]"
	}
	if port != "" {
		h += ":" + port
	}
	return scheme + "://" + h, nil
}
