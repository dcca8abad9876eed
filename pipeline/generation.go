package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A deliveries generation is one deliveries topic. An endpoint's partition
// is fixed by its key and the topic's partition count, so the count of a
// topic never changes; growing means a new generation: generation 1 is
// Topics.Deliveries, generation n > 1 is Topics.Deliveries + ".g<n>"
// ([GenerationTopic]), each with its own partition count, recorded in the
// compacted Topics.Generations topic (key "deliveries/<n>", value
// [Generation] JSON; generation 1 has no record).
//
// The producers of deliveries (fan-out, the retry relay, the dispatcher's
// short holds, the API's resend) produce to the newest generation
// ([Generations.DeliveriesTopic], read per record, so a record goes to
// exactly one generation). Each older generation keeps its own dispatchers
// (consumer group Topics.Prefix+"dispatch" for generation 1,
// "dispatch.g<n>" after) until it is retired; the dispatchers of a new
// generation start only once the generation before is drained
// ([Drained]) or GenerationGate.MaxWait has passed ([RunGenerations]), so
// an endpoint is served by one generation at a time except past that
// bound. See docs/OPERATIONS.md ("Growing the deliveries topic").

// Generation is one deliveries topic.
type Generation struct {
	N          int       `json:"generation"` // 1, 2, …
	Topic      string    `json:"topic"`
	Partitions int32     `json:"partitions"`
	CreatedAt  time.Time `json:"created_at"`
	// RetiredAt is set by [RetireGeneration]: the generation was drained
	// and its dispatchers stop; zero while it is live.
	RetiredAt time.Time `json:"retired_at,omitzero"`
}

// GenerationTopic is the topic of generation n (≥ 1) of t's deliveries.
func GenerationTopic(t Topics, n int) string {
	if n <= 1 {
		return t.Deliveries
	}
	return t.Deliveries + ".g" + strconv.Itoa(n)
}

// GenerationGroup is the dispatcher consumer group of generation n; base
// is the group of generation 1 (e.g. "hookrelay.dispatch").
func GenerationGroup(base string, n int) string {
	if n <= 1 {
		return base
	}
	return base + ".g" + strconv.Itoa(n)
}

const generationKeyPrefix = "deliveries/"

// GenerationsOptions configures [Generations].
type GenerationsOptions struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// KafkaOptions are extra franz-go options (TLS, SASL). Optional.
	KafkaOptions []kgo.Opt
	// Topics names the deliveries and generations topics. Required.
	Topics Topics
	// Logger. Optional. Default slog.Default().
	Logger *slog.Logger
}

// Generations is the view of the deliveries generations: it reads
// Topics.Generations from the start and follows it. Generation 1 (the
// deliveries topic, unrecorded) is known before Run. Methods are safe for
// concurrent use.
type Generations struct {
	o       GenerationsOptions
	mu      sync.Mutex
	gens    map[int]Generation
	changed chan struct{} // closed and replaced on each change
	ready   chan struct{}
	once    sync.Once
	// current is the newest generation's topic, set in apply: read per
	// record by every producer of deliveries without the mutex.
	current atomic.Pointer[string]
	newest  int                   // the newest generation's N; under mu
	lastErr atomic.Pointer[error] // why the topic is not read yet (Err)
}

// Err is nil once the view is ready ([Generations.Ready]); before, why
// not: the last error reading the topic, or that it is catching up.
// For a readiness report.
func (g *Generations) Err() error {
	select {
	case <-g.ready:
		return nil
	default:
	}
	if p := g.lastErr.Load(); p != nil {
		return *p
	}
	return fmt.Errorf("reading %s", g.o.Topics.Generations)
}

// unauthorized reports whether err is an authorization failure (ACLs),
// which no retry cures.
func unauthorized(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// unknownTopic reports whether err says the topic does not exist: fatal
// once it lasts unknownTopicFatal (a topic just created is unknown to a
// broker for a moment).
func unknownTopic(err error) bool {
	return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID)
}

// unknownTopicFatal is how long the generations topic may be unknown
// before Run gives up.
var unknownTopicFatal = 30 * time.Second

// NewGenerations validates o; it does not connect.
func NewGenerations(o GenerationsOptions) (*Generations, error) {
	switch {
	case len(o.Brokers) == 0:
		return nil, errors.New("pipeline: GenerationsOptions.Brokers is required")
	case o.Topics.Deliveries == "" || o.Topics.Generations == "":
		return nil, errors.New("pipeline: GenerationsOptions.Topics is required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	g := &Generations{o: o, gens: map[int]Generation{1: {N: 1, Topic: o.Topics.Deliveries}},
		changed: make(chan struct{}), ready: make(chan struct{}), newest: 1}
	g.current.Store(&o.Topics.Deliveries)
	return g, nil
}

// Ready is closed once Run has read the topic to its end the first time.
func (g *Generations) Ready() <-chan struct{} { return g.ready }

// Changed returns a channel closed at the next change of the generations.
func (g *Generations) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

// All returns every generation, oldest first, retired ones included.
func (g *Generations) All() []Generation {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Generation, 0, len(g.gens))
	for _, gen := range g.gens {
		out = append(out, gen)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].N < out[j].N })
	return out
}

// Current returns the newest generation.
func (g *Generations) Current() Generation {
	all := g.All()
	return all[len(all)-1]
}

// DeliveriesTopic is the topic new deliveries go to: the newest
// generation's. Called per record by every producer of deliveries: one
// atomic load, no lock, no allocation.
func (g *Generations) DeliveriesTopic() string { return *g.current.Load() }

// apply records one record of the generations topic.
func (g *Generations) apply(r *kgo.Record) {
	n, err := strconv.Atoi(strings.TrimPrefix(string(r.Key), generationKeyPrefix))
	if !strings.HasPrefix(string(r.Key), generationKeyPrefix) || err != nil || n < 1 {
		return // not ours
	}
	var gen Generation
	if len(r.Value) == 0 || json.Unmarshal(r.Value, &gen) != nil || gen.N != n || gen.Topic == "" {
		g.o.Logger.Warn("generations: ignoring an unreadable record", "key", string(r.Key), "offset", r.Offset)
		return
	}
	g.mu.Lock()
	g.gens[n] = gen
	if n >= g.newest {
		g.newest = n
		g.current.Store(&gen.Topic)
	}
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

// Run reads the generations topic until ctx ends; it retries Kafka errors
// itself (franz-go) and returns nil when ctx ends, except for an
// authorization failure, or a topic still unknown after 30 s, which no
// retry cures: then a [Fatal] error naming the topic.
func (g *Generations) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(g.o.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{g.o.Topics.Generations: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(250 * time.Millisecond),
	}, g.o.KafkaOptions...)...)
	if err != nil {
		return Fatal(fmt.Errorf("pipeline: generations client: %w", err))
	}
	defer cl.Close()
	end, err := g.endOffset(ctx, cl)
	if err != nil {
		return err
	}
	if end == 0 {
		g.once.Do(func() { close(g.ready) })
	}
	started := time.Now()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		for _, fe := range fs.Errors() {
			if unauthorized(fe.Err) {
				return Fatal(fmt.Errorf("pipeline: read the generations topic %s: %w (is it created, and may this principal read it?)", g.o.Topics.Generations, fe.Err))
			}
		}
		next := int64(-1)
		fs.EachRecord(func(r *kgo.Record) {
			g.apply(r)
			next = r.Offset + 1
		})
		// Caught up at the start's end offset; or, should the last offsets
		// hold no record (compacted away), after 10 s without records.
		if next >= end || (fs.NumRecords() == 0 && time.Since(started) > 10*time.Second) {
			g.once.Do(func() { close(g.ready) })
		}
	}
}

// endOffset is the generations topic's end offset at start, retried until
// known or ctx ends (then 0); an authorization failure, or a topic unknown
// for unknownTopicFatal, is a Fatal error.
func (g *Generations) endOffset(ctx context.Context, cl *kgo.Client) (int64, error) {
	adm := kadm.NewClient(cl)
	var unknownSince time.Time
	for try := 0; ; try++ {
		ends, err := adm.ListEndOffsets(ctx, g.o.Topics.Generations)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			if o, ok := ends.Lookup(g.o.Topics.Generations, 0); ok {
				return o.Offset, nil
			}
			err = errors.New("no partition 0")
		}
		if ctx.Err() != nil {
			return 0, nil
		}
		if !unknownTopic(err) {
			unknownSince = time.Time{}
		} else if unknownSince.IsZero() {
			unknownSince = time.Now()
		}
		if unauthorized(err) || !unknownSince.IsZero() && time.Since(unknownSince) >= unknownTopicFatal {
			return 0, Fatal(fmt.Errorf("pipeline: read the generations topic %s: %w (is it created, and may this principal read it?)", g.o.Topics.Generations, err))
		}
		err = fmt.Errorf("end offset of %s unknown (try %d): %w", g.o.Topics.Generations, try, err)
		g.lastErr.Store(&err)
		g.o.Logger.Warn("generations: end offset unknown; retrying", "err", err, "try", try)
		if !sleepCtx(ctx, min(100*time.Millisecond<<min(try, 6), 5*time.Second)) {
			return 0, nil
		}
	}
}

// ReadGenerations reads the generations topic once, to its end, and
// returns every generation, oldest first (a CLI's view).
func ReadGenerations(ctx context.Context, o GenerationsOptions) ([]Generation, error) {
	g, err := NewGenerations(o)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(rctx) }() // owner: ReadGenerations, which waits
	select {
	case <-g.Ready():
	case <-ctx.Done():
	}
	cancel()
	if err := <-done; err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("read %s: %w", o.Topics.Generations, ctx.Err())
	}
	return g.All(), nil
}

// writeGeneration produces gen's record to the generations topic and
// waits for it (acks=all).
func writeGeneration(ctx context.Context, cl *kgo.Client, t Topics, gen Generation) error {
	b, err := json.Marshal(gen)
	if err != nil {
		return err
	}
	rec := &kgo.Record{Topic: t.Generations, Partition: 0, Key: []byte(generationKeyPrefix + strconv.Itoa(gen.N)), Value: b}
	return cl.ProduceSync(ctx, rec).FirstErr()
}

// GrowDeliveries starts a new generation of the deliveries topic with
// partitions partitions (more than the newest generation's, gens as read
// by [ReadGenerations]): it creates the topic (7 d retention, like the
// deliveries topic, with l's replication settings resolved by
// [ReplicationFor]), waits until it is in the metadata, and then writes
// the generation's record, the switch: from the moment each process reads
// it, its producers send new deliveries to the new topic. cl should produce
// with acks=all (the generations topic has one partition). An error before
// the record is written leaves at most an unused topic, which a retry with
// the same count reuses. Not safe to run twice at once (two grows may
// both write generation n+1; the later record wins).
func GrowDeliveries(ctx context.Context, cl *kgo.Client, t Topics, gens []Generation, partitions int32, l TopicLayout) (Generation, error) {
	cur := gens[len(gens)-1]
	adm := kadm.NewClient(cl)
	if cur.Partitions == 0 { // generation 1 is unrecorded: ask the cluster
		md, err := adm.ListTopics(ctx, cur.Topic)
		if err != nil {
			return Generation{}, fmt.Errorf("describe topic %s: %w", cur.Topic, err)
		}
		td, ok := md[cur.Topic]
		if !ok || td.Err != nil {
			return Generation{}, fmt.Errorf("describe topic %s: not found (%v)", cur.Topic, td.Err)
		}
		cur.Partitions = int32(len(td.Partitions))
	}
	if partitions <= cur.Partitions {
		return Generation{}, fmt.Errorf("--partitions %d: must be more than the %d of the current generation %d (%s)", partitions, cur.Partitions, cur.N, cur.Topic)
	}
	if l.ReplicationFactor == 0 || l.MinInsyncReplicas == 0 {
		brokers, err := adm.ListBrokers(ctx)
		if err != nil {
			return Generation{}, fmt.Errorf("list brokers (to choose the replication factor): %w", err)
		}
		l.ReplicationFactor, l.MinInsyncReplicas = ReplicationFor(l, len(brokers))
	}
	next := Generation{N: cur.N + 1, Topic: GenerationTopic(t, cur.N+1), Partitions: partitions, CreatedAt: time.Now().UTC()}
	cfg := map[string]*string{"retention.ms": ptr("604800000")}
	if l.MinInsyncReplicas > 0 {
		cfg["min.insync.replicas"] = ptr(strconv.Itoa(l.MinInsyncReplicas))
	}
	resp, err := adm.CreateTopic(ctx, partitions, l.ReplicationFactor, cfg, next.Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return Generation{}, fmt.Errorf("create topic %s: %w", next.Topic, err)
	}
	for { // visible with all its partitions before any producer switches to it
		md, err := adm.ListTopics(ctx, next.Topic)
		if err == nil {
			if td, ok := md[next.Topic]; ok && td.Err == nil && len(td.Partitions) > 0 {
				if int32(len(td.Partitions)) != partitions {
					return Generation{}, fmt.Errorf("topic %s exists with %d partitions, not %d", next.Topic, len(td.Partitions), partitions)
				}
				break
			}
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return Generation{}, ctx.Err()
		}
	}
	if err := writeGeneration(ctx, cl, t, next); err != nil {
		return Generation{}, fmt.Errorf("write the switch record to %s: %w", t.Generations, err)
	}
	return next, nil
}

// Drain is the state of one generation's topic for its dispatcher group.
type Drain struct {
	Drained bool
	// PendingPartitions is the partitions with at least one data record
	// (not a transaction marker) between the group's committed offset and
	// the end: a partition is read only up to its first such record, so
	// this counts partitions, not records. Open is partitions whose end is
	// past the last stable offset (a transaction still open).
	PendingPartitions, Open int
}

// Drained reports whether group has consumed topic to its end: every
// partition's committed offset is at its end offset, or only transaction
// markers lie between (read with read_committed and control records kept:
// the end offset counts a commit marker as a record, so a caught-up
// transactional group is often one short). An open transaction on the
// topic means not drained. cl is a plain client (no group, no consuming);
// its options are copied for the short read.
func Drained(ctx context.Context, cl *kgo.Client, group, topic string) (Drain, error) {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return Drain{}, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return Drain{}, fmt.Errorf("stable offsets of %s: %w", topic, err)
	}
	resp, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		resp, err = nil, nil // no commit yet: from the log start
	}
	if err != nil {
		return Drain{}, fmt.Errorf("offsets of group %s: %w", group, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return Drain{}, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	var d Drain
	gaps := map[int32]kgo.Offset{}
	until := map[int32]int64{}
	ends.Each(func(e kadm.ListedOffset) {
		if s, ok := stable.Lookup(topic, e.Partition); ok && s.Offset < e.Offset {
			d.Open++
		}
		var from int64 // no commit: from the log start
		if c, ok := resp.Lookup(topic, e.Partition); ok && c.At >= 0 {
			from = c.At
		} else if so, ok := starts.Lookup(topic, e.Partition); ok {
			from = so.Offset
		}
		if from < e.Offset {
			gaps[e.Partition] = kgo.NewOffset().At(from)
			until[e.Partition] = e.Offset
		}
	})
	if d.Open > 0 {
		return d, nil
	}
	if len(gaps) > 0 {
		n, err := dataRecords(ctx, cl, topic, gaps, until)
		if err != nil {
			return d, err
		}
		d.PendingPartitions = n
	}
	d.Drained = d.PendingPartitions == 0
	return d, nil
}

// dataRecords reads topic's partitions from gaps to until (exclusive) with
// read_committed, control records kept, and counts the partitions with a
// data record among them; it stops at the first data record of a partition.
func dataRecords(ctx context.Context, base *kgo.Client, topic string, gaps map[int32]kgo.Offset, until map[int32]int64) (int, error) {
	opts := []kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: gaps}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100 * time.Millisecond),
	}
	cl, err := kgo.NewClient(slices.Concat(base.Opts(), opts)...) // a copy: base's options are not written into
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	left := len(until)
	data := 0
	for left > 0 {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return data, fmt.Errorf("read %s to its end: %w", topic, rctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := until[r.Partition]
			if !ok {
				return
			}
			if !r.Attrs.IsControl() {
				data++
			}
			if !r.Attrs.IsControl() || r.Offset+1 >= end {
				delete(until, r.Partition)
				left--
			}
		})
	}
	return data, nil
}

// RetireGeneration marks generation gen as retired (its dispatchers stop)
// once its dispatcher group has drained it and no record was written to
// its topic within quiet ([Quiet]; [DefaultRetireQuiet] in the CLI), so
// no late writer (a process that has not read the switch, or an older
// build) still produces to it; force skips both checks. The
// topic is left for the operator to delete (its records are all
// consumed). It refuses the newest generation.
func RetireGeneration(ctx context.Context, cl *kgo.Client, t Topics, gens []Generation, n int, group string, quiet time.Duration, force bool) (Generation, error) {
	if n >= gens[len(gens)-1].N {
		return Generation{}, fmt.Errorf("generation %d is the newest: only an older one can be retired", n)
	}
	var gen Generation
	for _, g := range gens {
		if g.N == n {
			gen = g
		}
	}
	if gen.N == 0 {
		return Generation{}, fmt.Errorf("no generation %d", n)
	}
	if !force {
		d, err := Drained(ctx, cl, GenerationGroup(group, n), gen.Topic)
		if err != nil {
			return Generation{}, err
		}
		if !d.Drained {
			return Generation{}, fmt.Errorf("generation %d (%s) is not drained: %d partitions with undelivered records, %d partitions with an open transaction", n, gen.Topic, d.PendingPartitions, d.Open)
		}
		busy, err := Quiet(ctx, kadm.NewClient(cl), gen.Topic, quiet, time.Now())
		if err != nil {
			return Generation{}, err
		}
		if len(busy) > 0 {
			return Generation{}, fmt.Errorf("generation %d (%s) is drained but was written to within the last %v (partitions %v): a process may still produce to it; retry later (--quiet), or --force", n, gen.Topic, quiet, busy)
		}
	}
	gen.RetiredAt = time.Now().UTC()
	return gen, writeGeneration(ctx, cl, t, gen)
}
