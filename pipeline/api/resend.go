package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
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
// deliveries alike; 30 days). Safe for concurrent use.
type Resender struct {
	opts       []kgo.Opt
	cl         *kgo.Client
	dlq        string
	deliveries string
	// deliveriesTopic, when set, overrides deliveries: the newest
	// deliveries generation (SetDeliveriesTopic)
	deliveriesTopic func() string
}

// NewResender returns a Resender reading dlq and producing to deliveries
// with clientOpts (seed brokers, TLS, SASL). Close it when done.
func NewResender(clientOpts []kgo.Opt, dlq, deliveries string) (*Resender, error) {
	cl, err := kgo.NewClient(append(clientOpts, kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return nil, err
	}
	return &Resender{opts: clientOpts, cl: cl, dlq: dlq, deliveries: deliveries}, nil
}

// SetDeliveriesTopic makes each resend go to f's answer (the newest
// deliveries generation, pipeline.Generations.DeliveriesTopic) instead of
// the deliveries topic given to NewResender. Call it before use.
func (s *Resender) SetDeliveriesTopic(f func() string) { s.deliveriesTopic = f }

// Close closes the Resender's client.
func (s *Resender) Close() { s.cl.Close() }

// span is a range of offsets of one partition: [start, end).
type span struct{ start, end int64 }

// spans returns, per DLQ partition (all, or only the one endpoint ep's key
// maps to when ep is set), the offsets from the first record at or after
// since to the end.
func (s *Resender) spans(ctx context.Context, ep string, since time.Time) (map[int32]span, error) {
	adm := kadm.NewClient(s.cl)
	ends, err := adm.ListEndOffsets(ctx, s.dlq)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("api: DLQ end offsets: %w", err)
	}
	n := len(ends[s.dlq])
	if n == 0 {
		return nil, fmt.Errorf("api: DLQ topic %s has no partitions", s.dlq)
	}
	starts, err := adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), s.dlq)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("api: DLQ offsets by time: %w", err)
	}
	out := map[int32]span{}
	for p, o := range ends[s.dlq] {
		start := starts[s.dlq][p].Offset
		if start >= 0 && start < o.Offset {
			out[p] = span{start, o.Offset}
		}
	}
	if ep != "" {
		// The pipeline's producers use franz-go's default (murmur2 key) partitioning.
		p := int32(kgo.StickyKeyPartitioner(nil).ForTopic(s.dlq).Partition(&kgo.Record{Key: []byte(ep)}, n))
		sp, ok := out[p]
		out = map[int32]span{}
		if ok {
			out[p] = sp
		}
	}
	return out, nil
}

// scan calls fn with every data record of spans, in offset order per
// partition, until fn returns false.
func (s *Resender) scan(ctx context.Context, spans map[int32]span, fn func(*kgo.Record) bool) error {
	if len(spans) == 0 {
		return nil
	}
	offsets := map[int32]kgo.Offset{}
	pos := map[int32]int64{}
	for p, sp := range spans {
		offsets[p] = kgo.NewOffset().At(sp.start)
		pos[p] = sp.start
	}
	cl, err := kgo.NewClient(append(s.opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.dlq: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
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
	// so a partition ending in a transaction marker reaches its end); an
	// idle poll of 5 s ends the read too, as a guard.
	for !done() {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if pctx.Err() != nil && fs.NumRecords() == 0 {
			return nil
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("api: read DLQ: %w", err)
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
	spans, err := s.spans(ctx, e.ID, since)
	if err != nil {
		return nil, err
	}
	var found *kgo.Record
	err = s.scan(ctx, spans, func(r *kgo.Record) bool {
		if dlqOf(r, e) && headerOf(r, delivery.HeaderWebhookID) == msg {
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
	topic := s.deliveries
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
