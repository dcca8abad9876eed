package stack

import (
	"testing"
	"time"
)

// Eventually polls cond every 10 ms until it holds, failing the test (Fatal)
// when timeout passes first. timeout is a hang guard, never a speed target:
// give it a generous value. Safe for concurrent use.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
