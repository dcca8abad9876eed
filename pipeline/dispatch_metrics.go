package pipeline

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hookrelay/hookrelay/audit"
)

// outcomeAttrs holds one precomputed attribute option per outcome, so the
// hot path allocates no attribute set per attempt.
var outcomeAttrs = func() map[audit.Outcome]metric.MeasurementOption {
	m := make(map[audit.Outcome]metric.MeasurementOption, len(audit.Outcomes))
	for _, o := range audit.Outcomes {
		m[o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", string(o))))
	}
	return m
}()

func attrOutcome(o audit.Outcome) metric.MeasurementOption { return outcomeAttrs[o] }

// parkReasonAttrs holds the attribute option of each park reason (see
// parkReason, shed and attempt), built once: parking a burst allocates no
// attribute set per delivery.
var parkReasonAttrs = func() map[string]metric.MeasurementOption {
	m := map[string]metric.MeasurementOption{}
	for _, r := range []string{"paused", "backlog", "partition_backlog", "queue_wait", "attempt_log"} {
		m[r] = metric.WithAttributeSet(attribute.NewSet(attrReason(r)))
	}
	return m
}()

// attrParkReason is the attribute option of park reason r (built on the
// spot for a reason not listed in parkReasonAttrs).
func attrParkReason(r string) metric.MeasurementOption {
	if o, ok := parkReasonAttrs[r]; ok {
		return o
	}
	return metric.WithAttributes(attrReason(r))
}
func attrReason(r string) attribute.KeyValue { return attribute.String("reason", r) }
func attrStage(s string) attribute.KeyValue  { return attribute.String("stage", s) }

// registerGauges exposes in-flight requests per endpoint.
func (d *Dispatcher) registerGauges(m metric.Meter) {
	g, err := m.Int64ObservableGauge("hookrelay.endpoint.in_flight",
		metric.WithDescription("HTTP attempts in flight per endpoint."))
	if err != nil {
		return
	}
	_, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		d.limMu.Lock()
		defer d.limMu.Unlock()
		for id, l := range d.limiters {
			o.ObserveInt64(g, int64(l.InFlight()), metric.WithAttributes(attribute.String("endpoint_id", id)))
		}
		return nil
	}, g)
}
