package retrytiers

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Schedule is the retry schedule as data: element i is the delay after
// failed attempt i+1, so a Schedule of n delays allows n+1 attempts in all.
// Every element is positive and a whole number of milliseconds (due times
// travel in headers as unix milliseconds); [ParseSchedule] and
// [Schedule.Validate] enforce this.
//
// A Schedule is a plain slice: its methods never modify it and are safe for
// concurrent use as long as nobody writes to it.
type Schedule []time.Duration

// DefaultSchedule returns the default retry schedule: 30s, 2m, 10m, 30m, 1h,
// 2h, 4h, 6h, 6h, 6h, that is 11 attempts spanning about 25.7 h before
// jitter.
//
// Source: the seed "Webhook Delivery Throttling and Retries" (delivery policy
// table: max_attempts 8–12, backoff min(30s × 2^n, 6h) + jitter) and the seed
// "Reliable Webhook Delivery with a Job Queue" (retries must span at least
// 24 hours); the exact steps are the retry-tiers issue's. Delays are capped at
// 6 h as in the policy table, and the last three repeat the cap so that the
// total passes a day.
func DefaultSchedule() Schedule {
	return Schedule{
		30 * time.Second,
		2 * time.Minute,
		10 * time.Minute,
		30 * time.Minute,
		time.Hour,
		2 * time.Hour,
		4 * time.Hour,
		6 * time.Hour,
		6 * time.Hour,
		6 * time.Hour,
	}
}

// DefaultJitter is the default jitter fraction for [Schedule.Delay]: each
// delay is stretched by up to +20 %, never shortened.
const DefaultJitter = 0.2

// ParseSchedule parses a comma-separated list of Go durations, such as the
// value of HOOKRELAY_RETRY_SCHEDULE: "30s,2m,10m,30m,1h,2h,4h,6h,6h,6h".
// Spaces around elements are ignored. The result is validated as by
// [Schedule.Validate]; errors name the offending element by 1-based position
// and text.
func ParseSchedule(v string) (Schedule, error) {
	if strings.TrimSpace(v) == "" {
		return nil, errors.New("retrytiers: schedule is empty")
	}
	parts := strings.Split(v, ",")
	s := make(Schedule, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		d, err := time.ParseDuration(p)
		if err != nil {
			return nil, fmt.Errorf("retrytiers: schedule element %d %q: %w", i+1, p, err)
		}
		if err := checkDelay(d); err != nil {
			return nil, fmt.Errorf("retrytiers: schedule element %d %q: %w", i+1, p, err)
		}
		s = append(s, d)
	}
	return s, nil
}

// Validate reports whether s is usable: at least one delay, each positive and
// a whole number of milliseconds. The error names the first bad element.
func (s Schedule) Validate() error {
	if len(s) == 0 {
		return errors.New("retrytiers: schedule is empty")
	}
	for i, d := range s {
		if err := checkDelay(d); err != nil {
			return fmt.Errorf("retrytiers: schedule element %d (%v): %w", i+1, d, err)
		}
	}
	return nil
}

func checkDelay(d time.Duration) error {
	switch {
	case d <= 0:
		return errors.New("delay must be positive")
	case d%time.Millisecond != 0:
		return errors.New("delay must be a whole number of milliseconds")
	}
	return nil
}

// MaxAttempts is the number of attempts the schedule allows: len(s)+1
// (the first attempt plus one per delay).
func (s Schedule) MaxAttempts() int { return len(s) + 1 }

// MaxDelay is the longest delay of the schedule, before jitter; 0 for an
// empty schedule. It is also the cap callers apply to a receiver's
// Retry-After (see [ParseRetryAfter]): the longest tier is the longest a
// record can wait in one hop, and a receiver cannot hold a delivery longer
// than the schedule's own longest pause.
func (s Schedule) MaxDelay() time.Duration {
	var m time.Duration
	for _, d := range s {
		m = max(m, d)
	}
	return m
}

// Total is the sum of all delays before jitter: how long the schedule spans
// from the first attempt to the last (at least; jitter only adds).
func (s Schedule) Total() time.Duration {
	var t time.Duration
	for _, d := range s {
		t += d
	}
	return t
}

// Delay returns how long to wait after failed attempt number failed
// (1-based) before the next attempt, and false when no attempt follows
// (failed >= MaxAttempts, or failed < 1).
//
// Jitter is upward only: the result is the schedule's delay d stretched to
// d + d×jitter×u, truncated to whole milliseconds but never below d, so the
// schedule never shortens. jitter is the maximum fraction (use
// [DefaultJitter]); values outside [0, 1] are clamped. u is the caller's
// random draw in [0, 1), e.g. rand.Float64() from a source the caller owns;
// values outside are clamped. Delay itself is deterministic: there is no
// hidden random source.
func (s Schedule) Delay(failed int, jitter, u float64) (time.Duration, bool) {
	if failed < 1 || failed > len(s) {
		return 0, false
	}
	d := s[failed-1]
	jitter = min(max(jitter, 0), 1)
	u = min(max(u, 0), 1)
	extra := time.Duration(float64(d) * jitter * u).Truncate(time.Millisecond)
	return d + max(extra, 0), true
}

// String formats s as [ParseSchedule] reads it, with compact durations:
// "30s,2m,10m,30m,1h,2h,4h,6h,6h,6h".
func (s Schedule) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = FormatDelay(d)
	}
	return strings.Join(parts, ",")
}
