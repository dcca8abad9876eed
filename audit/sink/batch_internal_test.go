package sink

import (
	"testing"

	"github.com/hookrelay/hookrelay/audit"
)

// TestBatchPollMax: a poll asks for what BatchRows leaves, and once a
// batch's mean record size is known, for no more than the bytes BatchBytes
// leaves hold (at least one record); reset keeps the mean, frees a large
// array that a small batch used, and lastPerAttempt leaves no stale row
// behind the batch's rows.
func TestBatchPollMax(t *testing.T) {
	o := Options{BatchRows: 50000, BatchBytes: 1 << 20}
	b := &batch{}
	if n := b.pollMax(o); n != 50000 {
		t.Errorf("first poll: %d, want BatchRows", n)
	}
	b.records, b.bytes = 100, 100*1024
	b.reset()
	if b.rowBytes != 1024 {
		t.Fatalf("rowBytes %d after a batch of 1 KiB records, want 1024", b.rowBytes)
	}
	if n := b.pollMax(o); n != 1025 {
		t.Errorf("empty batch, 1 MiB left at 1 KiB each: %d, want 1025", n)
	}
	b.records, b.bytes = 1000, 1000*1024
	if n := b.pollMax(o); n != 25 {
		t.Errorf("24 KiB left: %d, want 25", n)
	}
	b.bytes = 2 << 20
	if n := b.pollMax(o); n != 1 {
		t.Errorf("past BatchBytes: %d, want 1", n)
	}

	b.attempts = make([]audit.Attempt, 10, 50000)
	b.reset()
	if cap(b.attempts) != 0 {
		t.Errorf("after a batch of 10, the array of 50,000 is kept (cap %d)", cap(b.attempts))
	}

	rows := []audit.Attempt{{AttemptID: "a"}, {AttemptID: "b"}, {AttemptID: "a", Outcome: audit.Delivered}}
	got := lastPerAttempt(rows)
	if len(got) != 2 || got[0].AttemptID != "b" || got[1].Outcome != audit.Delivered || &got[0] != &rows[0] {
		t.Errorf("lastPerAttempt = %+v, want b then the last a, at the array's front", got)
	}
	if rows[2] != (audit.Attempt{}) {
		t.Errorf("the stale row behind the kept ones is not cleared: %+v", rows[2])
	}
}
