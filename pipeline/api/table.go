package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// errTableStopped is returned by a table's waits once its Run has returned.
var errTableStopped = errors.New("api: table reader stopped")

// row is one live record of a compacted table.
type row struct {
	value []byte
	at    time.Time // the record's timestamp
}

// table is the in-memory state of one compacted topic (API keys,
// idempotency records): every key's latest value, read from the start of
// every partition and kept up to date while Run runs. Writes go through the
// same client and return once the reader has applied them (read your
// writes), so every replica converges on the topic's contents.
//
// Safe for concurrent use; Run must be running for put and the reads'
// readiness.
type table struct {
	topic string
	opts  []kgo.Opt
	log   *slog.Logger

	cl    *kgo.Client // set by Run before ready closes
	ready chan struct{}
	done  chan struct{}

	mu       sync.Mutex
	rows     map[string]row
	pos      map[int32]int64 // next offset to apply per partition
	progress chan struct{}   // closed and replaced when pos advances
}

func newTable(topic string, clientOpts []kgo.Opt, log *slog.Logger) *table {
	opts := append([]kgo.Opt{kgo.FetchMaxWait(time.Second)}, clientOpts...)
	opts = append(opts,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	return &table{topic: topic, opts: opts, log: log, ready: make(chan struct{}), done: make(chan struct{}),
		rows: map[string]row{}, pos: map[int32]int64{}, progress: make(chan struct{})}
}

// Run reads the topic until ctx ends. Ready closes once every record that
// was in the topic when Run started has been applied.
func (t *table) Run(ctx context.Context) error {
	defer close(t.done)
	cl, err := kgo.NewClient(t.opts...)
	if err != nil {
		return fmt.Errorf("api: table %s: %w", t.topic, err)
	}
	defer cl.Close()
	t.cl = cl
	// A topic created a moment ago may not be in the metadata yet: retry
	// every 100 ms, warning once a second.
	var ends kadm.ListedOffsets
	for i := 0; ; i++ {
		ends, err = kadm.NewClient(cl).ListEndOffsets(ctx, t.topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			break
		}
		if i%10 == 9 {
			t.log.Warn("api: list end offsets", "topic", t.topic, "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	caughtUp := func() bool {
		ok := true
		ends.Each(func(o kadm.ListedOffset) {
			if t.pos[o.Partition] < o.Offset {
				ok = false
			}
		})
		return ok
	}
	t.mu.Lock()
	if caughtUp() {
		close(t.ready)
	}
	t.mu.Unlock()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.log.Warn("api: fetch", "topic", topic, "partition", p, "err", err)
		})
		t.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			if r.Value == nil {
				delete(t.rows, string(r.Key))
			} else {
				t.rows[string(r.Key)] = row{value: r.Value, at: r.Timestamp}
			}
			t.pos[r.Partition] = r.Offset + 1
		})
		close(t.progress)
		t.progress = make(chan struct{})
		select {
		case <-t.ready:
		default:
			if caughtUp() {
				close(t.ready)
			}
		}
		t.mu.Unlock()
	}
}

func (t *table) waitReady(ctx context.Context) error {
	select {
	case <-t.ready:
		return nil
	case <-t.done:
		return errTableStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// get returns key's live row, after the table is ready.
func (t *table) get(ctx context.Context, key string) (row, bool, error) {
	if err := t.waitReady(ctx); err != nil {
		return row{}, false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.rows[key]
	return r, ok, nil
}

// all returns a copy of every live row, after the table is ready.
func (t *table) all(ctx context.Context) (map[string]row, error) {
	if err := t.waitReady(ctx); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]row, len(t.rows))
	for k, v := range t.rows {
		out[k] = v
	}
	return out, nil
}

// put writes key (nil value: a tombstone) with acks from all in-sync
// replicas and returns once the table has applied it.
func (t *table) put(ctx context.Context, key string, value []byte) error {
	if err := t.waitReady(ctx); err != nil {
		return err
	}
	r := &kgo.Record{Topic: t.topic, Key: []byte(key), Value: value}
	if err := t.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("api: write %s: %w", t.topic, err)
	}
	for {
		t.mu.Lock()
		applied, progress := t.pos[r.Partition] > r.Offset, t.progress
		t.mu.Unlock()
		if applied {
			return nil
		}
		select {
		case <-progress:
		case <-t.done:
			return errTableStopped
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
