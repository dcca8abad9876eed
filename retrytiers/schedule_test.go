package retrytiers

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultScheduleMeetsSeedPolicy(t *testing.T) {
	s := DefaultSchedule()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	// Seed policy table: max_attempts 8–12; backoff capped at 6 h.
	if n := s.MaxAttempts(); n != 11 || n < 8 || n > 12 {
		t.Errorf("MaxAttempts = %d, want 11 (within 8–12)", n)
	}
	if m := s.MaxDelay(); m != 6*time.Hour {
		t.Errorf("MaxDelay = %v, want 6h", m)
	}
	// Seed "Reliable Webhook Delivery": retries span at least 24 h.
	if tot := s.Total(); tot < 24*time.Hour || tot != 25*time.Hour+42*time.Minute+30*time.Second {
		t.Errorf("Total = %v, want 25h42m30s (>= 24h)", tot)
	}
	if got := s.String(); got != "30s,2m,10m,30m,1h,2h,4h,6h,6h,6h" {
		t.Errorf("String = %q", got)
	}
	// Each call returns a fresh slice.
	s[0] = time.Hour
	if DefaultSchedule()[0] != 30*time.Second {
		t.Error("DefaultSchedule shares its backing array")
	}
}

func TestParseSchedule(t *testing.T) {
	tests := []struct {
		in      string
		want    Schedule
		wantErr string // substring; "" for success
	}{
		{in: "30s,2m,10m,30m,1h,2h,4h,6h,6h,6h", want: DefaultSchedule()},
		{in: " 1s , 2s,3s ", want: Schedule{time.Second, 2 * time.Second, 3 * time.Second}},
		{in: "1m30s", want: Schedule{90 * time.Second}},
		{in: "500ms,1.5s", want: Schedule{500 * time.Millisecond, 1500 * time.Millisecond}},
		{in: "", wantErr: "schedule is empty"},
		{in: "  ", wantErr: "schedule is empty"},
		{in: "30s,2x", wantErr: `element 2 "2x"`},
		{in: "30s,,1m", wantErr: `element 2 ""`},
		{in: "30s,1m,0s", wantErr: `element 3 "0s": delay must be positive`},
		{in: "-5s", wantErr: `element 1 "-5s": delay must be positive`},
		{in: "1s,1500us", wantErr: `element 2 "1500us": delay must be a whole number of milliseconds`},
	}
	for _, tt := range tests {
		got, err := ParseSchedule(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSchedule(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSchedule(%q): %v", tt.in, err)
			continue
		}
		if got.String() != tt.want.String() || len(got) != len(tt.want) {
			t.Errorf("ParseSchedule(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestScheduleRoundTrip(t *testing.T) {
	for _, s := range []Schedule{DefaultSchedule(), {90 * time.Second, 1500 * time.Millisecond, 25 * time.Hour}} {
		got, err := ParseSchedule(s.String())
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != s.String() {
			t.Errorf("round trip of %v gave %v", s, got)
		}
		for i := range s {
			if got[i] != s[i] {
				t.Errorf("element %d: %v != %v", i, got[i], s[i])
			}
		}
	}
}

func TestScheduleValidate(t *testing.T) {
	tests := []struct {
		s       Schedule
		wantErr string
	}{
		{s: Schedule{time.Second}},
		{s: nil, wantErr: "empty"},
		{s: Schedule{time.Second, 0}, wantErr: "element 2"},
		{s: Schedule{time.Nanosecond}, wantErr: "element 1"},
	}
	for _, tt := range tests {
		err := tt.s.Validate()
		if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Validate(%v) = %v, want error containing %q", []time.Duration(tt.s), err, tt.wantErr)
		}
	}
}

func TestScheduleDelay(t *testing.T) {
	s := DefaultSchedule()
	tests := []struct {
		failed    int
		jitter, u float64
		want      time.Duration
		wantOK    bool
	}{
		{failed: 1, jitter: DefaultJitter, u: 0, want: 30 * time.Second, wantOK: true},
		{failed: 1, jitter: DefaultJitter, u: 0.5, want: 33 * time.Second, wantOK: true},
		{failed: 1, jitter: DefaultJitter, u: 0.999999, want: 35999 * time.Millisecond, wantOK: true},
		{failed: 2, jitter: DefaultJitter, u: 0.25, want: 126 * time.Second, wantOK: true},
		{failed: 8, jitter: DefaultJitter, u: 0.5, want: 6*time.Hour + 36*time.Minute, wantOK: true},
		{failed: 10, jitter: 0, u: 0.9, want: 6 * time.Hour, wantOK: true},
		// Clamping: u and jitter outside their ranges.
		{failed: 1, jitter: DefaultJitter, u: -3, want: 30 * time.Second, wantOK: true},
		{failed: 1, jitter: DefaultJitter, u: 7, want: 36 * time.Second, wantOK: true},
		{failed: 1, jitter: -1, u: 0.5, want: 30 * time.Second, wantOK: true},
		{failed: 1, jitter: 5, u: 0.5, want: 45 * time.Second, wantOK: true},
		// No attempt follows.
		{failed: 11, jitter: DefaultJitter, u: 0.5},
		{failed: 0, jitter: DefaultJitter, u: 0.5},
		{failed: -1, jitter: DefaultJitter, u: 0.5},
	}
	for _, tt := range tests {
		got, ok := s.Delay(tt.failed, tt.jitter, tt.u)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Delay(%d, %v, %v) = %v, %v; want %v, %v", tt.failed, tt.jitter, tt.u, got, ok, tt.want, tt.wantOK)
		}
	}
}

// Jitter never shortens a delay and never stretches it past +jitter.
func TestScheduleDelayBounds(t *testing.T) {
	s := DefaultSchedule()
	for failed := 1; failed <= len(s); failed++ {
		for u := 0.0; u < 1; u += 0.001 {
			d, ok := s.Delay(failed, DefaultJitter, u)
			base := s[failed-1]
			if !ok || d < base || float64(d) >= float64(base)*(1+DefaultJitter) || d%time.Millisecond != 0 {
				t.Fatalf("Delay(%d, 0.2, %v) = %v, %v; base %v", failed, u, d, ok, base)
			}
		}
	}
}
