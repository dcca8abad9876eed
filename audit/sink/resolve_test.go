package sink_test

// Resolution of Sending rows (issue 8 item 5, issue 10 item 4): the sink
// never stores a Sending row; it pairs it with its outcome, or writes an
// Interrupted row when a later row of the delivery arrives or the grace
// passes, and keeps its held rows across a restart.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/audittest"
	"github.com/hookrelay/hookrelay/audit/sink"
)

// noSendingStore is a Memory store that records an error if an insert
// carries a Sending row or two rows of one attempt.
type noSendingStore struct {
	*audit.Memory
	mu   sync.Mutex
	errs []string
}

func (s *noSendingStore) Insert(ctx context.Context, as []audit.Attempt) error {
	seen := map[string]bool{}
	s.mu.Lock()
	for _, a := range as {
		if a.Outcome == audit.Sending {
			s.errs = append(s.errs, "stored a sending row: "+a.AttemptID)
		}
		if seen[a.AttemptID] {
			s.errs = append(s.errs, "one insert holds two rows of "+a.AttemptID)
		}
		seen[a.AttemptID] = true
	}
	s.mu.Unlock()
	return s.Memory.Insert(ctx, as)
}

func (s *noSendingStore) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.errs {
		t.Error(e)
	}
}

// outcomes returns AttemptID -> outcome of ep's stored rows.
func outcomes(t *testing.T, s audit.Store, ep string) map[string]audit.Outcome {
	t.Helper()
	rows, err := s.Log(context.Background(), audit.Query{EndpointID: ep, Limit: audit.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]audit.Outcome{}
	for _, r := range rows {
		out[r.AttemptID] = r.Outcome
	}
	return out
}

// row is attempt id of delivery del at endpoint "ep" with outcome o.
func row(id, del string, o audit.Outcome) audit.Attempt {
	a := audittest.Attempt("ep", 1)
	a.AttemptID, a.DeliveryID, a.Outcome = id, del, o
	a.AttemptedAt = time.Now().UTC().Truncate(time.Millisecond)
	return a
}

func waitOutcomes(t *testing.T, s audit.Store, want map[string]audit.Outcome) {
	t.Helper()
	var got map[string]audit.Outcome
	eventually(t, 20*time.Second, fmt.Sprintf("stored outcomes %v", want), func() bool {
		got = outcomes(t, s, "ep")
		for id, o := range want {
			if got[id] != o {
				return false
			}
		}
		return true
	})
	for id, o := range got {
		if o == audit.Sending {
			t.Errorf("attempt %s stored as sending", id)
		}
	}
}

func TestSinkResolvesSendingRows(t *testing.T) {
	brokers := newFakeCluster(t)
	store := &noSendingStore{Memory: audit.NewMemory()}
	startSink(t, sink.Options{Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: store,
		InterruptGrace: 500 * time.Millisecond})

	produce(t, brokers, []audit.Attempt{
		// a1: its outcome follows (same batch or not): stored once, as the outcome.
		row("a1", "d1", audit.Sending), row("a1", "d1", audit.RetryScheduled),
		// a2: the process died; the next owner's attempt a3 of d1 resolves it.
		row("a2", "d1", audit.Sending), row("a3", "d1", audit.Sending), row("a3", "d1", audit.Delivered),
		// a4: no outcome, no later row: the grace resolves it.
		row("a4", "d2", audit.Sending),
		// a5 is resolved by a later decision without a request.
		row("a5", "d3", audit.Sending), row("a6", "d3", audit.Abandoned),
	})
	waitOutcomes(t, store, map[string]audit.Outcome{
		"a1": audit.RetryScheduled, "a2": audit.Interrupted, "a3": audit.Delivered,
		"a4": audit.Interrupted, "a5": audit.Interrupted, "a6": audit.Abandoned,
	})
	// a4's real outcome arrives after all: it replaces Interrupted.
	produce(t, brokers, []audit.Attempt{row("a4", "d2", audit.Failed)})
	waitOutcomes(t, store, map[string]audit.Outcome{"a4": audit.Failed})
	rows, err := store.Log(context.Background(), audit.Query{EndpointID: "ep", Limit: audit.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Outcome == audit.Interrupted && (r.ErrorClass != "interrupted" || r.ErrorMessage == "") {
			t.Errorf("interrupted row %s: error_class %q, message %q", r.AttemptID, r.ErrorClass, r.ErrorMessage)
		}
	}
	store.check(t)
}

// TestSinkKeepsSendingRowsAcrossRestart: a Sending row still unresolved
// when the sink stops holds its partition's commit back, so the next sink
// rebuilds it and resolves it from what follows.
func TestSinkKeepsSendingRowsAcrossRestart(t *testing.T) {
	brokers := newFakeCluster(t)
	store := &noSendingStore{Memory: audit.NewMemory()}
	opts := sink.Options{Brokers: brokers, Topic: sinkTopic, Group: sinkGroup, Store: store, InterruptGrace: time.Hour}

	var first []audit.Attempt
	first = append(first, row("s1", "d1", audit.Sending))
	for i := range 10 {
		first = append(first, row(fmt.Sprint("o", i), fmt.Sprint("other", i), audit.Delivered))
	}
	produce(t, brokers, first)
	stop := startSink(t, opts)
	want := map[string]audit.Outcome{}
	for i := range 10 {
		want[fmt.Sprint("o", i)] = audit.Delivered
	}
	waitOutcomes(t, store, want)
	// Give the sink time to commit what it would (it must not pass s1).
	time.Sleep(300 * time.Millisecond) // lets a wrong commit happen; the assertion is on its value
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c := committed(t, brokers); c != 0 {
		t.Errorf("committed offsets sum to %d with s1 (offset 0) unresolved, want 0", c)
	}
	if _, ok := outcomes(t, store, "ep")["s1"]; ok {
		t.Errorf("s1 stored before it was resolved")
	}

	startSink(t, opts)
	// The next owner of d1 attempts it again: s1 was cut short.
	produce(t, brokers, []audit.Attempt{row("s2", "d1", audit.Sending), row("s2", "d1", audit.Delivered)})
	waitOutcomes(t, store, map[string]audit.Outcome{"s1": audit.Interrupted, "s2": audit.Delivered})
	eventually(t, 20*time.Second, "every offset committed once s1 is resolved", func() bool { return committed(t, brokers) == 13 })
	store.check(t)
}
