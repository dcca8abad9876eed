package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestSuperviseRestartsWithCappedBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	var st StageState
	runs := 0
	errDial := errors.New("unable to dial")
	err := Supervise(ctx, "fanout", func(context.Context) error {
		runs++
		if st.Err() != nil {
			t.Errorf("run %d: State.Err() = %v while running, want nil", runs, st.Err())
		}
		if runs == 7 {
			cancel()
			return nil
		}
		return errDial
	}, SuperviseOptions{Backoff: time.Second, MaxBackoff: 5 * time.Second, State: &st, Logger: quietLog,
		sleep: func(_ context.Context, d time.Duration) bool {
			waits = append(waits, d)
			if !strings.Contains(fmt.Sprint(st.Err()), "unable to dial") {
				t.Errorf("State.Err() while backing off = %v, want the run's error", st.Err())
			}
			return true
		}})
	if err != nil {
		t.Fatalf("Supervise = %v, want nil after ctx ended", err)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("back-offs = %v, want %v", waits, want)
	}
	if runs != 7 || st.Restarts() != 6 {
		t.Errorf("runs %d, restarts %d; want 7, 6", runs, st.Restarts())
	}
	if st.Err() == nil {
		t.Error("State.Err() = nil after Supervise returned")
	}
}

func TestSuperviseFatalExitsAtOnce(t *testing.T) {
	cause := errors.New("deliveries topic has 3 partitions, want 4")
	runs := 0
	var st StageState
	err := Supervise(context.Background(), "dispatch", func(context.Context) error {
		runs++
		return fmt.Errorf("wrapped: %w", Fatal(cause))
	}, SuperviseOptions{State: &st, Logger: quietLog, sleep: func(context.Context, time.Duration) bool {
		t.Error("slept before a fatal error")
		return true
	}})
	if runs != 1 || !errors.Is(err, cause) || !IsFatal(err) || !strings.HasPrefix(err.Error(), "dispatch: ") {
		t.Fatalf("runs %d, err %v; want 1 run and the fatal cause, named by stage", runs, err)
	}
	if !errors.Is(st.Err(), cause) {
		t.Errorf("State.Err() = %v, want the fatal cause", st.Err())
	}
	if Fatal(nil) != nil || IsFatal(cause) {
		t.Error("Fatal(nil) must be nil and an unmarked error not fatal")
	}
}

func TestSuperviseRestartsAfterNilReturnAndEndsWithCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	runs := 0
	slept := 0
	err := Supervise(ctx, "relay", func(context.Context) error {
		runs++
		return nil // stopped although ctx is live: restarted
	}, SuperviseOptions{Logger: quietLog, sleep: func(ctx context.Context, _ time.Duration) bool {
		slept++
		if slept == 3 {
			cancel() // ctx ends during a back-off
		}
		return sleepCtx(ctx, time.Millisecond)
	}})
	if err != nil || runs != 3 || slept != 3 {
		t.Fatalf("err %v, runs %d, sleeps %d; want nil, 3, 3", err, runs, slept)
	}
}

func TestSuperviseLongRunResetsBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	runs := 0
	_ = Supervise(ctx, "sink", func(context.Context) error {
		runs++
		switch runs {
		case 4:
			time.Sleep(20 * time.Millisecond) // longer than ResetAfter: a healthy run
		case 6:
			cancel()
		}
		return errors.New("boom")
	}, SuperviseOptions{Backoff: time.Second, MaxBackoff: time.Minute, ResetAfter: 10 * time.Millisecond, Logger: quietLog,
		sleep: func(_ context.Context, d time.Duration) bool { waits = append(waits, d); return true }})
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, time.Second, 2 * time.Second}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("back-offs = %v, want %v", waits, want)
	}
}

func TestSuperviseRealSleepEndsWithCtx(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { // owner: this test; awaited below
		done <- Supervise(ctx, "fanout", func(context.Context) error { return errors.New("down") },
			SuperviseOptions{Backoff: time.Hour, Logger: quietLog})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Supervise = %v, want nil", err)
		}
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("Supervise did not return when ctx ended during an hour's back-off")
	}
}

func TestStageStateZeroValueNotStarted(t *testing.T) {
	var st StageState
	if st.Err() == nil {
		t.Fatal("zero StageState reports running")
	}
}
