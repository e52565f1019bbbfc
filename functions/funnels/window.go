package funnels

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Bounds of a conversion window: shorter than a minute is a clock's noise, longer than 90
// days is not one journey (and every report scans that far past its range).
const (
	MinWindow     = time.Minute
	MaxWindow     = 90 * 24 * time.Hour
	DefaultWindow = 24 * time.Hour
)

// isoDuration is the ISO 8601 durations a window may be written as: P[nW][nD][T[nH][nM][nS]],
// whole numbers of each unit.
var isoDuration = regexp.MustCompile(`^P(?:(\d{1,6})W)?(?:(\d{1,6})D)?(?:T(?:(\d{1,8})H)?(?:(\d{1,8})M)?(?:(\d{1,9})S)?)?$`)

// parseISODuration reads s as such a duration.
func parseISODuration(s string) (time.Duration, bool) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil || s == "P" || s[len(s)-1] == 'T' {
		return 0, false
	}
	var total int64
	for i, unit := range []int64{7 * 86400, 86400, 3600, 60, 1} {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil {
			return 0, false
		}
		total += n * unit // each part is bounded by the pattern: no overflow
	}
	return time.Duration(total) * time.Second, true
}

// parseWindow reads a conversion window as sent: whole seconds (86400) or an ISO 8601
// duration of weeks, days, hours, minutes and seconds ("P1D", "PT30M", "P1DT12H", "P2W").
// Years and months are refused: they have no fixed length. The message says what is wrong.
func parseWindow(raw json.RawMessage) (time.Duration, string) {
	raw = bytes.TrimSpace(raw)
	const want = `must be whole seconds (86400) or an ISO 8601 duration of weeks, days, hours, minutes and seconds ("P1D", "PT30M", "P1DT12H")`
	var d time.Duration
	switch {
	case len(raw) > 0 && raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, want
		}
		var ok bool
		if d, ok = parseISODuration(s); !ok {
			return 0, fmt.Sprintf("%q is not a duration this API reads: it %s", s, want[5:])
		}
	default:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n < 0 || n > int64(10*MaxWindow/time.Second) {
			return 0, want
		}
		d = time.Duration(n) * time.Second
	}
	if d < MinWindow || d > MaxWindow {
		return 0, fmt.Sprintf("is %d seconds; it must be %d (1 minute) to %d (90 days)", int64(d/time.Second), int64(MinWindow/time.Second), int64(MaxWindow/time.Second))
	}
	return d, ""
}
