package stack

import (
	"errors"
	"fmt"
	"maps"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Config is the stack's configuration: CDK context values (cdk.json, -c key=value or
// CDK_CONTEXT_JSON) over defaults. The README's "Deploy to AWS" section lists them.
type Config struct {
	// Stage names the deployment (dev, staging, prod): resource names, aliases, the bus.
	Stage string
	// Domain is an optional custom domain for the API; CertificateArn (ACM, in the
	// stack's region) is then required.
	Domain         string
	CertificateArn string
	// DeletionProtection protects the table from deletion; with it, the table and the
	// keys are also retained when the stack is deleted. Default: true for stage prod.
	DeletionProtection bool
	// AssetDir holds the `make build` output: <AssetDir>/<lambda>/bootstrap.
	AssetDir string
	// LogRetentionDays is the retention of every log group (a CloudWatch Logs value).
	LogRetentionDays int
	// AlarmEmail, when set, is subscribed to the alarm topic.
	AlarmEmail string
	// ThrottleRateLimit (requests/s) and ThrottleBurstLimit bound the API's default stage.
	ThrottleRateLimit  float64
	ThrottleBurstLimit float64
	// Alarm5xxThreshold is how many 5xx answers in 5 minutes raise the API alarm.
	Alarm5xxThreshold float64
}

// Defaults for the context values.
const (
	DefaultStage              = "dev"
	DefaultAssetDir           = "build/lambda"
	DefaultLogRetentionDays   = 30
	DefaultThrottleRateLimit  = 100
	DefaultThrottleBurstLimit = 200
	DefaultAlarm5xxThreshold  = 5
)

// Context keys, as given to `cdk -c key=value`.
const (
	CtxStage              = "stage"
	CtxDomain             = "domain"
	CtxCertificateArn     = "certificateArn"
	CtxDeletionProtection = "deletionProtection"
	CtxAssetDir           = "assetDir"
	CtxLogRetentionDays   = "logRetentionDays"
	CtxAlarmEmail         = "alarmEmail"
	CtxThrottleRateLimit  = "throttleRateLimit"
	CtxThrottleBurstLimit = "throttleBurstLimit"
	CtxAlarm5xxThreshold  = "alarm5xxThreshold"
)

// Prod reports whether the stage is production: its data is retained and protected.
func (c Config) Prod() bool { return c.Stage == "prod" }

// ConfigFrom reads the configuration through get (a construct node's TryGetContext), filling
// defaults. It reports every malformed value at once; call Validate for the rest.
func ConfigFrom(get func(key string) any) (Config, error) {
	var problems []error
	str := func(key, def string) string {
		switch v := get(key).(type) {
		case nil:
			return def
		case string:
			return strings.TrimSpace(v)
		default:
			problems = append(problems, fmt.Errorf("context %s: want a string, got %v", key, v))
			return def
		}
	}
	num := func(key string, def float64) float64 {
		switch v := get(key).(type) {
		case nil:
			return def
		case float64:
			return v
		case int:
			return float64(v)
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				problems = append(problems, fmt.Errorf("context %s: want a number, got %q", key, v))
				return def
			}
			return f
		default:
			problems = append(problems, fmt.Errorf("context %s: want a number, got %v", key, v))
			return def
		}
	}
	c := Config{
		Stage:              str(CtxStage, DefaultStage),
		Domain:             strings.ToLower(str(CtxDomain, "")),
		CertificateArn:     str(CtxCertificateArn, ""),
		AssetDir:           str(CtxAssetDir, DefaultAssetDir),
		AlarmEmail:         str(CtxAlarmEmail, ""),
		ThrottleRateLimit:  num(CtxThrottleRateLimit, DefaultThrottleRateLimit),
		ThrottleBurstLimit: num(CtxThrottleBurstLimit, DefaultThrottleBurstLimit),
		Alarm5xxThreshold:  num(CtxAlarm5xxThreshold, DefaultAlarm5xxThreshold),
	}
	days := num(CtxLogRetentionDays, DefaultLogRetentionDays)
	c.LogRetentionDays = int(days)
	if float64(c.LogRetentionDays) != days {
		problems = append(problems, fmt.Errorf("context %s: want whole days, got %v", CtxLogRetentionDays, days))
	}
	c.DeletionProtection = c.Prod()
	switch v := get(CtxDeletionProtection).(type) {
	case nil:
	case bool:
		c.DeletionProtection = v
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			problems = append(problems, fmt.Errorf("context %s: want true or false, got %q", CtxDeletionProtection, v))
		}
		c.DeletionProtection = b
	default:
		problems = append(problems, fmt.Errorf("context %s: want true or false, got %v", CtxDeletionProtection, v))
	}
	return c, errors.Join(problems...)
}

// stageName: it becomes part of function names (64 characters at most), the bus name and
// key aliases.
var stageName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)

// domainName is a lower-case host name with at least two labels.
var domainName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)

// acmArn is an ACM certificate ARN in any partition.
var acmArn = regexp.MustCompile(`^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[A-Za-z0-9-]+$`)

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var problems []error
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if !stageName.MatchString(c.Stage) {
		bad("%s %q: want 1-20 lower-case letters, digits or hyphens, starting with a letter", CtxStage, c.Stage)
	}
	switch {
	case c.Domain == "" && c.CertificateArn != "":
		bad("%s is set but %s is not", CtxCertificateArn, CtxDomain)
	case c.Domain != "" && !domainName.MatchString(c.Domain):
		bad("%s %q: not a host name", CtxDomain, c.Domain)
	case c.Domain != "" && c.CertificateArn == "":
		bad("%s %q needs %s (an ACM certificate for it, in the stack's region)", CtxDomain, c.Domain, CtxCertificateArn)
	case c.Domain != "" && !acmArn.MatchString(c.CertificateArn):
		bad("%s %q: not an ACM certificate ARN", CtxCertificateArn, c.CertificateArn)
	}
	if c.AssetDir == "" {
		bad("%s is empty", CtxAssetDir)
	}
	if _, ok := retentions()[c.LogRetentionDays]; !ok {
		bad("%s %d: CloudWatch Logs accepts %v", CtxLogRetentionDays, c.LogRetentionDays, slices.Sorted(maps.Keys(retentions())))
	}
	if c.AlarmEmail != "" {
		if a, err := mail.ParseAddress(c.AlarmEmail); err != nil || a.Address != c.AlarmEmail {
			bad("%s %q: not an email address", CtxAlarmEmail, c.AlarmEmail)
		}
	}
	if c.ThrottleRateLimit <= 0 {
		bad("%s %v: want more than 0", CtxThrottleRateLimit, c.ThrottleRateLimit)
	}
	if c.ThrottleBurstLimit <= 0 || c.ThrottleBurstLimit != float64(int(c.ThrottleBurstLimit)) {
		bad("%s %v: want a whole number more than 0", CtxThrottleBurstLimit, c.ThrottleBurstLimit)
	}
	if c.Alarm5xxThreshold < 0 {
		bad("%s %v: want 0 or more", CtxAlarm5xxThreshold, c.Alarm5xxThreshold)
	}
	return errors.Join(problems...)
}

// checkAssets reports every Lambda whose bootstrap is missing from dir, before CDK would
// fail on the first one with a less helpful message.
func checkAssets(dir string, names []string) error {
	var missing []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n, "bootstrap")); err != nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: no bootstrap for %s (run `make build`, or set -c %s=...)",
			dir, strings.Join(missing, ", "), CtxAssetDir)
	}
	return nil
}
