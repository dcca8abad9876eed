package webhook

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// DefaultPause is how long a 429 without a usable Retry-After pauses an
// endpoint: 60 s (the seed "Webhook Delivery Throttling and Retries":
// `float(r.headers.get("Retry-After") or 60)`).
const DefaultPause = 60 * time.Second

// ParseRetryAfter reads a Retry-After header value (RFC 9110 §10.2.3) as a
// wait from now. Both forms are accepted:
//
//   - delay-seconds (1*DIGIT): "120" is 2 minutes; a value too large for a
//     time.Duration saturates at the largest one.
//   - HTTP-date (RFC 9110 §5.6.7: IMF-fixdate, and the obsolete RFC 850 and
//     asctime forms recipients must accept): the wait is the date minus now.
//
// A date in the past, and leniently a negative number ("-5"), read as 0: retry
// without waiting. ok is false when v is empty or neither form (e.g. "1.5",
// "soon"): the caller then uses its default (e.g. [DefaultPause] on 429).
//
// The result is not capped: callers cap it at the longest tier
// ([Tiers.Largest], equal to [Schedule.MaxDelay]), the longest wait one hop
// can realise and the longest pause the schedule itself ever takes.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	neg := false
	digits := v
	if digits[0] == '-' {
		neg, digits = true, digits[1:]
	}
	if digits != "" && allDigits(digits) {
		if neg {
			return 0, true
		}
		const maxSecs = math.MaxInt64 / int64(time.Second)
		var secs int64
		for i := 0; i < len(digits); i++ {
			d := int64(digits[i] - '0')
			if secs > (maxSecs-d)/10 {
				return time.Duration(math.MaxInt64), true
			}
			secs = secs*10 + d
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
