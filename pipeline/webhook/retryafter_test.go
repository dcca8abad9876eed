package webhook

import (
	"math"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	// Fri, 07 Nov 2025 08:49:37 GMT, as in RFC 9110's examples (another year).
	now := time.Date(2025, 11, 7, 8, 49, 37, 0, time.UTC)
	tests := []struct {
		v      string
		want   time.Duration
		wantOK bool
	}{
		// delay-seconds
		{"120", 2 * time.Minute, true},
		{"0", 0, true},
		{" 5 ", 5 * time.Second, true},
		{"007", 7 * time.Second, true},
		{"99999999999999999999", time.Duration(math.MaxInt64), true},
		{"9223372036", 9223372036 * time.Second, true},
		{"9223372037", time.Duration(math.MaxInt64), true},
		// Negative: not in the grammar; read leniently as "now".
		{"-5", 0, true},
		// HTTP-date, all three forms of RFC 9110 §5.6.7.
		{"Fri, 07 Nov 2025 08:50:37 GMT", time.Minute, true},
		{"Friday, 07-Nov-25 08:50:37 GMT", time.Minute, true},
		{"Fri Nov  7 08:50:37 2025", time.Minute, true},
		{"Fri, 07 Nov 2025 09:49:37 GMT", time.Hour, true},
		// Past and present dates: retry now.
		{"Fri, 07 Nov 2025 08:49:37 GMT", 0, true},
		{"Thu, 01 Jan 1970 00:00:00 GMT", 0, true},
		// Unusable: the caller's default applies.
		{"", 0, false},
		{"   ", 0, false},
		{"1.5", 0, false},
		{"5s", 0, false},
		{"-", 0, false},
		{"+5", 0, false},
		{"soon", 0, false},
		{"2025-11-07T08:50:37Z", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.v, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.wantOK)
		}
	}
}

// The cap is the caller's, at the longest tier.
func TestRetryAfterCap(t *testing.T) {
	now := time.Date(2025, 11, 7, 8, 49, 37, 0, time.UTC)
	d, ok := ParseRetryAfter("86400", now)
	if !ok {
		t.Fatal("not ok")
	}
	if got := min(d, 6*time.Hour); got != 6*time.Hour { // the longest tier of the default schedule
		t.Errorf("capped Retry-After = %v, want 6h", got)
	}
}
