package api

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestScanIncompleteIsAnError: a scan that cannot reach the end offsets it
// was given (no record comes for scanIdle) fails with a
// *ReadIncompleteError naming the partition, the offset reached and the end,
// instead of returning the part it read as if it were all (F6: queued and
// candidates were silently incomplete).
func TestScanIncompleteIsAnError(t *testing.T) {
	s, _ := kfakeResender(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard
	defer cancel()
	for i := 0; i < 3; i++ {
		if err := s.cl.ProduceSync(ctx, &kgo.Record{Topic: "t.x", Partition: 0, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	defer func(d time.Duration) { scanIdle = d }(scanIdle)
	scanIdle = 500 * time.Millisecond
	n := 0
	err := s.scan(ctx, "t.x", map[int32]span{0: {0, 3}}, func(*kgo.Record) bool { n++; return true })
	if err != nil || n != 3 {
		t.Fatalf("complete scan: %d records, %v; want 3, nil", n, err)
	}
	n = 0
	err = s.scan(ctx, "t.x", map[int32]span{0: {0, 10}}, func(*kgo.Record) bool { n++; return true })
	var ie *ReadIncompleteError
	if !errors.As(err, &ie) || ie.Partition != 0 || ie.Offset != 3 || ie.End != 10 || n != 3 {
		t.Fatalf("scan past the end: %d records, %v; want 3 and a ReadIncompleteError at offset 3 of end 10", n, err)
	}
	if want := "read t.x incomplete: partition 0 at offset 3 of end 10"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
}

// TestScanLeavesClientOptsUnwritten: the Resender's clients are built from
// a new slice, never by appending to ClientOpts, which the process shares
// between every concurrent scan: options with spare capacity (as an
// append elsewhere leaves them) kept their spare slots empty, where two
// scans at once would otherwise write their topics and offsets into the
// same array (a data race, and one request reading another's records).
func TestScanLeavesClientOptsUnwritten(t *testing.T) {
	// Spare capacity, as append(Clip(x), y) leaves.
	s, opts := kfakeResender(t, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard
	defer cancel()
	if err := s.cl.ProduceSync(ctx, &kgo.Record{Topic: "t.x", Partition: 0, Value: []byte{1}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := s.scan(ctx, "t.x", map[int32]span{0: {0, 1}}, func(*kgo.Record) bool { return true }); err != nil {
		t.Fatal(err)
	}
	for i, o := range opts[:cap(opts)][1:] {
		if o != nil {
			t.Errorf("ClientOpts' spare slot %d was written (%T): a client was built by appending to the shared options", i+1, o)
		}
	}
}

// kfakeResender is a Resender on a one-broker kfake cluster with topic
// "t.x", and its ClientOpts: the seed brokers, with spare more slots of
// capacity. Both are closed when t ends.
func kfakeResender(t *testing.T, spare int) (*Resender, []kgo.Opt) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t.x"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	opts := make([]kgo.Opt, 1, 1+spare)
	opts[0] = kgo.SeedBrokers(c.ListenAddrs()...)
	s, err := NewResender(ResenderOptions{ClientOpts: opts, DLQ: "t.dlq", Deliveries: "t.deliveries"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, opts
}
