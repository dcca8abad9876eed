package retrytiers

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFormatDelay(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{30 * time.Second, "30s"},
		{2 * time.Minute, "2m"},
		{10 * time.Minute, "10m"},
		{time.Hour, "1h"},
		{6 * time.Hour, "6h"},
		{90 * time.Second, "1m30s"},
		{90 * time.Minute, "1h30m"},
		{time.Hour + 30*time.Second, "1h30s"},
		{1500 * time.Millisecond, "1s500ms"},
		{500 * time.Millisecond, "500ms"},
		{25 * time.Hour, "25h"},
		{1500 * time.Microsecond, "1ms500us"},
		{-2 * time.Second, "-2s"},
	}
	for _, tt := range tests {
		got := FormatDelay(tt.d)
		if got != tt.want {
			t.Errorf("FormatDelay(%v) = %q, want %q", tt.d, got, tt.want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != tt.d {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", got, back, err, tt.d)
		}
	}
}

func TestTiersFor(t *testing.T) {
	tiers, err := TiersFor("hookrelay.", DefaultSchedule())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"hookrelay.retry-30s", "hookrelay.retry-2m", "hookrelay.retry-10m", "hookrelay.retry-30m",
		"hookrelay.retry-1h", "hookrelay.retry-2h", "hookrelay.retry-4h", "hookrelay.retry-6h",
	}
	if got := tiers.Topics(); !slices.Equal(got, want) {
		t.Errorf("Topics = %v, want %v", got, want)
	}
	if err := tiers.Validate(); err != nil {
		t.Error(err)
	}
	if tiers.Smallest() != 30*time.Second || tiers.Largest() != 6*time.Hour {
		t.Errorf("Smallest, Largest = %v, %v", tiers.Smallest(), tiers.Largest())
	}
	if tr, ok := tiers.ByTopic("hookrelay.retry-1h"); !ok || tr.Delay != time.Hour {
		t.Errorf("ByTopic(retry-1h) = %v, %v", tr, ok)
	}
	if _, ok := tiers.ByTopic("hookrelay.deliveries"); ok {
		t.Error("ByTopic found a non-tier topic")
	}

	// Unsorted input with duplicates; empty prefix.
	tiers, err = TiersFor("", Schedule{2 * time.Second, time.Second, 2 * time.Second, 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := tiers.Topics(); !slices.Equal(got, []string{"retry-1s", "retry-2s", "retry-1m30s"}) {
		t.Errorf("Topics = %v", got)
	}

	if _, err := TiersFor("x.", Schedule{time.Second, -time.Second}); err == nil || !strings.Contains(err.Error(), "element 2") {
		t.Errorf("TiersFor with a negative delay: %v", err)
	}
	var empty Tiers
	if empty.Smallest() != 0 || empty.Largest() != 0 {
		t.Error("empty Tiers: Smallest/Largest not 0")
	}
	if _, ok := empty.Next(time.Hour); ok {
		t.Error("empty Tiers: Next found a tier")
	}
}

func TestTiersValidate(t *testing.T) {
	tests := []struct {
		tiers   Tiers
		wantErr string
	}{
		{tiers: Tiers{{"a", time.Second}, {"b", 2 * time.Second}}},
		{tiers: nil, wantErr: "no tiers"},
		{tiers: Tiers{{"", time.Second}}, wantErr: "empty topic"},
		{tiers: Tiers{{"a", time.Second}, {"a", 2 * time.Second}}, wantErr: "duplicate topic"},
		{tiers: Tiers{{"a", 0}}, wantErr: "positive"},
		{tiers: Tiers{{"a", 2 * time.Second}, {"b", time.Second}}, wantErr: "ascending"},
		{tiers: Tiers{{"a", time.Second}, {"b", time.Second}}, wantErr: "ascending"},
	}
	for _, tt := range tests {
		err := tt.tiers.Validate()
		if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Validate(%v) = %v, want error containing %q", tt.tiers, err, tt.wantErr)
		}
	}
}

func TestTiersNext(t *testing.T) {
	tiers, err := TiersFor("p.", DefaultSchedule())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		remaining time.Duration
		want      string // "" for none
	}{
		{-time.Hour, ""},
		{0, ""},
		{29999 * time.Millisecond, ""},
		{30 * time.Second, "p.retry-30s"},
		{45 * time.Second, "p.retry-30s"},
		{2*time.Minute - time.Millisecond, "p.retry-30s"},
		{2 * time.Minute, "p.retry-2m"},
		{9 * time.Minute, "p.retry-2m"},
		{10 * time.Minute, "p.retry-10m"},
		{36 * time.Minute, "p.retry-30m"},
		{72 * time.Minute, "p.retry-1h"},
		{3 * time.Hour, "p.retry-2h"},
		{5*time.Hour + 59*time.Minute, "p.retry-4h"},
		{6 * time.Hour, "p.retry-6h"},
		{7*time.Hour + 12*time.Minute, "p.retry-6h"},
		{100 * time.Hour, "p.retry-6h"},
	}
	for _, tt := range tests {
		got, ok := tiers.Next(tt.remaining)
		if ok != (tt.want != "") || got.Topic != tt.want {
			t.Errorf("Next(%v) = %v, %v; want %q", tt.remaining, got, ok, tt.want)
		}
	}
}

// hops walks the greedy plan of a wait: the tiers a record passes through
// and the remainder left for the dispatcher.
func hops(tiers Tiers, wait time.Duration) (path []time.Duration, rest time.Duration) {
	for {
		tr, ok := tiers.Next(wait)
		if !ok {
			return path, wait
		}
		path = append(path, tr.Delay)
		wait -= tr.Delay
	}
}

func TestTiersHopPlans(t *testing.T) {
	tiers, err := TiersFor("p.", DefaultSchedule())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		wait     time.Duration
		wantPath string
		wantRest time.Duration
	}{
		{wait: 20 * time.Second, wantPath: "", wantRest: 20 * time.Second},
		{wait: 30 * time.Second, wantPath: "30s", wantRest: 0},
		{wait: 35*time.Second + 400*time.Millisecond, wantPath: "30s", wantRest: 5*time.Second + 400*time.Millisecond},
		{wait: 2*time.Minute + 12*time.Second, wantPath: "2m", wantRest: 12 * time.Second},
		// Attempt 8 with full +20 % jitter: 7 h 12 m.
		{wait: 7*time.Hour + 12*time.Minute, wantPath: "6h,1h,10m,2m", wantRest: 0},
		// Retry-After: 3600 after a 429.
		{wait: time.Hour, wantPath: "1h", wantRest: 0},
		{wait: 5*time.Hour + 59*time.Minute + 59*time.Second, wantPath: "4h,1h,30m,10m,10m,2m,2m,2m,2m,30s,30s,30s", wantRest: 29 * time.Second},
	}
	for _, tt := range tests {
		path, rest := hops(tiers, tt.wait)
		var names []string
		var sum time.Duration
		for _, d := range path {
			names = append(names, FormatDelay(d))
			sum += d
		}
		if got := strings.Join(names, ","); got != tt.wantPath || rest != tt.wantRest {
			t.Errorf("plan(%v) = %q + %v, want %q + %v", tt.wait, got, rest, tt.wantPath, tt.wantRest)
		}
		if sum+rest != tt.wait {
			t.Errorf("plan(%v): hops %v + rest %v do not add up", tt.wait, sum, rest)
		}
	}
}

// The bound stated on Next: at most 12 hops for any wait under 6 h with the
// default tiers; and no plan ever overshoots the wait.
func TestTiersHopBound(t *testing.T) {
	tiers, err := TiersFor("p.", DefaultSchedule())
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for w := time.Duration(0); w < 6*time.Hour; w += time.Second {
		path, rest := hops(tiers, w)
		most = max(most, len(path))
		if rest < 0 || rest >= tiers.Smallest() {
			t.Fatalf("plan(%v) leaves %v", w, rest)
		}
	}
	if most != 12 {
		t.Errorf("most hops under 6h = %d, want 12 (as documented)", most)
	}
}

func TestTierTopicConfig(t *testing.T) {
	c := TierTopicConfig()
	want := map[string]string{
		"message.timestamp.type": "LogAppendTime",
		"cleanup.policy":         "delete",
		"retention.ms":           "604800000",
	}
	if len(c) != len(want) {
		t.Errorf("TierTopicConfig has %d entries, want %d", len(c), len(want))
	}
	for k, v := range want {
		if c[k] == nil || *c[k] != v {
			t.Errorf("TierTopicConfig[%q] = %v, want %q", k, c[k], v)
		}
	}
	*c["cleanup.policy"] = "compact"
	if *TierTopicConfig()["cleanup.policy"] != "delete" {
		t.Error("TierTopicConfig shares its values between calls")
	}
}
