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
// stage or part that owns the client; cmd/hookrelay uses "fanout",
// "dispatch" (generation n > 1: "dispatch.g<n>", one series set per live
// generation, kept until the process restarts), "retry", "audit",
// "endpoints", "generations", "attempts", "admin" and "api". request is the
// Kafka API name (Produce, Fetch, EndTxn, …: kmsg.NameForKey); keys above
// kmsg.MaxKey are not counted. Every write counts, a failed one too, so a
// retried request counts once per try, and EndTxn counts commits and aborts
// alike. Give a client the option once: two hooks count twice. The counts
// show what each stage asks of the brokers (BENCHMARKS.md, "Steady load:
// where Kafka's requests come from"); which request costs a broker the most
// CPU they do not say.
//
// The attribute sets are built once, here, so a request costs one atomic
// add. Safe for concurrent use by the client's connections. m nil: the
// option is a hook that counts nothing.
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

var _ kgo.HookBrokerWrite = (*requestCounter)(nil)

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
