package api

import (
	"testing"
	"time"
)

// TestStats24hWindow: the endpoints page's window is whole UTC hours that
// hold the last 24 h (and at most an hour more), whatever now's zone.
func TestStats24hWindow(t *testing.T) {
	for _, now := range []time.Time{
		time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 2, 6, 59, 59, 999e6, time.UTC),
		time.Date(2026, 12, 2, 7, 30, 0, 0, time.FixedZone("x", 5*3600+1800)),
	} {
		since, until := stats24hWindow(now)
		if !since.Equal(since.Truncate(time.Hour)) || !until.Equal(until.Truncate(time.Hour)) {
			t.Errorf("at %v: [%v, %v) is not whole hours", now, since, until)
		}
		if since.After(now.Add(-24*time.Hour)) || !until.After(now) || until.Sub(since) != 25*time.Hour {
			t.Errorf("at %v: [%v, %v) does not hold the last 24 h in 25 whole hours", now, since, until)
		}
	}
}
