package pipeline

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// metrics are the pipeline's OpenTelemetry instruments. cmd/ wires the meter
// to the Prometheus exporter; the names below are what /metrics shows (the
// exporter adds _total and unit suffixes).
type metrics struct {
	events          metric.Int64Counter // hookrelay.events{result=valid|invalid}
	unmatched       metric.Int64Counter // hookrelay.events.unmatched
	fannedOut       metric.Int64Counter // hookrelay.deliveries.created
	attempts        metric.Int64Counter // hookrelay.attempts{outcome}
	attemptLatency  metric.Float64Histogram
	startLatency    metric.Float64Histogram // hookrelay.attempt.start.duration
	parked          metric.Int64Counter     // hookrelay.deliveries.parked{reason}
	notSent         metric.Int64Counter     // hookrelay.deliveries.not_sent{outcome,reason}
	txnAborts       metric.Int64Counter     // hookrelay.transactions.aborted{stage}
	duplicateSkips  metric.Int64Counter     // hookrelay.deliveries.skipped_finished
	backlog         metric.Int64UpDownCounter
	inFlight        metric.Int64UpDownCounter
	partitionPauses metric.Int64Counter
}

func newMetrics(m metric.Meter) *metrics {
	if m == nil {
		m = noop.NewMeterProvider().Meter("hookrelay")
	}
	// Instrument creation only fails on invalid names, which are constants
	// here; the returned instrument is then a no-op, never nil.
	var ms metrics
	ms.events, _ = m.Int64Counter("hookrelay.events", metric.WithDescription("Records read from the events topic, by result (valid, invalid)."))
	ms.unmatched, _ = m.Int64Counter("hookrelay.events.unmatched", metric.WithDescription("Valid events that matched no endpoint (active or not)."))
	ms.fannedOut, _ = m.Int64Counter("hookrelay.deliveries.created", metric.WithDescription("Delivery records produced by fan-out, one per (event, endpoint)."))
	ms.attempts, _ = m.Int64Counter("hookrelay.attempts", metric.WithDescription("Delivery attempts by outcome."))
	ms.attemptLatency, _ = m.Float64Histogram("hookrelay.attempt.duration", metric.WithUnit("s"),
		metric.WithDescription("HTTP attempt latency, request start to response headers or error."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	ms.startLatency, _ = m.Float64Histogram("hookrelay.attempt.start.duration", metric.WithUnit("s"),
		metric.WithDescription("Time to write an attempt's sending row (acknowledged by every in-sync replica) before its request."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	ms.parked, _ = m.Int64Counter("hookrelay.deliveries.parked", metric.WithDescription("Deliveries parked in a delay tier without an attempt, by reason (backlog, partition_backlog, queue_wait, memory: busy; paused, attempt_log: back-off)."))
	ms.notSent, _ = m.Int64Counter("hookrelay.deliveries.not_sent", metric.WithDescription("Deliveries ended without a request, each with an attempt row and a DLQ record, by outcome (skipped, config_error, abandoned) and reason (endpoint_disabled, endpoint_recreated, tenant_mismatch, …)."))
	ms.txnAborts, _ = m.Int64Counter("hookrelay.transactions.aborted", metric.WithDescription("Kafka transactions that ended in an abort (their work is redone), by stage."))
	ms.duplicateSkips, _ = m.Int64Counter("hookrelay.deliveries.skipped_finished", metric.WithDescription("Re-read deliveries skipped because the commit metadata says they already finished."))
	ms.backlog, _ = m.Int64UpDownCounter("hookrelay.dispatch.backlog", metric.WithDescription("Deliveries read and not yet attempted, across this process's endpoints."))
	ms.inFlight, _ = m.Int64UpDownCounter("hookrelay.dispatch.in_flight", metric.WithDescription("HTTP attempts in flight."))
	ms.partitionPauses, _ = m.Int64Counter("hookrelay.dispatch.partition_pauses", metric.WithDescription("Times a deliveries partition was paused because its local backlog reached the cap."))
	return &ms
}
