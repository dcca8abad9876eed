package ratelimit

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func mustNew(t *testing.T, l Limit) *Endpoint {
	t.Helper()
	e, err := New(l)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		l    Limit
		want string
	}{
		{Limit{RatePerSec: 0, MaxInFlight: 1}, "RatePerSec"},
		{Limit{RatePerSec: -1, MaxInFlight: 1}, "RatePerSec"},
		{Limit{RatePerSec: 1, MaxInFlight: 0}, "MaxInFlight"},
		{Limit{RatePerSec: 1, MaxInFlight: 1, Burst: -1}, "Burst"},
	} {
		_, err := New(tc.l)
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want error naming %s", tc.l, err, tc.want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestRatePacing(t *testing.T) {
	// 10/s with the default burst of 1: one request every 100 ms.
	e := mustNew(t, Limit{RatePerSec: 10, MaxInFlight: 100})
	if d, err := e.Acquire(t0); d != 0 || err != nil {
		t.Fatalf("first Acquire = %v, %v; want immediate", d, err)
	}
	d, err := e.Acquire(t0)
	if err != nil || d != 100*time.Millisecond {
		t.Fatalf("second Acquire at t0 = %v, %v; want wait 100ms", d, err)
	}
	// A refusal took nothing: still 100 ms from t0.
	if d, _ := e.Acquire(t0.Add(40 * time.Millisecond)); d != 60*time.Millisecond {
		t.Fatalf("Acquire at +40ms = %v; want 60ms", d)
	}
	if d, err := e.Acquire(t0.Add(100 * time.Millisecond)); d != 0 || err != nil {
		t.Fatalf("Acquire at +100ms = %v, %v; want immediate", d, err)
	}
	// Over one second at 10/s with burst 1: exactly 10 more starts.
	n := 0
	for ms := 101; ms <= 1100; ms++ {
		if d, err := e.Acquire(t0.Add(time.Duration(ms) * time.Millisecond)); d == 0 && err == nil {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("starts in (100ms,1100ms] = %d; want 10", n)
	}
}

func TestInFlightCap(t *testing.T) {
	e := mustNew(t, Limit{RatePerSec: 1000, Burst: 1000, MaxInFlight: 4})
	for i := 0; i < 4; i++ {
		if _, err := e.Acquire(t0); err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
	}
	if _, err := e.Acquire(t0); !errors.Is(err, ErrInFlight) {
		t.Fatalf("fifth Acquire err = %v; want ErrInFlight", err)
	}
	if got := e.InFlight(); got != 4 {
		t.Fatalf("InFlight = %d; want 4", got)
	}
	e.Release()
	if _, err := e.Acquire(t0); err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
}

func TestPauseExtendsOnly(t *testing.T) {
	e := mustNew(t, Limit{RatePerSec: 1000, Burst: 10, MaxInFlight: 4})
	if !e.Pause(t0.Add(5 * time.Second)) {
		t.Fatal("Pause(+5s) did not extend")
	}
	if e.Pause(t0.Add(time.Second)) {
		t.Fatal("Pause(+1s) shortened a 5s pause")
	}
	if d, err := e.Acquire(t0.Add(2 * time.Second)); d != 3*time.Second || err != nil {
		t.Fatalf("Acquire during pause = %v, %v; want 3s", d, err)
	}
	if d, err := e.Acquire(t0.Add(5 * time.Second)); d != 0 || err != nil {
		t.Fatalf("Acquire at pause end = %v, %v; want immediate", d, err)
	}
}

func TestSetLimit(t *testing.T) {
	e := mustNew(t, Limit{RatePerSec: 1, MaxInFlight: 1})
	if _, err := e.Acquire(t0); err != nil {
		t.Fatal(err)
	}
	if err := e.SetLimit(Limit{RatePerSec: 0, MaxInFlight: 1}, t0); err == nil {
		t.Fatal("SetLimit accepted RatePerSec 0")
	}
	if err := e.SetLimit(Limit{RatePerSec: 100, Burst: 100, MaxInFlight: 2}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Acquire(t0.Add(time.Second)); err != nil {
		t.Fatalf("Acquire under raised MaxInFlight: %v", err)
	}
	if _, err := e.Acquire(t0.Add(time.Second)); !errors.Is(err, ErrInFlight) {
		t.Fatalf("third concurrent Acquire err = %v; want ErrInFlight", err)
	}
}

func ExampleEndpoint_Acquire() {
	e, _ := New(Limit{RatePerSec: 5, MaxInFlight: 2})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	wait, err := e.Acquire(now)
	fmt.Println(wait, err)
	wait, err = e.Acquire(now) // one token every 1/5 s
	fmt.Println(wait, err)
	// Output:
	// 0s <nil>
	// 200ms <nil>
}

// TestTakeThenBegin: a request paced in two steps (its token at Take, its
// slot at Begin, so a caller holds no slot while it writes its log row)
// obeys the same rate, cap and pause as Acquire.
func TestTakeThenBegin(t *testing.T) {
	e := mustNew(t, Limit{RatePerSec: 10, MaxInFlight: 1})
	if w := e.Take(t0); w != 0 {
		t.Fatalf("first Take waits %v; want 0 (full bucket of 1)", w)
	}
	if w := e.Take(t0); w <= 0 || w > 100*time.Millisecond {
		t.Fatalf("second Take at the same instant waits %v; want (0, 100ms] at 10/s", w)
	}
	if e.InFlight() != 0 {
		t.Fatalf("Take took a slot: %d in flight", e.InFlight())
	}
	if w, err := e.Begin(t0); w != 0 || err != nil {
		t.Fatalf("Begin = %v, %v; want a slot", w, err)
	}
	if _, err := e.Begin(t0); !errors.Is(err, ErrInFlight) {
		t.Fatalf("second Begin: %v; want ErrInFlight at cap 1", err)
	}
	e.Release()
	e.Pause(t0.Add(time.Minute))
	if w := e.Take(t0.Add(time.Second)); w != 59*time.Second {
		t.Fatalf("Take during a pause waits %v; want the 59s left", w)
	}
	if w, err := e.Begin(t0.Add(time.Second)); w != 59*time.Second || err != nil {
		t.Fatalf("Begin during a pause = %v, %v; want the 59s left", w, err)
	}
}
