package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// GenerationGate says when a process starts the dispatchers of a new
// deliveries generation.
type GenerationGate struct {
	// Drained reports whether generation gen's dispatcher group has
	// consumed its topic to the end ([Drained] in production). Required.
	Drained func(ctx context.Context, gen Generation) (bool, error)
	// Grace is the least time between this process reading a generation's
	// switch record and starting its dispatchers: the other processes'
	// producers read the record in that time (the view follows the topic
	// with a 250 ms fetch wait), so "drained" is not judged while one of
	// them still writes to the old generation. Optional. Default 500ms.
	Grace time.Duration
	// MaxWait bounds the wait for the previous generation to drain: past
	// it the new generation's dispatchers start anyway, and an endpoint
	// with deliveries still in the old generation is served from both for
	// a while (its in-flight cap and rate apply per generation then).
	// Optional. Default 30s (the hold of a delivery due within the
	// smallest tier, and MaxQueueWait, are below it by default).
	MaxWait time.Duration
	// Interval between two drain checks. Optional. Default 200ms.
	Interval time.Duration
	// Now is the clock. Optional. Default time.Now.
	Now func() time.Time
	// Logger. Optional. Default slog.Default().
	Logger *slog.Logger
}

func (g *GenerationGate) defaults() {
	if g.Grace == 0 {
		g.Grace = 500 * time.Millisecond
	}
	if g.MaxWait == 0 {
		g.MaxWait = 30 * time.Second
	}
	if g.Interval == 0 {
		g.Interval = 200 * time.Millisecond
	}
	if g.Now == nil {
		g.Now = time.Now
	}
	if g.Logger == nil {
		g.Logger = slog.Default()
	}
}

// RunGenerations runs run(ctx, gen, hold) for every live (not retired)
// generation of gens, each in its own goroutine, until ctx ends; it waits
// for them all before it returns. It returns nil when ctx ends, and the
// error of the first run that returns one while its generation is live
// (cmd/hookrelay passes a supervised dispatcher, which returns only a
// fatal error, [IsFatal]; or the dispatcher could not be built): that
// cancels every other run first, so one generation's fatal fault ends the
// process as a single dispatcher's does. Every run
// starts as soon as its generation is known, so all processes' dispatchers
// join the new generation's group while the old one drains (no rebalance,
// and no duplicate of what a first joiner delivered, when the gate opens);
// run must take no delivery until hold is closed
// ([DispatcherOptions.Hold]). The oldest live generation's hold is closed
// at once; a newer one's once the live generation before it is drained, no
// sooner than gate.Grace after this process first saw it, or at
// gate.MaxWait after that whatever the drain. A generation that becomes
// retired has its run's context cancelled (its run's error, if any, is
// then only logged). onOpen, if not nil, is called
// when a generation's hold is closed, with how long it was held.
func RunGenerations(ctx context.Context, gens *Generations, gate GenerationGate, run func(context.Context, Generation, <-chan struct{}) error, onOpen func(Generation, time.Duration)) error {
	gate.defaults()
	type running struct {
		cancel context.CancelFunc
		done   chan struct{}
		hold   chan struct{}
		open   bool
		seen   time.Time
	}
	live := map[int]*running{}
	failed := make(chan error, 1) // the first error of a live generation's run
	var wg sync.WaitGroup
	defer func() {
		for _, r := range live {
			r.cancel()
		}
		wg.Wait()
	}()
	open := func(gen Generation, r *running, held time.Duration) {
		r.open = true
		close(r.hold)
		gate.Logger.Info("deliveries generation: dispatchers take deliveries", "generation", gen.N, "topic", gen.Topic, "held", held.String())
		if onOpen != nil {
			onOpen(gen, held)
		}
	}
	for {
		changed := gens.Changed()
		now := gate.Now()
		var prev *running
		var prevGen Generation
		pending := false
		for _, gen := range gens.All() {
			r := live[gen.N]
			if !gen.RetiredAt.IsZero() {
				if r != nil {
					r.cancel()
					<-r.done
					delete(live, gen.N)
					gate.Logger.Info("deliveries generation retired: dispatchers stopped", "generation", gen.N, "topic", gen.Topic)
				}
				continue
			}
			if r == nil {
				rctx, cancel := context.WithCancel(ctx)
				r = &running{cancel: cancel, done: make(chan struct{}), hold: make(chan struct{}), seen: now}
				live[gen.N] = r
				wg.Add(1)
				go func(gen Generation, r *running) { // owner: RunGenerations, which waits on wg
					defer wg.Done()
					defer close(r.done)
					runGeneration(ctx, rctx, gen, r.hold, run, failed, gate.Logger)
				}(gen, r)
			}
			if !r.open {
				held := now.Sub(r.seen)
				switch {
				case prev == nil:
					open(gen, r, 0)
				case !prev.open || held < gate.Grace:
					pending = true
				case held >= gate.MaxWait:
					gate.Logger.Warn("deliveries generation: the previous one did not drain in time; taking deliveries anyway (its endpoints are served from both for a while)",
						"generation", gen.N, "previous", prevGen.N, "held", held.String())
					open(gen, r, held)
				default:
					ok, err := gate.Drained(ctx, prevGen)
					if err != nil && ctx.Err() == nil {
						gate.Logger.Warn("deliveries generation: drain check failed", "generation", prevGen.N, "err", err)
					}
					if ok {
						open(gen, r, gate.Now().Sub(r.seen))
					} else {
						pending = true
					}
				}
			}
			prev, prevGen = r, gen
		}
		t, tick := pendingTimer(pending, gate.Interval)
		select {
		case <-ctx.Done():
		case <-changed:
		case <-tick:
		case err := <-failed: // the deferred func cancels and waits for the others
			stopTimer(t)
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		stopTimer(t)
		if ctx.Err() != nil {
			return nil
		}
	}
}

// runGeneration calls run for gen and sends its error to failed (the
// first only) unless rctx ended first (gen retired, or ctx ended).
func runGeneration(ctx, rctx context.Context, gen Generation, hold <-chan struct{}, run func(context.Context, Generation, <-chan struct{}) error,
	failed chan<- error, log *slog.Logger) {
	err := run(rctx, gen, hold)
	switch {
	case err == nil:
	case rctx.Err() != nil: // retired, or ctx ended
		if ctx.Err() == nil {
			log.Warn("deliveries generation: a retired generation's dispatchers ended with an error", "generation", gen.N, "err", err)
		}
	default:
		select {
		case failed <- fmt.Errorf("deliveries generation %d (%s): %w", gen.N, gen.Topic, err):
		default:
		}
	}
}

// pendingTimer is a timer of d and its channel when pending, else nils
// (a nil channel never fires).
func pendingTimer(pending bool, d time.Duration) (*time.Timer, <-chan time.Time) {
	if !pending {
		return nil, nil
	}
	t := time.NewTimer(d)
	return t, t.C
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// isClosed reports whether ch is closed (it is never sent on).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
