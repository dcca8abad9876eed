package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestKafkaRequestsCountsEachRequestByClient: three synchronous produces
// are three Produce requests of the client that made them, and another
// client's requests are counted under its own name.
func TestKafkaRequestsCountsEachRequestByClient(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard
	defer cancel()
	for name, n := range map[string]int{"fanout": 3, "dispatch": 1} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"),
			KafkaRequests(mp.Meter("t"), name))
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		cl.Close()
	}
	got := requestCounts(t, reader)
	if got["fanout/Produce"] != 3 || got["dispatch/Produce"] != 1 {
		t.Errorf("Produce requests: fanout %d, dispatch %d; want 3 and 1 (all counts: %v)", got["fanout/Produce"], got["dispatch/Produce"], got)
	}
	if got["fanout/Metadata"] == 0 || got["dispatch/Metadata"] == 0 {
		t.Errorf("no Metadata request counted for a client that produced: %v", got)
	}
}

// TestKafkaRequestsWithoutMeterCountsNothing: a nil meter is a no-op hook,
// not a panic.
func TestKafkaRequestsWithoutMeterCountsNothing(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"), KafkaRequests(nil, "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// requestCounts is hookrelay.kafka.requests by "client/request".
func requestCounts(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			s, ok := m.Data.(metricdata.Sum[int64])
			if !ok || m.Name != "hookrelay.kafka.requests" {
				continue
			}
			for _, dp := range s.DataPoints {
				cl, _ := dp.Attributes.Value("client")
				rq, _ := dp.Attributes.Value("request")
				got[cl.AsString()+"/"+rq.AsString()] += dp.Value
			}
		}
	}
	return got
}
