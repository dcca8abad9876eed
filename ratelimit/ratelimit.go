// Package ratelimit paces the requests hookrelay sends to one endpoint.
//
// An [Endpoint] combines the three controls of the seed "Webhook Delivery
// Throttling and Retries" (delivery policy table): a token bucket for
// requests per second (per_endpoint_rps, golang.org/x/time/rate), a cap on
// requests in flight (per_endpoint_concurrency), and a pause the endpoint
// asked for itself (honour_retry_after: a 429 pauses the whole endpoint, not
// one delivery).
//
// Time is passed in: every method that depends on the clock takes now, so
// tests are tables over fixed instants and nothing here sleeps. The caller
// (the dispatcher) owns the waiting: [Endpoint.Acquire] says how long.
package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limit is the pacing policy of one endpoint.
type Limit struct {
	// RatePerSec is the sustained request rate, in requests per second.
	// Required: must be > 0 (the seeds' typical value is 5–20; hookrelay's
	// endpoint default is 10).
	RatePerSec float64
	// Burst is how many requests may start back to back after the endpoint
	// was idle. Optional. Default (0): max(1, floor(RatePerSec/10)), a tenth
	// of a second's worth, so pacing stays smooth.
	Burst int
	// MaxInFlight caps the requests to the endpoint that have started and not
	// yet ended. Required: must be >= 1 (seed: 2–5; endpoint default 4).
	MaxInFlight int
}

func (l Limit) validate() error {
	switch {
	case !(l.RatePerSec > 0) || math.IsInf(l.RatePerSec, 0):
		return fmt.Errorf("ratelimit: RatePerSec must be a positive number, got %v", l.RatePerSec)
	case l.Burst < 0:
		return fmt.Errorf("ratelimit: Burst must be >= 0, got %d", l.Burst)
	case l.MaxInFlight < 1:
		return fmt.Errorf("ratelimit: MaxInFlight must be >= 1, got %d", l.MaxInFlight)
	}
	return nil
}

func (l Limit) burst() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return max(1, int(l.RatePerSec/10))
}

// ErrInFlight is the reason [Endpoint.Acquire] refuses while the endpoint
// already has MaxInFlight requests open: wait for a [Endpoint.Release].
var ErrInFlight = errors.New("ratelimit: in-flight cap reached")

// Endpoint paces one endpoint. It is safe for concurrent use.
type Endpoint struct {
	mu         sync.Mutex
	limit      Limit
	bucket     *rate.Limiter
	inFlight   int
	pauseUntil time.Time
}

// New returns the pacing state of one endpoint, with a full bucket. It fails
// when l is invalid, naming the field.
func New(l Limit) (*Endpoint, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	return &Endpoint{limit: l, bucket: rate.NewLimiter(rate.Limit(l.RatePerSec), l.burst())}, nil
}

// Acquire takes a slot for one request starting at now.
//
// On success it returns (0, nil) and the caller must call [Endpoint.Release]
// exactly once when the request ends. Otherwise nothing is taken and it
// returns how long to wait before asking again and why:
//   - the endpoint is paused: the time left until the pause ends, and nil;
//   - the in-flight cap is reached: 0 and [ErrInFlight] (ask again after a
//     Release);
//   - the bucket is empty: the time until a token is available, and nil.
//
// A refusal never consumes a token, so waiting never counts against the
// endpoint's rate (or against any delivery's retry budget).
func (e *Endpoint) Acquire(now time.Time) (time.Duration, error) {
	return e.admit(now, true)
}

// admit takes an in-flight slot at now, and a token if withToken, or
// takes nothing and says why (see Acquire).
func (e *Endpoint) admit(now time.Time, withToken bool) (time.Duration, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.Before(e.pauseUntil) {
		return e.pauseUntil.Sub(now), nil
	}
	if e.inFlight >= e.limit.MaxInFlight {
		return 0, ErrInFlight
	}
	if withToken {
		if d := e.token(now); d > 0 {
			return d, nil
		}
	}
	e.inFlight++
	return 0, nil
}

// token takes a token at now, or returns the wait for one, taking nothing;
// mu held.
func (e *Endpoint) token(now time.Time) time.Duration {
	r := e.bucket.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// Take takes the token of one request, whose in-flight slot [Endpoint.Begin]
// takes later (a caller that must do something durable before the request,
// such as writing its log row, paces that by the bucket and holds no slot
// meanwhile). It returns 0 when the token is taken, else how long to wait:
// the time left of a pause, or until a token is available. A refusal takes
// nothing.
func (e *Endpoint) Take(now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.Before(e.pauseUntil) {
		return e.pauseUntil.Sub(now)
	}
	return e.token(now)
}

// Begin takes an in-flight slot for a request whose token [Endpoint.Take]
// took. On success it returns (0, nil) and the caller must call
// [Endpoint.Release] exactly once when the request ends. Otherwise nothing
// is taken: the endpoint is paused (the time left, nil), or the in-flight
// cap is reached (0, [ErrInFlight]).
func (e *Endpoint) Begin(now time.Time) (time.Duration, error) {
	return e.admit(now, false)
}

// Release ends a request started by a successful Acquire or Begin.
func (e *Endpoint) Release() {
	e.mu.Lock()
	if e.inFlight > 0 {
		e.inFlight--
	}
	e.mu.Unlock()
}

// Pause stops new requests to the endpoint until until. A pause only ever
// extends: an earlier until than the current pause changes nothing. It
// reports whether the pause was extended.
func (e *Endpoint) Pause(until time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !until.After(e.pauseUntil) {
		return false
	}
	e.pauseUntil = until
	return true
}

// PausedUntil returns the end of the current pause; it is in the past (or
// zero) when the endpoint is not paused.
func (e *Endpoint) PausedUntil() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pauseUntil
}

// InFlight returns the number of requests acquired and not yet released.
func (e *Endpoint) InFlight() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inFlight
}

// Limit returns the current policy.
func (e *Endpoint) Limit() Limit {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.limit
}

// SetLimit changes the policy at now (an operator edited the endpoint). The
// requests in flight stay; a lower MaxInFlight applies to the next Acquire.
// It fails, changing nothing, when l is invalid.
func (e *Endpoint) SetLimit(l Limit, now time.Time) error {
	if err := l.validate(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.limit = l
	e.bucket.SetLimitAt(now, rate.Limit(l.RatePerSec))
	e.bucket.SetBurstAt(now, l.burst())
	return nil
}
