package pipeline_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/hookrelay/hookrelay/e2e/stack"
	"github.com/hookrelay/hookrelay/pipeline"
)

// TestLagCollectorKafka checks hookrelay_consumer_lag against the real
// broker: a group that committed 3 of 10 records on one topic and all 4 of
// another shows 7 and 0, a group without commits is absent, and the gauge
// follows a later commit.
func TestLagCollectorKafka(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prefix := stack.TopicPrefix(t)
	adm := stack.Admin(t)
	events, deliveries := prefix+"events", prefix+"deliveries"
	if resp, err := adm.CreateTopics(ctx, 2, 1, nil, events, deliveries); err != nil || resp.Error() != nil {
		t.Fatalf("create topics: %v %v", err, resp.Error())
	}
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: events, Partition: int32(i % 2)})
	}
	for i := range 4 {
		recs = append(recs, &kgo.Record{Topic: deliveries, Partition: int32(i % 2)})
	}
	prod := stack.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	group, idle := prefix+"fanout", prefix+"audit"
	commit := func(topic string, p0, p1 int64) {
		t.Helper()
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: p0, LeaderEpoch: -1})
		os.Add(kadm.Offset{Topic: topic, Partition: 1, At: p1, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, group, os)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %s: %v", topic, err)
		}
	}
	commit(events, 2, 1) // 3 of 10: 3 left on p0, 4 on p1
	commit(deliveries, 2, 2)

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	var more atomic.Pointer[[]string] // the groups that change while it runs (deliveries generations)
	more.Store(&[]string{})
	lc, err := pipeline.NewLagCollector(pipeline.LagOptions{
		Admin: adm, Groups: []string{group, idle}, Meter: mp.Meter("test"), Interval: time.Second,
		MoreGroups: func() []string { return *more.Load() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.Poll(ctx); err != nil {
		t.Fatalf("poll: %v", err)
	}
	want := map[[2]string]int64{{group, events}: 7, {group, deliveries}: 0}
	if got := collectLag(t, reader); !equalLag(got, want) {
		t.Fatalf("hookrelay.consumer.lag = %v, want %v", got, want)
	}

	// Run keeps it current: commit everything and poll for the gauge to follow.
	commit(events, 5, 5)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- lc.Run(rctx) }()
	want[[2]string{group, events}] = 0
	for got := collectLag(t, reader); !equalLag(got, want); got = collectLag(t, reader) {
		if ctx.Err() != nil {
			t.Fatalf("hookrelay.consumer.lag = %v, want %v", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}

	// A group named by MoreGroups after the start is reported at the next read.
	g2 := prefix + "dispatch.g2"
	resp, err := adm.CommitOffsets(ctx, g2, kadm.OffsetsFromRecords(kgo.Record{Topic: deliveries, Partition: 0, Offset: 0}))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit %s: %v", g2, err)
	}
	more.Store(&[]string{g2})
	if err := lc.Poll(ctx); err != nil {
		t.Fatalf("poll: %v", err)
	}
	want[[2]string{g2, deliveries}] = 3 // p0: 2 - 1 committed; p1: 2 from the start
	if got := collectLag(t, reader); !equalLag(got, want) {
		t.Fatalf("hookrelay.consumer.lag with a generation's group = %v, want %v", got, want)
	}
}

func TestNewLagCollectorValidates(t *testing.T) {
	mp := sdkmetric.NewMeterProvider()
	if _, err := pipeline.NewLagCollector(pipeline.LagOptions{Groups: []string{"g"}, Meter: mp.Meter("t")}); err == nil {
		t.Fatal("no Admin: no error")
	}
}

func collectLag(t *testing.T, r *sdkmetric.ManualReader) map[[2]string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "hookrelay.consumer.lag" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				g, _ := dp.Attributes.Value("group")
				tp, _ := dp.Attributes.Value("topic")
				out[[2]string{g.AsString(), tp.AsString()}] = dp.Value
			}
		}
	}
	return out
}

func equalLag(a, b map[[2]string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}
