package pipeline

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// KafkaRequests returns a franz-go option that counts the requests a client
// writes to the brokers, in the counter hookrelay.kafka.requests{client,
// request} (Prometheus: hookrelay_kafka_requests_total). client names the
// stage that owns the client, e.g. "fanout", "dispatch", "audit";
// request is the Kafka API name (Produce, Fetch, EndTxn, …: kmsg.NameForKey).
// A failed write counts too. The counter is what a broker's CPU is spent on:
// EndTxn counts a stage's transactions, Fetch its polls (BENCHMARKS.md,
// "Steady load: where Kafka's requests come from").
//
// The attribute sets are built once, here, so a request costs one atomic
// add. Safe for concurrent use by the client's connections. m nil: the
// option is a no-op hook.
func KafkaRequests(m metric.Meter, client string) kgo.Opt {
	h := &requestCounter{}
	if m != nil {
		h.c, _ = m.Int64Counter("hookrelay.kafka.requests", metric.WithUnit("{request}"),
			metric.WithDescription("Requests written to the Kafka brokers, by client (the stage owning it) and request (Kafka API name)."))
		for key := range h.attrs {
			h.attrs[key] = metric.WithAttributeSet(attribute.NewSet(
				attribute.String("client", client), attribute.String("request", kmsg.NameForKey(int16(key)))))
		}
	}
	return kgo.WithHooks(h)
}

// requestCounter is KafkaRequests' hook.
type requestCounter struct {
	c     metric.Int64Counter // nil: count nothing
	attrs [kmsg.MaxKey + 1]metric.AddOption
}

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (h *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if h.c == nil || key < 0 || int(key) >= len(h.attrs) {
		return
	}
	h.c.Add(context.Background(), 1, h.attrs[key])
}
