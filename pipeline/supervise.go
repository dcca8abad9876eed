package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Supervisor back-off defaults: 1 s doubling per failure in a row, at most
// 30 s; a run that lasted 1 min or more resets the doubling.
const (
	DefaultRestartBackoff    = time.Second
	DefaultMaxRestartBackoff = 30 * time.Second
	DefaultRestartReset      = time.Minute
)

// fatalError marks an error [Supervise] must not restart on.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// Fatal marks err as fatal: a stage run by [Supervise] that returns it is
// not restarted, and Supervise returns it (so the process exits naming it).
// Use it for errors no restart can cure: invalid configuration, a topic
// with the wrong partition count, a fenced transactional ID (another live
// instance uses it). Fatal(nil) is nil. The mark survives wrapping with %w.
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return &fatalError{err}
}

// IsFatal reports whether err, or an error it wraps, was marked by [Fatal].
func IsFatal(err error) bool {
	var f *fatalError
	return errors.As(err, &f)
}

// StageState is a stage's state as [Supervise] sees it, for readiness
// reports: nil while its run is running, else why not. The zero value says
// "not started". Safe for concurrent use.
type StageState struct {
	err      atomic.Pointer[error]
	restarts atomic.Int64
	running  atomic.Bool
}

var errStageNotStarted = errors.New("not started")

// Err is nil while the stage runs, else why it does not (not started yet,
// or restarting after an error, with that error).
func (s *StageState) Err() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	if s.restarts.Load() == 0 && !s.running.Load() {
		return errStageNotStarted
	}
	return nil
}

// Restarts is how many times the stage was restarted.
func (s *StageState) Restarts() int64 { return s.restarts.Load() }

func (s *StageState) set(err error) {
	if err == nil {
		s.err.Store(nil)
		return
	}
	s.err.Store(&err)
}

// SuperviseOptions configures [Supervise]. The zero value is usable.
type SuperviseOptions struct {
	// Backoff is the wait before the first restart; each failure in a row
	// doubles it, up to MaxBackoff. Optional. Default
	// DefaultRestartBackoff (1 s).
	Backoff time.Duration
	// MaxBackoff caps the wait between restarts. Optional. Default
	// DefaultMaxRestartBackoff (30 s).
	MaxBackoff time.Duration
	// ResetAfter: a run that lasted at least this long counts as healthy,
	// so the next failure waits Backoff again. Optional. Default
	// DefaultRestartReset (1 min).
	ResetAfter time.Duration
	// State, when set, is kept up to date for readiness reports.
	// Optional.
	State *StageState
	// Meter counts restarts as hookrelay.stage.restarts{stage}. Optional.
	// Default: no metrics.
	Meter metric.Meter
	// Logger receives one warning per restart. Optional. Default
	// slog.Default().
	Logger *slog.Logger

	// sleep, set by tests, replaces the back-off wait; false means ctx
	// ended.
	sleep func(ctx context.Context, d time.Duration) bool
}

// Supervise runs run(ctx) until ctx ends, and runs it again, after a capped
// back-off, whenever it returns before that: with a non-fatal error (a Kafka
// stage whose session became unusable, e.g. its transaction could not be
// ended because the broker was unreachable: franz-go documents Begin's and
// End's errors as not retryable), or with nil although ctx is still live.
// Each call of run must create its own clients and close them before it
// returns (the stage shape, docs/ARCHITECTURE.md "Stages"), so a restart
// starts from a fresh session; a transactional stage's restart fences
// whatever its previous run left open.
//
// Supervise returns nil once ctx has ended (whatever the last run returned),
// or at once the first error marked by [Fatal]. A panic in run is not
// recovered. stage names the stage in logs, errors and the metric.
func Supervise(ctx context.Context, stage string, run func(context.Context) error, o SuperviseOptions) error {
	if o.Backoff <= 0 {
		o.Backoff = DefaultRestartBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxRestartBackoff
	}
	o.MaxBackoff = max(o.MaxBackoff, o.Backoff)
	if o.ResetAfter <= 0 {
		o.ResetAfter = DefaultRestartReset
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Meter == nil {
		o.Meter = noop.NewMeterProvider().Meter("hookrelay")
	}
	if o.State == nil {
		o.State = new(StageState)
	}
	if o.sleep == nil {
		o.sleep = sleepCtx
	}
	// Creation fails only on an invalid name (a constant); the instrument
	// is then a no-op, never nil.
	restarts, _ := o.Meter.Int64Counter("hookrelay.stage.restarts",
		metric.WithDescription("Stages restarted after they stopped with an error (e.g. the broker was unreachable), by stage."))
	attrs := metric.WithAttributes(attrStage(stage))
	wait := o.Backoff
	for {
		o.State.running.Store(true)
		o.State.set(nil)
		began := time.Now()
		err := run(ctx)
		o.State.running.Store(false)
		if ctx.Err() != nil {
			o.State.set(errors.New("stopped"))
			return nil
		}
		if IsFatal(err) {
			o.State.set(err)
			return fmt.Errorf("%s: %w", stage, err)
		}
		if err == nil {
			err = errors.New("stopped without an error")
		}
		if time.Since(began) >= o.ResetAfter {
			wait = o.Backoff
		}
		o.State.set(fmt.Errorf("restarting in %v: %w", wait, err))
		o.State.restarts.Add(1)
		restarts.Add(ctx, 1, attrs)
		o.Logger.Warn(stage+": stopped; restarting", "err", err, "backoff", wait.String(), "restarts", o.State.restarts.Load())
		if !o.sleep(ctx, wait) {
			o.State.set(errors.New("stopped"))
			return nil
		}
		wait = min(2*wait, o.MaxBackoff)
	}
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
