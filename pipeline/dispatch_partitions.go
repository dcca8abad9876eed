package pipeline

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
)

// partState is one owned partition. Its tracker and out are owned by the
// poll loop; queues by mu; wg counts the goroutines working for it.
type partState struct {
	id     int32
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	tracker *offsetTracker
	skip    skipSet
	out     []outRecord // follow-up records awaiting a committed transaction
	paused  bool

	mu      sync.Mutex
	queues  map[string]*endpointQueue
	backlog int
}

// item is one delivery held by the dispatcher. key and value are copies:
// a record's slices point into its whole fetch batch, which a held item would
// otherwise keep alive (memory that grew with the backlog, not with the
// caps).
type item struct {
	off      int64
	key      []byte
	value    []byte // the exact webhook body
	meta     delivery.Meta
	queuedAt time.Time
	size     int64 // itemSize: what it counts against DispatcherOptions.MemoryBudget
}

// assigned runs in the client's group goroutine when partitions are added.
// It reads the committed offsets with their metadata so deliveries that the
// previous owner finished above its committed offset are not sent again.
// A partition it still holds is revoked first (see revoked).
func (d *Dispatcher) assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	// The group is joined, even when it gave this member nothing (more
	// members than partitions).
	defer d.markJoined()
	ps := assigned[d.o.Topics.Deliveries]
	if len(ps) == 0 {
		return
	}
	// A partition still held (lost without a callback reaching us, then
	// assigned again) is revoked first: its pumps and attempts stop, its
	// outcome rows are kept, and no two states of one partition run.
	d.mu.Lock()
	var held []int32
	for _, id := range ps {
		if d.parts[id] != nil {
			held = append(held, id)
		}
	}
	d.mu.Unlock()
	if len(held) > 0 {
		d.o.Logger.Warn("dispatch: partitions assigned again while still held; revoking the old state first", "partitions", held)
		d.revoked(ctx, cl, map[string][]int32{d.o.Topics.Deliveries: held})
	}
	skips := d.fetchSkips(ctx, cl, ps)
	d.mu.Lock()
	for _, id := range ps {
		pctx, cancel := context.WithCancel(context.Background())
		p := &partState{id: id, ctx: pctx, cancel: cancel, queues: make(map[string]*endpointQueue)}
		if s, ok := skips[id]; ok {
			p.tracker = newOffsetTracker(s.commit)
			p.tracker.inherit(s.ranges) // listed until fetched and skipped
			p.skip = skipSet{ranges: s.ranges}
		} else {
			p.tracker = newOffsetTracker(-1)
		}
		d.parts[id] = p
		delete(d.lastCommit, id)
	}
	d.mu.Unlock()
	d.o.Logger.Info("dispatch: partitions assigned", "partitions", ps)
}

type committedSkips struct {
	commit int64
	ranges []offsetRange
}

// fetchSkips reads the group's committed offsets and metadata for ps,
// waiting out pending transactional commits (RequireStable). A failure only
// costs duplicates, never loss, so it is logged and tolerated.
func (d *Dispatcher) fetchSkips(ctx context.Context, cl *kgo.Client, ps []int32) map[int32]committedSkips {
	out := make(map[int32]committedSkips, len(ps))
	for try := 0; try < 20; try++ {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = d.o.Group
		req.RequireStable = true
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic = d.o.Topics.Deliveries
		t.Partitions = ps
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		unstable := false
		if err == nil {
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if perr := kerr.ErrorForCode(rp.ErrorCode); perr != nil {
						if errors.Is(perr, kerr.UnstableOffsetCommit) {
							unstable = true
						}
						continue
					}
					if rp.Offset < 0 {
						continue
					}
					s := committedSkips{commit: rp.Offset}
					if rp.Metadata != nil {
						r, derr := decodeDoneAbove(rp.Offset, *rp.Metadata)
						if derr != nil {
							d.o.Logger.Warn("dispatch: ignoring commit metadata", "partition", rp.Partition, "err", derr)
						}
						s.ranges = r
					}
					out[rp.Partition] = s
				}
			}
		}
		if err == nil && !unstable {
			return out
		}
		if err != nil && !errors.Is(err, kerr.UnstableOffsetCommit) && !kerr.IsRetriable(err) {
			d.o.Logger.Warn("dispatch: reading commit metadata failed; finished deliveries above the commit may be sent again", "err", err)
			return out
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(100 * time.Millisecond):
		}
	}
	return out
}

// revoked runs in the client's group goroutine before partitions are taken
// away. In-flight attempts of those partitions are cancelled and awaited, so
// no delivery is ever sent by two consumers at once; their results are not
// committed, so the next owner sends them again (same webhook-id, same body).
// The outcome rows of attempts that finished but are not committed yet (in
// p.out after an abort, or waiting for room in the commit metadata) move to
// d.loose, so they still commit (as gather does for completions of revoked
// partitions): the attempt happened. p.out never holds a committed record,
// so none is written twice. Its other follow-ups (tier, DLQ) are dropped:
// the next owner redoes those deliveries.
func (d *Dispatcher) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	ps := revoked[d.o.Topics.Deliveries]
	var gone []*partState
	d.mu.Lock()
	for _, id := range ps {
		if p := d.parts[id]; p != nil {
			gone = append(gone, p)
			delete(d.parts, id)
		}
		delete(d.lastCommit, id)
	}
	d.mu.Unlock()
	for _, p := range gone {
		p.cancel()
		p.mu.Lock()
		for _, q := range p.queues {
			q.closeQueue()
			q.forget()
		}
		n := p.backlog
		p.backlog = 0
		p.mu.Unlock()
		d.m.backlog.Add(context.Background(), -int64(n))
	}
	for _, p := range gone {
		p.wg.Wait()
	}
	d.keepAttemptRows(gone)
	if len(gone) > 0 {
		d.o.Logger.Info("dispatch: partitions revoked", "partitions", ps)
	}
}

// keepAttemptRows moves the attempt rows of gone's follow-ups (p.out) to
// d.loose and clears p.out. It runs where p.out may be touched: in revoked,
// which runs only while the poll loop polls (or from the poll loop itself).
func (d *Dispatcher) keepAttemptRows(gone []*partState) {
	var rows []*kgo.Record
	for _, p := range gone {
		for _, o := range p.out {
			if o.rec.Topic == d.o.Topics.Attempts {
				rows = append(rows, o.rec)
			}
		}
		p.out = nil
	}
	if len(rows) == 0 {
		return
	}
	d.doneMu.Lock()
	d.loose = append(d.loose, rows...)
	d.doneMu.Unlock()
}
