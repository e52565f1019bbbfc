package eventlog

import (
	"fmt"
	"math"
	"time"
	"unicode"
	"unicode/utf8"
)

// More bounds Validate enforces.
const (
	// MaxChannelBytes bounds Channel.
	MaxChannelBytes = 32
	// MaxRevenueMinor bounds a revenue's amount either way: a trillion minor units (ten
	// billion dollars) per event, so that sums over millions of events stay far from int64's
	// limit.
	MaxRevenueMinor = 1_000_000_000_000
)

// earliest and latest bound At: the Unix epoch (stores keep milliseconds since it) and the
// end of year 9999 (RFC 3339 has four-digit years).
var (
	earliest = time.Unix(0, 0).UTC()
	latest   = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// InvalidError is the ErrInvalid of one member of an event: Field names it as the custom
// events route spells it (name, at, properties.plan, revenue.currency, ...).
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInvalid, e.Field, e.Message)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Validate reports the first bound e breaks, as an *InvalidError (errors.Is ErrInvalid); nil
// when e may be appended. Every Log refuses what it refuses, so that an event that a test
// appends to eventlogtest.Memory is one the stores take too.
func Validate(e Event) error {
	switch {
	case !isID(e.ID, printableASCII):
		return invalid("id", "must be 1 to %d printable ASCII characters", MaxIDBytes)
	case !isID(e.BotID, keySafe):
		return invalid("bot_id", "must be 1 to %d letters, digits, _ or -", MaxIDBytes)
	case e.SubscriberID != "" && !isID(e.SubscriberID, keySafe):
		return invalid("subscriber_id", "must be at most %d letters, digits, _ or -", MaxIDBytes)
	}
	if err := CheckName(e.Name); err != nil {
		return invalid("name", "%s", err.Error())
	}
	switch {
	case e.At.Before(earliest) || !e.At.Before(latest):
		return invalid("at", "must be between 1970 and 9999")
	case len(e.Channel) > MaxChannelBytes || !all(e.Channel, channelSafe):
		return invalid("channel", "must be at most %d lower-case letters, digits or _", MaxChannelBytes)
	case !knownSource(e.Source):
		return invalid("source", "unknown source %q", e.Source)
	case e.ClientEventID != "" && CheckClientEventID(e.ClientEventID) != nil:
		return invalid("event_id", "%s", CheckClientEventID(e.ClientEventID).Error())
	}
	if err := checkProperties(e.Properties); err != nil {
		return err
	}
	return checkRevenue(e.Revenue)
}

// CheckName reports why name is not an event name: 1 to MaxNameBytes of lower-case ASCII
// letters, digits, '_', '.' and '-', starting with a letter or a digit.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("is required")
	case len(name) > MaxNameBytes:
		return fmt.Errorf("must be at most %d characters", MaxNameBytes)
	case !alnumLower(name[0]) || !all(name, nameSafe):
		return fmt.Errorf("must be lower-case letters, digits, _ . or -, starting with a letter or digit")
	}
	return nil
}

// CheckClientEventID reports why id is not a client's event id: 1 to MaxIDBytes bytes of
// printable UTF-8.
func CheckClientEventID(id string) error {
	if !printable(id, MaxIDBytes) {
		return fmt.Errorf("must be 1 to %d bytes of printable text", MaxIDBytes)
	}
	return nil
}

// CheckPropertyKey reports why key is not a property key: 1 to MaxPropertyKey ASCII
// letters, digits, '_', '.' and '-'.
func CheckPropertyKey(key string) error {
	if key == "" || len(key) > MaxPropertyKey || !all(key, propertySafe) {
		return fmt.Errorf("keys must be 1 to %d letters, digits, _ . or -", MaxPropertyKey)
	}
	return nil
}

// CheckPropertyValue reports why v is not a property value: a string of at most
// MaxPropertyString bytes of printable UTF-8, a finite float64 or a bool.
func CheckPropertyValue(v any) error {
	switch v := v.(type) {
	case string:
		if len(v) > MaxPropertyString || (v != "" && !printable(v, MaxPropertyString)) {
			return fmt.Errorf("strings must be at most %d bytes of printable text", MaxPropertyString)
		}
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("numbers must be finite")
		}
	case bool:
	default:
		return fmt.Errorf("must be a string, a number or a boolean")
	}
	return nil
}

func checkProperties(props map[string]any) error {
	if len(props) > MaxProperties {
		return invalid("properties", "at most %d properties", MaxProperties)
	}
	for k, v := range props {
		if err := CheckPropertyKey(k); err != nil {
			return invalid("properties", "%s", err.Error())
		}
		if err := CheckPropertyValue(v); err != nil {
			return invalid("properties."+k, "%s", err.Error())
		}
	}
	return nil
}

// checkRevenue reports why r is not a revenue (nil is none, which is fine).
func checkRevenue(r *Revenue) error {
	if r == nil {
		return nil
	}
	if _, ok := Currency(r.Currency); !ok {
		return invalid("revenue.currency", "%q is not an active ISO 4217 currency code with a minor unit (upper case, such as USD)", r.Currency)
	}
	if r.Minor > MaxRevenueMinor || r.Minor < -MaxRevenueMinor {
		return invalid("revenue.minor", "must be between -%d and %d", int64(MaxRevenueMinor), int64(MaxRevenueMinor))
	}
	return nil
}

func knownSource(s string) bool {
	switch s {
	case SourceRuntime, SourceBuilder, SourceBroadcast, SourceEmail, SourcePush, SourcePopup, SourceCustom:
		return true
	}
	return false
}

func isID(s string, ok func(byte) bool) bool {
	return s != "" && len(s) <= MaxIDBytes && all(s, ok)
}

// printable reports whether s is 1 to limit bytes of UTF-8 whose runes are all printable
// (letters, marks, numbers, punctuation, symbols and the ASCII space).
func printable(s string, limit int) bool {
	if s == "" || len(s) > limit || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func all(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

func alnumLower(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func nameSafe(c byte) bool { return alnumLower(c) || c == '_' || c == '.' || c == '-' }

func channelSafe(c byte) bool { return alnumLower(c) || c == '_' }

func keySafe(c byte) bool { return alnumLower(c) || c >= 'A' && c <= 'Z' || c == '_' || c == '-' }

func propertySafe(c byte) bool { return keySafe(c) || c == '.' }

func printableASCII(c byte) bool { return c > ' ' && c < 0x7f }
