package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// HeaderResend marks a delivery record the API re-produced: its value is
// the resend ID ("rs_" and 16 hex characters), also the record's delivery
// ID, so the attempts of a resend are told apart from the original's by
// delivery_id. (Carrying it through retry hops and into its own attempt
// column is the dispatcher's part, not done yet.)
const HeaderResend = "hookrelay-resend"

// errNoDLQRecord: the message has no DLQ record to resend.
var errNoDLQRecord = errors.New("api: no DLQ record of the message")

// Resender puts a message that ended without success back on the
// deliveries topic, from its record in the DLQ, which holds the exact body
// and every header (skipped, abandoned, exhausted, expired, failed
// deliveries alike; 30 days), or, for recovery, from its event in the
// events topic (7 days), rebuilt as fan-out builds it (pipeline.Rematch).
// Safe for concurrent use.
type Resender struct {
	o  ResenderOptions
	cl *kgo.Client
	// deliveriesTopic, when set, overrides o.Deliveries: the newest
	// deliveries generation (SetDeliveriesTopic)
	deliveriesTopic func() string
	// queues, when set, lists the live deliveries generations and their
	// dispatcher groups, where recovery looks for what is still queued
	// (SetDeliveriesTopic); nil: o.Deliveries and o.DispatchGroup
	queues func() []Queue
	// ready, when set, is closed once newest and queues answer from the
	// whole generations topic (pipeline.Generations.Ready): before that,
	// newest would name generation 1, perhaps retired (SetDeliveriesTopic)
	ready <-chan struct{}
}

// errGenerationsNotReady: the deliveries generations are not read yet (the
// process has just started, or Kafka is unreachable); answered 503.
var errGenerationsNotReady = errors.New("api: the deliveries generations are not read yet")

// generationsReadyWait bounds how long a request waits for the
// generations view at start before it is answered 503.
const generationsReadyWait = 10 * time.Second

// awaitGenerations waits until the generations view is ready, ctx ends
// or generationsReadyWait has passed (then errGenerationsNotReady).
func (s *Resender) awaitGenerations(ctx context.Context) error {
	if s.ready == nil {
		return nil
	}
	select {
	case <-s.ready:
		return nil
	default:
	}
	t := time.NewTimer(generationsReadyWait)
	defer t.Stop()
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
	case <-t.C:
	}
	return errGenerationsNotReady
}

// ResenderOptions configure a [Resender].
type ResenderOptions struct {
	// ClientOpts are the Kafka connection options (seed brokers, TLS,
	// SASL). Required.
	ClientOpts []kgo.Opt
	// DLQ and Deliveries are the `<prefix>dlq` and `<prefix>deliveries`
	// topics. Required.
	DLQ, Deliveries string
	// Events is the `<prefix>events` topic, which recovery also reads, so
	// that a message whose only trace is its event is found. Optional: ""
	// recovers from the DLQ alone.
	Events string
	// MaxEventBytes is fan-out's limit on an events record
	// (HOOKRELAY_MAX_EVENT_BYTES); a larger one is invalid, as in fan-out.
	// Optional. Default events.DefaultMaxBytes.
	MaxEventBytes int
	// FanoutGroup and DispatchGroup are the consumer groups of fan-out and
	// the dispatcher (`<prefix>fanout`, `<prefix>dispatch`). Recovery
	// treats an event at or after fan-out's committed offset, and a
	// delivery at or after the dispatcher's, as pending (it will be sent
	// anyway) and resends neither. Optional: "" skips that check.
	FanoutGroup, DispatchGroup string
}

// NewResender returns a Resender. Close it when done.
func NewResender(o ResenderOptions) (*Resender, error) {
	if o.DLQ == "" || o.Deliveries == "" {
		return nil, errors.New("api: ResenderOptions.DLQ and .Deliveries: required")
	}
	// A new slice: ClientOpts may have spare capacity that an append would
	// write into, and is shared with every scan.
	cl, err := kgo.NewClient(slices.Concat(o.ClientOpts, []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())})...)
	if err != nil {
		return nil, err
	}
	return &Resender{o: o, cl: cl}, nil
}

// Queue is one deliveries topic and the dispatcher consumer group that
// reads it (one per deliveries generation, pipeline.GenerationGroup).
type Queue struct{ Topic, Group string }

// SetDeliveriesTopic makes each resend go to newest's answer (the newest
// deliveries generation, pipeline.Generations.DeliveriesTopic) instead of
// the deliveries topic given to NewResender, and makes recovery look for
// what is still queued in every queue live returns (every generation not
// retired), not only in ResenderOptions.Deliveries. Until ready is
// closed (pipeline.Generations.Ready; nil: at once) a resend or a
// recovery's look at the queues waits, bounded by its request's context
// and 10 s, then is answered 503. Call it before use.
func (s *Resender) SetDeliveriesTopic(newest func() string, live func() []Queue, ready <-chan struct{}) {
	s.deliveriesTopic, s.queues, s.ready = newest, live, ready
}

// Close closes the Resender's client.
func (s *Resender) Close() { s.cl.Close() }

// span is a range of offsets of one partition: [start, end).
type span struct{ start, end int64 }

// keyPartition is the partition of topic (n partitions) that records keyed
// key go to: the pipeline's producers use franz-go's default (murmur2 key)
// partitioning.
func keyPartition(topic, key string, n int) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic(topic).Partition(&kgo.Record{Key: []byte(key)}, n))
}

// spans returns, per partition of topic (all, or only the one records
// keyed key go to when key is set), the offsets from the first record at or
// after since (zero: the start) to the first at or after until (zero: the
// end).
func (s *Resender) spans(ctx context.Context, topic, key string, since, until time.Time) (map[int32]span, error) {
	adm := kadm.NewClient(s.cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("api: %s end offsets: %w", topic, err)
	}
	n := len(ends[topic])
	if n == 0 {
		return nil, fmt.Errorf("api: topic %s has no partitions", topic)
	}
	var starts kadm.ListedOffsets
	if since.IsZero() {
		starts, err = adm.ListStartOffsets(ctx, topic)
	} else {
		starts, err = adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), topic)
	}
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("api: %s offsets by time: %w", topic, err)
	}
	var stops kadm.ListedOffsets
	if !until.IsZero() {
		if stops, err = adm.ListOffsetsAfterMilli(ctx, until.UnixMilli(), topic); err == nil {
			err = stops.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("api: %s offsets by time: %w", topic, err)
		}
	}
	out := map[int32]span{}
	for p, o := range ends[topic] {
		start, end := starts[topic][p].Offset, o.Offset
		if st, ok := stops[topic][p]; ok && st.Offset >= 0 && st.Offset < end {
			end = st.Offset
		}
		if start >= 0 && start < end {
			out[p] = span{start, end}
		}
	}
	if key != "" {
		p := keyPartition(topic, key, n)
		sp, ok := out[p]
		out = map[int32]span{}
		if ok {
			out[p] = sp
		}
	}
	return out, nil
}

// scanIdle is how long scan waits for a record before it gives up on a
// read that has not reached its end offsets. A variable for tests.
var scanIdle = 5 * time.Second

// ReadIncompleteError is a scan that stopped before the end offsets it was
// to read to: no record came for 5 s (a partition whose leader is away, a
// stalled fetch). The answer built from it would be wrong, so the request
// fails with 503 (try again) instead.
type ReadIncompleteError struct {
	Topic     string
	Partition int32
	Offset    int64 // the next offset to read
	End       int64 // the end offset listed before the read
}

func (e *ReadIncompleteError) Error() string {
	return fmt.Sprintf("api: read %s incomplete: partition %d at offset %d of end %d", e.Topic, e.Partition, e.Offset, e.End)
}

// scan calls fn with every data record of spans of topic, in offset order
// per partition, until fn returns false. It is the one reader of every
// scan the API makes (DLQ list, resend, replay, recover; the events and
// deliveries topics for recovery).
func (s *Resender) scan(ctx context.Context, topic string, spans map[int32]span, fn func(*kgo.Record) bool) error {
	if len(spans) == 0 {
		return nil
	}
	offsets := map[int32]kgo.Offset{}
	pos := map[int32]int64{}
	for p, sp := range spans {
		offsets[p] = kgo.NewOffset().At(sp.start)
		pos[p] = sp.start
	}
	// A new slice, never an append to the shared ClientOpts: concurrent
	// scans (one per API request) would write into its spare capacity.
	cl, err := kgo.NewClient(slices.Concat(s.o.ClientOpts, []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()})...)
	if err != nil {
		return err
	}
	defer cl.Close()
	done := func() bool {
		for p, sp := range spans {
			if pos[p] < sp.end {
				return false
			}
		}
		return true
	}
	// Read up to the end offsets listed before (control records are kept,
	// so a partition ending in a transaction marker reaches its end). An
	// idle poll of scanIdle ends the read as a guard, with a
	// *ReadIncompleteError: a partial read would make callers resend too
	// much (queued) or recover too little (candidates), silently.
	for !done() {
		pctx, cancel := context.WithTimeout(ctx, scanIdle)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if pctx.Err() != nil && fs.NumRecords() == 0 {
			for p, sp := range spans {
				if pos[p] < sp.end {
					return &ReadIncompleteError{Topic: topic, Partition: p, Offset: pos[p], End: sp.end}
				}
			}
			return nil
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("api: read %s: %w", topic, err)
		}
		stop := false
		fs.EachRecord(func(r *kgo.Record) {
			if stop || r.Offset >= spans[r.Partition].end {
				return
			}
			pos[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() && !fn(r) {
				stop = true
			}
		})
		if stop {
			return nil
		}
	}
	return nil
}

// scanDLQ calls fn with every DLQ record of endpoint e (dlqOf: its key and
// its current tenant; every record of the topic when e is nil) in [since,
// until), until fn returns false: only the one DLQ partition e's key maps
// to is read.
func (s *Resender) scanDLQ(ctx context.Context, e *endpoints.Endpoint, since, until time.Time, fn func(*kgo.Record) bool) error {
	key := ""
	if e != nil {
		key = e.ID
	}
	spans, err := s.spans(ctx, s.o.DLQ, key, since, until)
	if err != nil {
		return err
	}
	return s.scan(ctx, s.o.DLQ, spans, func(r *kgo.Record) bool {
		if !inRange(r, since, until) || (e != nil && !dlqOf(r, e)) {
			return true
		}
		return fn(r)
	})
}

// newestDLQ returns endpoint e's messages with a DLQ record in [since,
// until), but those in skip (nil: none), in the order first seen, and the
// newest record of each. More than max messages is errTooMany.
func (s *Resender) newestDLQ(ctx context.Context, e *endpoints.Endpoint, since, until time.Time, skip map[string]bool, max int) ([]string, map[string]*kgo.Record, error) {
	latest := map[string]*kgo.Record{}
	var order []string
	err := s.scanDLQ(ctx, e, since, until, func(rec *kgo.Record) bool {
		id := headerOf(rec, delivery.HeaderWebhookID)
		if skip[id] {
			return true
		}
		if _, ok := latest[id]; !ok {
			order = append(order, id)
		}
		latest[id] = rec
		return len(order) <= max
	})
	if err == nil && len(order) > max {
		err = errTooMany
	}
	return order, latest, err
}

// errTooMany: a range holds more messages than one request may resend.
var errTooMany = errors.New("api: too many messages in the range")

func headerOf(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// find returns the newest DLQ record of message msg that is endpoint e's
// (dlqOf: its key and its current tenant), read from since on in the one
// DLQ partition the endpoint's key maps to.
func (s *Resender) find(ctx context.Context, e *endpoints.Endpoint, msg string, since time.Time) (*kgo.Record, error) {
	var found *kgo.Record
	err := s.scanDLQ(ctx, e, since, time.Time{}, func(r *kgo.Record) bool {
		if headerOf(r, delivery.HeaderWebhookID) == msg {
			found = r
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, errNoDLQRecord
	}
	return found, nil
}

// resend re-produces rec for endpoint e as a new delivery: the same body
// and webhook-id, attempt 1, a fresh queue TTL (event time now), the
// endpoint's current incarnation, no history; marked with HeaderResend.
func (s *Resender) resend(ctx context.Context, e *endpoints.Endpoint, rec *kgo.Record) (string, delivery.Meta, error) {
	m, err := delivery.ParseMeta(rec.Headers)
	if err != nil {
		return "", m, fmt.Errorf("api: DLQ record headers: %w", err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	id := "rs_" + hex.EncodeToString(b[:])
	m.DeliveryID, m.Attempt, m.EventTime, m.Incarnation = id, 1, time.Now().UTC(), e.Incarnation
	m.DueAt, m.FirstAttemptAt, m.PauseUntil, m.LastError, m.Parks, m.History, m.Reason = time.Time{}, time.Time{}, time.Time{}, "", 0, nil, ""
	hs := append(m.Headers(), kgo.RecordHeader{Key: HeaderResend, Value: []byte(id)})
	if err := s.awaitGenerations(ctx); err != nil {
		return "", m, err
	}
	topic := s.o.Deliveries
	if s.deliveriesTopic != nil {
		topic = s.deliveriesTopic()
	}
	out := &kgo.Record{Topic: topic, Key: []byte(e.ID), Value: rec.Value, Headers: hs}
	if err := s.cl.ProduceSync(ctx, out).FirstErr(); err != nil {
		return "", m, fmt.Errorf("api: produce resend: %w", err)
	}
	return id, m, nil
}

func (s *Server) resendMessage(w http.ResponseWriter, r *http.Request, p Principal) {
	e, ok := s.lookup(w, r, p)
	if !ok {
		return
	}
	if s.o.Resender == nil {
		writeProblem(w, r, probUnavailable, "resend is not configured in this process")
		return
	}
	msg := r.PathValue("msg_id")
	q := logQuery(e)
	q.WebhookID, q.Limit = msg, audit.MaxLimit
	as, err := s.o.Attempts.Log(r.Context(), q)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	if len(as) == 0 {
		writeProblem(w, r, probNotFound, fmt.Sprintf("no attempt of message %q to endpoint %q", msg, e.ID))
		return
	}
	first := as[len(as)-1].AttemptedAt // the log is newest first
	rec, err := s.o.Resender.find(r.Context(), e, msg, first.Add(-time.Minute))
	if errors.Is(err, errNoDLQRecord) {
		writeProblem(w, r, probNoDLQRecord, "the message has no DLQ record: it was delivered, is still being retried, or its DLQ record is past retention (30 d)")
		return
	}
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	id, m, err := s.o.Resender.resend(r.Context(), e, rec)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"resend_id": id, "delivery_id": m.DeliveryID, "webhook_id": msg, "endpoint_id": e.ID})
}
