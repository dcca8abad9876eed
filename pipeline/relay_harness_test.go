package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/retrytiers"
)

// relayEnv is a set of tier, target and DLQ topics on some cluster (kfake or
// the real broker), with helpers to feed and run relays.
type relayEnv struct {
	t      *testing.T
	seeds  []string
	prefix string
	tiers  retrytiers.Tiers
	target string
	dlq    string
	group  string
	extra  []kgo.Opt // client options for every client (e.g. session timeout)
	prod   *kgo.Client
}

func newRelayEnv(t *testing.T, seeds []string, prefix string, s retrytiers.Schedule, partitions int32, extra ...kgo.Opt) *relayEnv {
	t.Helper()
	tiers, err := retrytiers.TiersFor(prefix, s)
	if err != nil {
		t.Fatal(err)
	}
	e := &relayEnv{
		t: t, seeds: seeds, prefix: prefix, tiers: tiers,
		target: prefix + "deliveries", dlq: prefix + "dlq", group: prefix + "retry-relay",
		extra: extra,
	}
	e.prod = e.client(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(e.prod)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := adm.CreateTopics(ctx, partitions, 1, retrytiers.TierTopicConfig(), tiers.Topics()...)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("creating tier topics: %v", err)
	}
	res, err = adm.CreateTopics(ctx, partitions, 1, nil, e.target, e.dlq)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("creating target topics: %v", err)
	}
	return e
}

func (e *relayEnv) client(opts ...kgo.Opt) *kgo.Client {
	e.t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(e.seeds...)}, e.extra...)
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cl.Close)
	return cl
}

// delivery returns the delivery.Meta of test delivery i, due at due.
func testDelivery(i int, due time.Time) delivery.Meta {
	return delivery.Meta{
		DeliveryID: fmt.Sprintf("d%04d", i),
		WebhookID:  fmt.Sprintf("msg_%04d", i),
		EndpointID: fmt.Sprintf("ep%d", i%7),
		EventID:    fmt.Sprintf("ev%d", i),
		EventType:  "invoice.paid",
		Attempt:    2,
		DueAt:      due,
		LastError:  "http_503",
	}
}

// park produces a delivery into the tier the dispatcher would choose for it
// (Next of the wait), or to the target when the wait is under the smallest
// tier, at partition p. ts, when not zero, is the record's CreateTime (kfake
// keeps it; the real broker overwrites it on tier topics).
func (e *relayEnv) park(m delivery.Meta, p int32, now, ts time.Time) string {
	e.t.Helper()
	topic := e.target
	if tr, ok := e.tiers.Next(m.DueAt.Sub(now)); ok {
		topic = tr.Topic
	}
	e.produce(&kgo.Record{Topic: topic, Partition: p, Key: []byte(m.EndpointID), Value: []byte(`{"n":` + m.DeliveryID[1:] + `}`), Headers: m.Headers(), Timestamp: ts})
	return topic
}

func (e *relayEnv) produce(rs ...*kgo.Record) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

// options returns relay options for instance id.
func (e *relayEnv) options(id string) RelayOptions {
	return RelayOptions{
		Brokers:         e.seeds,
		KafkaOptions:    e.extra,
		Group:           e.group,
		TransactionalID: e.prefix + "relay-" + id,
		Tiers:           e.tiers,
		TargetTopic:     e.target,
		DLQTopic:        e.dlq,
	}
}

// runningRelay is a Relay whose Run the test owns.
type runningRelay struct {
	*Relay
	cancel context.CancelFunc
	done   chan error
}

func (e *relayEnv) start(o RelayOptions, hooks ...func(*Relay)) *runningRelay {
	e.t.Helper()
	r, err := NewRelay(o)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, h := range hooks {
		h(r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr := &runningRelay{Relay: r, cancel: cancel, done: make(chan error, 1)}
	go func() { rr.done <- r.Run(ctx) }()
	e.t.Cleanup(func() { rr.stop() })
	return rr
}

// stop cancels Run and waits for it.
func (rr *runningRelay) stop() error {
	rr.cancel()
	select {
	case err, ok := <-rr.done:
		if ok {
			close(rr.done)
		}
		return err
	case <-time.After(60 * time.Second):
		return errors.New("relay did not stop within 60s")
	}
}

// warmUp relays one delivery (ID "warmup") through the smallest tier and
// waits for it in the target, so that measurements start once the relays
// have joined the group and every client has its metadata.
func (e *relayEnv) warmUp(o *observer) {
	e.t.Helper()
	now := time.Now()
	m := testDelivery(0, now.Add(e.tiers.Smallest()))
	m.DeliveryID = "warmup"
	e.produce(&kgo.Record{Topic: e.tiers[0].Topic, Key: []byte(m.EndpointID), Value: []byte("{}"), Headers: m.Headers()})
	waitWithin(e.t, 60*time.Second, "the warm-up delivery", func() bool { return countByID(o.in(e.target))["warmup"] == 1 })
}

// seen is a record read by an observer, and when it was read.
type seen struct {
	rec *kgo.Record
	at  time.Time
	id  string // delivery ID, "" when absent
}

// observer reads the given topics from the start with read_committed, in a
// goroutine it owns until the test ends.
type observer struct {
	mu   sync.Mutex
	recs []seen
}

func (e *relayEnv) observe(topics ...string) *observer {
	e.t.Helper()
	cl := e.client(
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(50*time.Millisecond),
	)
	o := &observer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			at := time.Now()
			o.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				s := seen{rec: r, at: at}
				for _, h := range r.Headers {
					if h.Key == delivery.HeaderDeliveryID {
						s.id = string(h.Value)
					}
				}
				o.recs = append(o.recs, s)
			})
			o.mu.Unlock()
		}
	}()
	e.t.Cleanup(func() { cancel(); <-done })
	return o
}

// in returns what was seen on topic.
func (o *observer) in(topic string) []seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []seen
	for _, s := range o.recs {
		if s.rec.Topic == topic {
			out = append(out, s)
		}
	}
	return out
}

// waitFor polls cond until it holds or timeout passes.
func waitWithin(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countByID counts the records of each delivery ID.
func countByID(ss []seen) map[string]int {
	n := make(map[string]int)
	for _, s := range ss {
		n[s.id]++
	}
	return n
}

// percentile returns the p-th percentile (0–100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// metricsReader gives a relay a meter and reads its instruments back.
type metricsReader struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newMetricsReader() *metricsReader {
	reader := sdkmetric.NewManualReader()
	return &metricsReader{reader: reader, mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
}

// collect returns the named instrument's data, or nil.
func (m *metricsReader) collect(t *testing.T, name string) metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name == name {
				return mt.Data
			}
		}
	}
	return nil
}

// gauge reads an int64 gauge; -1 when absent.
func (m *metricsReader) gauge(t *testing.T, name string) int64 {
	t.Helper()
	g, ok := m.collect(t, name).(metricdata.Gauge[int64])
	if !ok || len(g.DataPoints) == 0 {
		return -1
	}
	return g.DataPoints[0].Value
}

// histogramCount sums the counts and maxima of a float64 histogram.
func (m *metricsReader) histogram(t *testing.T, name string) (count uint64, maxV float64) {
	t.Helper()
	h, ok := m.collect(t, name).(metricdata.Histogram[float64])
	if !ok {
		return 0, 0
	}
	for _, dp := range h.DataPoints {
		count += dp.Count
		if v, ok := dp.Max.Value(); ok {
			maxV = max(maxV, v)
		}
	}
	return count, maxV
}

// counter sums an int64 counter's data points whose attribute key has
// value; all of them when key is empty.
func (m *metricsReader) counter(t *testing.T, name, key, value string) int64 {
	t.Helper()
	s, ok := m.collect(t, name).(metricdata.Sum[int64])
	if !ok {
		return 0
	}
	var n int64
	for _, dp := range s.DataPoints {
		if key == "" {
			n += dp.Value
			continue
		}
		if v, ok := dp.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
			n += dp.Value
		}
	}
	return n
}
