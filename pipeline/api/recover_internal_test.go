package api

import (
	"strings"
	"testing"
)

// TestRecoveryLimiter: one running recovery per endpoint, at most
// MaxConcurrentRecoveries in all; a release admits the next (F7).
func TestRecoveryLimiter(t *testing.T) {
	var l recoveryLimiter
	r1, busy := l.acquire("ep_1")
	if busy != "" {
		t.Fatalf("first recovery refused: %s", busy)
	}
	if _, busy := l.acquire("ep_1"); !strings.Contains(busy, "endpoint ep_1 is running") {
		t.Fatalf("second recovery of ep_1 admitted (%q)", busy)
	}
	var rel []func()
	for i := 1; i < MaxConcurrentRecoveries; i++ {
		r, busy := l.acquire("ep_x" + string(rune('a'+i)))
		if busy != "" {
			t.Fatalf("recovery %d refused: %s", i+1, busy)
		}
		rel = append(rel, r)
	}
	if _, busy := l.acquire("ep_other"); !strings.Contains(busy, "recoveries are running") {
		t.Fatalf("recovery past the global limit admitted (%q)", busy)
	}
	r1()
	r, busy := l.acquire("ep_1")
	if busy != "" {
		t.Fatalf("recovery after release refused: %s", busy)
	}
	r()
	for _, r := range rel {
		r()
	}
}
