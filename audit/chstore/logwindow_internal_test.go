package chstore

import (
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

// TestNextLogWindow: after a window that found n < limit attempts, Log
// tries the shortest window that would hold twice the limit at that rate,
// the next one when it found none, and stops after the week.
func TestNextLogWindow(t *testing.T) {
	const day, week = 24 * time.Hour, 7 * 24 * time.Hour
	for _, c := range []struct {
		w     time.Duration
		n     int
		limit int
		want  time.Duration
	}{
		{5 * time.Minute, 0, 100, time.Hour},       // idle lately: one step
		{5 * time.Minute, 5, 100, day},             // a minute's worth: 200 min wanted
		{5 * time.Minute, 60, 100, time.Hour},      // 17 min wanted
		{5 * time.Minute, 99, 100, time.Hour},      // never the same window again
		{time.Hour, 60, 100, day},                  // 3.3 h wanted
		{time.Hour, 1, 1000, week},                 // more than a week wanted: the week
		{day, 50, 100, week},                       //
		{week, 10, 100, 0},                         // the week was the last
		{5 * time.Minute, 1, audit.MaxLimit, week}, // far beyond: the week, not 0
	} {
		if got := nextLogWindow(c.w, c.n, c.limit); got != c.want {
			t.Errorf("nextLogWindow(%v, %d, %d) = %v, want %v", c.w, c.n, c.limit, got, c.want)
		}
	}
}
