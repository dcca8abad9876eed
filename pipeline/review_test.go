package pipeline

// Review tests: each one fails on a defect found in the review of the
// dispatcher and fan-out (see the review report), or pins behaviour the
// report asks to keep. They run against kfake or no Kafka at all.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/ratelimit"
	"github.com/hookrelay/hookrelay/retrytiers"
)

// funcAttempter adapts a function to Attempter.
type funcAttempter func(ctx context.Context, ep *endpoints.Endpoint, m *delivery.Meta, now time.Time) AttemptResult

func (f funcAttempter) Attempt(ctx context.Context, ep *endpoints.Endpoint, _ []byte, m *delivery.Meta, now time.Time) AttemptResult {
	return f(ctx, ep, m, now)
}

// reviewCluster starts kfake with every topic of prefix (partitions each)
// and returns it with the topics and the default-schedule policy.
func reviewCluster(t *testing.T, prefix string, partitions int32) (*kfake.Cluster, kgo.Opt, Topics, *RetryPolicy) {
	t.Helper()
	topics := NewTopics(prefix)
	policy, err := NewRetryPolicy(retrytiers.DefaultSchedule(), topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	all := append([]string{topics.Events, topics.Invalid, topics.Deliveries, topics.DLQ, topics.Attempts, topics.EndpointStatus, topics.Operational}, policy.Tiers().Topics()...)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, all...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, kgo.SeedBrokers(c.ListenAddrs()...), topics, policy
}

// startDispatcher runs a dispatcher until the returned stop is called (or
// its client is closed). stop returns Run's error.
func startDispatcher(t *testing.T, o DispatcherOptions) (*Dispatcher, func() error) {
	t.Helper()
	if o.FlushInterval == 0 {
		o.FlushInterval = 20 * time.Millisecond
	}
	if o.Attempts == nil {
		o.Attempts = &memAttempts{}
	}
	d, err := NewDispatcher(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return d, stop
}

func deliveryRec(topic, ep, id string) *kgo.Record {
	m := delivery.Meta{DeliveryID: id, WebhookID: "msg_" + id, EndpointID: ep, Attempt: 1}
	return &kgo.Record{Topic: topic, Partition: 0, Key: []byte(ep), Value: []byte(`{}`), Headers: m.Headers()}
}

// committedAt returns the group's committed offset and metadata of
// topic/0, or -1.
func committedAt(adm *kadm.Client, group, topic string) (int64, string) {
	os, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		return -1, ""
	}
	o, ok := os.Lookup(topic, 0)
	if !ok {
		return -1, ""
	}
	return o.At, o.Metadata
}

// eventually polls cond until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not synchronising
	}
	return true
}

// TestReviewTruncatedCommitMetadataForksFollowUps: finished offsets above
// the committed one are listed in the commit metadata only up to 3 KiB. A
// delivery whose offset does not fit must not have its follow-up (tier)
// record committed: the next owner would attempt it again and park a second
// tier record, two live copies of one delivery (a fork). The dispatcher
// holds such follow-ups back until a commit covers them, and an offset
// once listed stays listed: when lower deliveries finish late, they take
// no room from listed ones whose tier records are already live (else
// those fork; this test failed about 1 run in 5 on a loaded machine, where
// completions reach a flush out of order, and at once with the late ones).
//
// Layout: a hung endpoint and a failing one alternate on one partition, so
// every failed delivery is its own run in the metadata (about 1150 fit).
// The lowest 40 failing deliveries finish only after the first owner has
// committed the tier records its metadata covers.
func TestReviewTruncatedCommitMetadataForksFollowUps(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "rf.", 1)
	const pairs = 1400
	eps := fakeEndpoints{"hung": testEndpoint("hung", 1), "flaky": testEndpoint("flaky", 1000)}
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var recs []*kgo.Record
	for i := 0; i < pairs; i++ {
		recs = append(recs, deliveryRec(topics.Deliveries, "hung", fmt.Sprint("h", i)), deliveryRec(topics.Deliveries, "flaky", fmt.Sprint("f", i)))
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	const late = 40
	isLate := func(m *delivery.Meta) bool {
		var i int
		_, err := fmt.Sscanf(m.DeliveryID, "f%d", &i)
		return err == nil && i < late
	}
	gate := make(chan struct{})
	var lateEnded atomic.Int32 // late attempts that returned their result
	fail503 := func(now time.Time) AttemptResult {
		return AttemptResult{StartedAt: now, StatusCode: 503, Outcome: audit.RetryScheduled, ErrorClass: "http_503"}
	}
	opts := func(att Attempter) DispatcherOptions {
		return DispatcherOptions{
			Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
			Topics: topics, Group: "rf.dispatch", TransactionalID: "rf.dispatch-test",
			Endpoints: eps, Attempter: att, Policy: policy,
			EndpointBacklog: 10 * pairs, PartitionBacklog: 100 * pairs, MaxQueueWait: time.Hour,
		}
	}
	o1 := opts(funcAttempter(func(ctx context.Context, ep *endpoints.Endpoint, m *delivery.Meta, now time.Time) AttemptResult {
		if ep.ID == "hung" || isLate(m) {
			select {
			case <-ctx.Done():
				return AttemptResult{StartedAt: now, Outcome: audit.RetryScheduled, ErrorClass: "canceled"}
			case <-gate:
				if ep.ID == "hung" {
					<-ctx.Done()
					return AttemptResult{StartedAt: now, Outcome: audit.RetryScheduled, ErrorClass: "canceled"}
				}
				defer lateEnded.Add(1)
			}
		}
		return fail503(now)
	}))
	d1, _ := startDispatcher(t, o1)

	// Count live (committed) tier records per delivery.
	tier := policy.Tiers().Topics()[0]
	rd, err := kgo.NewClient(seeds, kgo.ConsumeTopics(tier), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	live := map[string]int{}
	total := 0
	poll := func(wait time.Duration) int {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		n := 0
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			m, err := delivery.ParseMeta(r.Headers)
			if err != nil {
				t.Errorf("tier record: %v", err)
				return
			}
			live[m.DeliveryID]++
			total++
			n++
		})
		return n
	}
	// The first owner commits the tier records its metadata covers (about
	// 1150 fit), and holds the rest back.
	if !eventually(30*time.Second, func() bool { poll(200 * time.Millisecond); return total >= 1000 }) {
		t.Fatalf("first dispatcher committed %d tier records; want the ~1150 its metadata covers", total)
	}
	for poll(time.Second) > 0 {
	}
	if total >= pairs {
		t.Fatalf("first dispatcher committed all %d tier records although its metadata cannot list them all", total)
	}
	adm := kadm.NewClient(prod)
	at, meta := committedAt(adm, "rf.dispatch", topics.Deliveries)
	ranges, err := decodeDoneAbove(at, meta)
	if err != nil {
		t.Fatal(err)
	}
	covered := 0
	for _, r := range ranges {
		covered += int(r.to - r.from)
	}
	t.Logf("commit %d; metadata %d bytes lists %d of %d finished deliveries", at, len(meta), covered, pairs)

	// The lowest failing deliveries finish now; wait until the poll loop
	// has taken their results (each completion is queued right after its
	// attempt returns: require an empty queue three polls in a row).
	close(gate)
	empty := 0
	if !eventually(30*time.Second, func() bool {
		d1.doneMu.Lock()
		n := len(d1.done)
		d1.doneMu.Unlock()
		if lateEnded.Load() == late && n == 0 {
			empty++
		} else {
			empty = 0
		}
		return empty >= 3
	}) {
		t.Fatal("the late deliveries did not finish")
	}

	// Crash the first owner (it leaves once the flush that took them has
	// ended: nothing commits after it); a second one takes over and finishes.
	runningClient(t, d1).Close()
	_, stop2 := startDispatcher(t, opts(funcAttempter(func(_ context.Context, ep *endpoints.Endpoint, _ *delivery.Meta, now time.Time) AttemptResult {
		if ep.ID == "hung" {
			return AttemptResult{StartedAt: now, StatusCode: 200, Outcome: audit.Delivered}
		}
		return fail503(now)
	})))
	if !eventually(30*time.Second, func() bool { at, _ := committedAt(adm, "rf.dispatch", topics.Deliveries); return at == 2*pairs }) {
		t.Fatal("second dispatcher did not commit to the end")
	}
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	for poll(2*time.Second) > 0 {
	}
	forked := 0
	for id, n := range live {
		if n > 1 {
			forked++
			if forked <= 3 {
				t.Errorf("delivery %s has %d live tier records; want 1", id, n)
			}
		}
	}
	if forked > 0 {
		t.Errorf("%d of %d deliveries forked: their tier record was committed while their offset was neither committed nor in the (truncated) commit metadata", forked, pairs)
	}
	if len(live) != pairs {
		t.Errorf("%d of %d failing deliveries have a live tier record; want all (none lost)", len(live), pairs)
	}
}

// TestReviewAbortWhilePausedStallsPartition: a partition (paused or not)
// is rewound by an aborted transaction; franz-go proposes nothing for it
// until it re-fetches, and a paused partition never re-fetches, so the
// dispatcher resumes every partition after an abort. Whatever the pause
// state, the partition must commit to the end after the abort.
func TestReviewAbortWhilePausedStallsPartition(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "rs.", 1)
	// Abort the first transaction that commits offsets, as a rebalance
	// would (REBALANCE_IN_PROGRESS is abortable).
	var injected atomic.Bool
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.TxnOffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.RebalanceInProgress.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		injected.Store(true)
		return resp, nil, true
	})
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var recs []*kgo.Record
	for i := 0; i < 5; i++ {
		recs = append(recs, deliveryRec(topics.Deliveries, "hung", fmt.Sprint("h", i)))
	}
	recs = append(recs, deliveryRec(topics.Deliveries, "fast", "f0"))
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil { // one batch: one fetch
		t.Fatal(err)
	}

	release := make(chan struct{})
	d, _ := startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "rs.dispatch", TransactionalID: "rs.dispatch-test",
		Endpoints: fakeEndpoints{"hung": testEndpoint("hung", 1), "fast": testEndpoint("fast", 4)},
		Attempter: funcAttempter(func(ctx context.Context, ep *endpoints.Endpoint, _ *delivery.Meta, now time.Time) AttemptResult {
			if ep.ID == "hung" {
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return AttemptResult{StartedAt: now, StatusCode: 200, Outcome: audit.Delivered}
		}),
		Policy:           policy,
		PartitionBacklog: 3,
	})
	paused := func() bool { return len(runningClient(t, d).PauseFetchPartitions(nil)[topics.Deliveries]) == 1 }
	if !eventually(20*time.Second, injected.Load) {
		close(release)
		t.Fatal("no transaction was aborted")
	}
	close(release) // the backlog drains to zero

	adm := kadm.NewClient(prod)
	if !eventually(10*time.Second, func() bool { at, _ := committedAt(adm, "rs.dispatch", topics.Deliveries); return at == 6 }) {
		at, _ := committedAt(adm, "rs.dispatch", topics.Deliveries)
		t.Fatalf("partition stalled after an abort while paused: committed offset %d, want 6; still paused: %v", at, paused())
	}
}

// TestReviewBurstParksHealthyEndpointForHours: the park delay doubles per
// delivery parked since the endpoint's queue last drained, so one burst past
// EndpointBacklog parks the tenth and later deliveries for the longest tier
// (6 h) although the endpoint is healthy and drains its queue in
// milliseconds. The back-off belongs to a delivery parked again and again
// (Meta.Parks) or to the endpoint's expected drain time, not to the burst
// size.
func TestReviewBurstParksHealthyEndpointForHours(t *testing.T) {
	policy, err := NewRetryPolicy(retrytiers.DefaultSchedule(), NewTopics("p."), 0)
	if err != nil {
		t.Fatal(err)
	}
	d := &Dispatcher{o: DispatcherOptions{EndpointBacklog: 2, PartitionBacklog: 100, Policy: policy}, m: newMetrics(nil)}
	lim, err := ratelimit.New(ratelimit.Limit{RatePerSec: 1000, MaxInFlight: 4})
	if err != nil {
		t.Fatal(err)
	}
	q := newEndpointQueue("ep", lim, new(atomic.Int64))
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := 0; i < 2; i++ {
		q.push(&item{off: int64(i), meta: delivery.Meta{DeliveryID: fmt.Sprint(i), EndpointID: "ep"}}, now)
	}
	var worst time.Duration
	for i := 2; i < 22; i++ { // a burst of 20 more, each parked for the first time
		it := &item{off: int64(i), key: []byte("ep"), value: []byte(`{}`),
			meta: delivery.Meta{DeliveryID: fmt.Sprint(i), WebhookID: "msg", EndpointID: "ep", Attempt: 1}}
		reason, _ := d.parkReason(&partState{}, q, it, now)
		if reason != "backlog" {
			t.Fatalf("delivery %d: park reason %q; want backlog", i, reason)
		}
		var rec *kgo.Record
		d.parkBusy(&partState{}, it, q, q.len(), reason, now, func(_ *partState, _ int64, out []*kgo.Record) { rec = out[0] })
		got, err := delivery.ParseMeta(rec.Headers)
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, got.DueAt.Sub(now))
	}
	if worst > 10*time.Minute {
		t.Errorf("a delivery parked for the first time, from a burst to a healthy endpoint, waits %v; want minutes at most", worst)
	}
}

// TestReviewRetryAfterPauseIsCapped: a Retry-After is capped at the longest
// tier for the next attempt (NextAttemptAt), but the endpoint pause it
// causes is not: Decide copies PauseUntil into the record's headers
// uncapped (and the dispatcher pauses its limiter with it), so one
// "Retry-After: 99999999" hides every delivery of the endpoint for years,
// far past the queue TTL, across restarts.
func TestReviewRetryAfterPauseIsCapped(t *testing.T) {
	policy, err := NewRetryPolicy(retrytiers.DefaultSchedule(), NewTopics("p."), 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	huge := 1000 * time.Hour
	res := &AttemptResult{StartedAt: now, StatusCode: 429, Outcome: audit.RetryScheduled, ErrorClass: "http_429",
		RetryAfter: huge, PauseUntil: now.Add(huge)}
	dec := policy.Decide(delivery.Meta{DeliveryID: "d", WebhookID: "w", EndpointID: "ep", Attempt: 1}, res, now, 0)
	longest := policy.Tiers().Largest()
	if got := dec.NextAttemptAt.Sub(now); got > longest {
		t.Errorf("next attempt in %v; want at most the longest tier %v", got, longest)
	}
	if got := dec.Meta.PauseUntil.Sub(now); got > longest {
		t.Errorf("endpoint pause carried in the record: %v; want at most the longest tier %v", got, longest)
	}
	parked := policy.Park(delivery.Meta{DeliveryID: "e", WebhookID: "w", EndpointID: "ep", Attempt: 1}, []byte("ep"), []byte(`{}`), now.Add(huge), now)
	pm, err := delivery.ParseMeta(parked.Headers)
	if err != nil {
		t.Fatal(err)
	}
	if got := pm.DueAt.Sub(now); got > longest {
		t.Errorf("delivery parked behind the pause is due in %v; want at most the longest tier %v", got, longest)
	}
}

// TestReviewJoinedWithoutPartitions: Joined (and so /readyz) closes only
// once a dispatcher is assigned at least one deliveries partition. A member
// of the group that owns none (more instances than partitions, or a
// cooperative rebalance that gives it nothing yet) is never ready.
func TestReviewJoinedWithoutPartitions(t *testing.T) {
	c, _, topics, policy := reviewCluster(t, "rj.", 1)
	opts := func(txn string) DispatcherOptions {
		return DispatcherOptions{
			Brokers: c.ListenAddrs(), Topics: topics, Group: "rj.dispatch", TransactionalID: txn,
			Endpoints: fakeEndpoints{}, Attempter: newFakeAttempter(), Policy: policy,
		}
	}
	d1, _ := startDispatcher(t, opts("rj.dispatch-1"))
	select {
	case <-d1.Joined():
	case <-time.After(30 * time.Second):
		t.Fatal("first dispatcher never joined")
	}
	d2, _ := startDispatcher(t, opts("rj.dispatch-2"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.WaitGroupStable(ctx, "rj.dispatch", 2); err != nil {
		t.Fatalf("group never stable with two members: %v", err)
	}
	select {
	case <-d2.Joined():
	case <-time.After(30 * time.Second): // a hang guard
		t.Error("a dispatcher that joined the group but owns no partition never reports Joined: /readyz stays 503")
	}
}

// TestReviewRevokedAttemptKeepsItsRow pins that an attempt cut short by
// revocation still gets its attempt row: it made a real request (the
// receiver may have seen and processed it). docs/ARCHITECTURE.md: "a real
// request always has its row"; issue 3: one row per request the receivers
// saw. (It failed when the review began; dispatch_endpoint.go now records
// the row.) Since issue 8 item 5 every request has its Sending row before it
// leaves; here the client is closed under the dispatcher (like a crash), so
// the outcome rows never commit and the audit sink resolves the Sending
// rows as interrupted (audit/sink tests).
func TestReviewRevokedAttemptKeepsItsRow(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "rr.", 1)
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(context.Background(), deliveryRec(topics.Deliveries, "hung", "h0"), deliveryRec(topics.Deliveries, "hung", "h1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32
	rows := &memAttempts{}
	d, _ := startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "rr.dispatch", TransactionalID: "rr.dispatch-test",
		Endpoints: fakeEndpoints{"hung": testEndpoint("hung", 2)},
		Attempter: funcAttempter(func(ctx context.Context, _ *endpoints.Endpoint, _ *delivery.Meta, now time.Time) AttemptResult {
			sent.Add(1) // the request is on the wire
			<-ctx.Done()
			return AttemptResult{StartedAt: now, Latency: time.Since(now), Outcome: audit.RetryScheduled,
				ErrorClass: "timeout", ErrorMessage: ctx.Err().Error()}
		}),
		Attempts: rows, Policy: policy,
	})
	waitFor(t, "two requests in flight", func() bool { return sent.Load() == 2 })
	runningClient(t, d).Close() // leaving the group revokes the partition
	if !eventually(30*time.Second, func() bool { rows.mu.Lock(); defer rows.mu.Unlock(); return len(rows.rows) == 2 }) {
		rows.mu.Lock()
		n := len(rows.rows)
		rows.mu.Unlock()
		t.Errorf("%d requests were made and cancelled by the revoke; %d sending rows recorded; want one per request", sent.Load(), n)
	}
}

// TestReviewFanoutLosesRecordItCannotProduce: fan-out only logs a failed
// produce and commits the transaction anyway. franz-go fails a record that
// cannot fit a batch (kerr.MessageTooLarge, client side) without failing the
// producer ID, so the transaction commits the event's offset without the
// record. Here an event of ~1 MB (accepted by the broker, whose default
// limit is 1 MiB) is over the 256 KiB event limit; its events.invalid copy
// (value plus reason headers) is over the producer's 1,000,012-byte batch
// limit and silently vanishes.
func TestReviewFanoutLosesRecordItCannotProduce(t *testing.T) {
	c, seeds, topics, _ := reviewCluster(t, "fl.", 1)
	f, err := NewFanout(FanoutOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "fl.fanout", TransactionalID: "fl.fanout-test", Endpoints: fakeMatcher{},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() { cancel(); <-done }()

	up, err := kgo.NewClient(seeds, kgo.ProducerBatchMaxBytes(2<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	big := &kgo.Record{Topic: topics.Events, Partition: 0, Value: []byte(strings.Repeat("x", 1_000_000)),
		Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}}
	if err := up.ProduceSync(context.Background(), big).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(up)
	waitFor(t, "fan-out commits the event", func() bool { at, _ := committedAt(adm, "fl.fanout", topics.Events); return at == 1 })

	rd, err := kgo.NewClient(seeds, kgo.ConsumeTopics(topics.Invalid), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	n := 0
	eventually(30*time.Second, func() bool { // a hang guard
		pctx, pcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer pcancel()
		n += rd.PollFetches(pctx).NumRecords()
		return n > 0
	})
	if n != 1 {
		t.Errorf("events.invalid holds %d records after fan-out committed the oversized event; want 1 (the event is lost)", n)
	}
}

// TestReviewHungEndpointsStarveHealthyOneByPausingPartition: a few hung
// endpoints, each within its own EndpointBacklog, fill the partition's
// backlog (PartitionBacklog). Pausing the partition then would stop every
// healthy endpoint on it (head-of-line blocking), so past the cap the
// deliveries of endpoints that already have some queued are parked instead,
// and a healthy endpoint's delivery is still sent at once.
func TestReviewHungEndpointsStarveHealthyOneByPausingPartition(t *testing.T) {
	c, seeds, topics, policy := reviewCluster(t, "rh.", 1)
	eps := fakeEndpoints{"fast": testEndpoint("fast", 4)}
	var recs []*kgo.Record
	for _, h := range []string{"ha", "hb", "hc", "hd"} {
		eps[h] = testEndpoint(h, 1)
		for i := 0; i < 4; i++ {
			recs = append(recs, deliveryRec(topics.Deliveries, h, fmt.Sprint(h, i)))
		}
	}
	prod, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var fastSent atomic.Bool
	var hung, hungEnded atomic.Int32
	var hungEndedAtFast atomic.Int32 // hung attempts that had ended when the fast delivery was sent
	quit := make(chan struct{})      // lets the hung attempts end at cleanup (shutdown waits for them)
	_, _ = startDispatcher(t, DispatcherOptions{
		Brokers: c.ListenAddrs(), KafkaOptions: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Topics: topics, Group: "rh.dispatch", TransactionalID: "rh.dispatch-test",
		Endpoints: eps,
		Attempter: funcAttempter(func(ctx context.Context, ep *endpoints.Endpoint, _ *delivery.Meta, now time.Time) AttemptResult {
			if ep.ID != "fast" {
				hung.Add(1)
				select { // hung
				case <-ctx.Done():
				case <-quit:
				}
				hungEnded.Add(1)
				return AttemptResult{StartedAt: now, Outcome: audit.RetryScheduled, ErrorClass: "timeout"}
			}
			hungEndedAtFast.Store(hungEnded.Load())
			fastSent.Store(true)
			return AttemptResult{StartedAt: now, StatusCode: 200, Outcome: audit.Delivered}
		}),
		Policy:          policy,
		EndpointBacklog: 2, PartitionBacklog: 6, // the default ratio is 20 endpoints' worth; here 3
	})
	t.Cleanup(func() { close(quit) }) // runs before the dispatcher's stop
	waitFor(t, "every hung endpoint holding its one slot", func() bool { return hung.Load() == 4 })
	if err := prod.ProduceSync(context.Background(), deliveryRec(topics.Deliveries, "fast", "f0")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Isolation is an order, not a speed: the healthy delivery goes out
	// while every hung attempt still hangs (30 s is a hang guard).
	if !eventually(30*time.Second, fastSent.Load) {
		t.Fatal("a healthy endpoint's delivery was not sent in 30 s: four hung endpoints keep its partition paused")
	}
	if n := hungEndedAtFast.Load(); n != 0 {
		t.Errorf("the healthy endpoint's delivery was sent only after %d hung attempts ended: the hung endpoints held its partition", n)
	}
}
