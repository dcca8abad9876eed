package e2e

// Traces, proven (issue 13): hookrelay run with OTEL_EXPORTER_OTLP_ENDPOINT
// exports one client span per attempt over OTLP/HTTP, parented to the
// event's traceparent, and the endpoint sees that span as its parent.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Attribute keys and the span name of an attempt span (pipeline/attempter.go).
// Spelled out here rather than imported: they are the contract with
// operators' trace queries.
const (
	attemptSpanName  = "webhook.attempt"
	attrEndpointID   = "hookrelay.endpoint_id"
	attrAttempt      = "hookrelay.attempt"
	attrOutcome      = "hookrelay.outcome"
	attrWebhookID    = "hookrelay.webhook_id"
	attrHTTPStatus   = "http.response.status_code"
	otlpTracesPath   = "/v1/traces"
	otlpProtobufType = "application/x-protobuf"
)

// otlpSpan is one span as the OTLP receiver decoded it, IDs in lower-case hex.
type otlpSpan struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          tracepb.Span_SpanKind
	Status                        tracepb.Status_StatusCode
	Attrs                         map[string]*commonpb.AnyValue
	Service                       string // resource attribute service.name
}

func (s otlpSpan) str(key string) string { return s.Attrs[key].GetStringValue() }
func (s otlpSpan) num(key string) int64  { return s.Attrs[key].GetIntValue() }

// otlpReceiver is an OTLP/HTTP trace receiver (protobuf encoding, OTLP
// specification "OTLP/HTTP") on loopback that keeps every span it is sent.
type otlpReceiver struct {
	URL string // http://127.0.0.1:port, for OTEL_EXPORTER_OTLP_ENDPOINT

	mu       sync.Mutex
	spans    []otlpSpan
	requests int
	bad      []string // requests it could not decode, for the failure message
}

func newOTLPReceiver(t testing.TB) *otlpReceiver {
	t.Helper()
	or := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(or.serve))
	t.Cleanup(srv.Close)
	or.URL = srv.URL
	return or
}

func (or *otlpReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var req coltracepb.ExportTraceServiceRequest
	switch {
	case err != nil:
	case r.Method != http.MethodPost || r.URL.Path != otlpTracesPath:
		err = fmt.Errorf("%s %s", r.Method, r.URL.Path)
	case !strings.HasPrefix(r.Header.Get("Content-Type"), otlpProtobufType):
		err = fmt.Errorf("content-type %q", r.Header.Get("Content-Type"))
	case r.Header.Get("Content-Encoding") != "":
		err = fmt.Errorf("content-encoding %q (the exporter compresses by default only when asked)", r.Header.Get("Content-Encoding"))
	default:
		err = proto.Unmarshal(body, &req)
	}
	or.mu.Lock()
	defer or.mu.Unlock()
	or.requests++
	if err != nil {
		or.bad = append(or.bad, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := otlpSpan{
					TraceID:      hex.EncodeToString(sp.GetTraceId()),
					SpanID:       hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID: hex.EncodeToString(sp.GetParentSpanId()),
					Name:         sp.GetName(),
					Kind:         sp.GetKind(),
					Status:       sp.GetStatus().GetCode(),
					Attrs:        map[string]*commonpb.AnyValue{},
					Service:      service,
				}
				for _, kv := range sp.GetAttributes() {
					s.Attrs[kv.GetKey()] = kv.GetValue()
				}
				or.spans = append(or.spans, s)
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", otlpProtobufType)
	_, _ = w.Write(out)
}

// Spans returns a copy of the spans received so far.
func (or *otlpReceiver) Spans() []otlpSpan {
	or.mu.Lock()
	defer or.mu.Unlock()
	return slices.Clone(or.spans)
}

func (or *otlpReceiver) Bad() []string {
	or.mu.Lock()
	defer or.mu.Unlock()
	return slices.Clone(or.bad)
}

// failFirst answers 500 to the first request of each webhook-id, 200 after.
func failFirst() behaviour {
	return func(r *request) answer {
		if r.Nth == 1 {
			return answer{Status: http.StatusInternalServerError}
		}
		return answer{Status: http.StatusOK}
	}
}

// tracedEvent is one event the test publishes with its own trace context.
type tracedEvent struct {
	ev       cloudEvent
	traceID  string // 32 hex
	parentID string // 16 hex: the producer's span
	binary   bool   // binary content mode (ce_traceparent header), else structured
}

func (te tracedEvent) traceparent() string { return "00-" + te.traceID + "-" + te.parentID + "-01" }

// record encodes te for topic with its traceparent as the CloudEvents
// distributed tracing extension: the traceparent attribute in structured
// mode, the ce_traceparent header in binary mode (Kafka protocol binding §3).
func (te tracedEvent) record(topic string) *kgo.Record {
	key := []byte(te.ev.ID)
	if te.binary {
		r := te.ev.binary(topic, key)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "ce_traceparent", Value: []byte(te.traceparent())})
		return r
	}
	r := te.ev.structured(topic, key)
	var m map[string]any
	if err := json.Unmarshal(r.Value, &m); err != nil {
		panic(err) // test data only
	}
	m["traceparent"] = te.traceparent()
	v, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	r.Value = v
	return r
}

func randomHex(n int) string {
	b := make([]byte, n)
	for {
		_, _ = rand.Read(b)                                 // never fails (Go 1.24+)
		if strings.Trim(hex.EncodeToString(b), "0") != "" { // all-zero IDs are invalid (Trace Context §3.2.2)
			return hex.EncodeToString(b)
		}
	}
}

// TestAttemptSpans: with OTEL_EXPORTER_OTLP_ENDPOINT set, every attempt is
// exactly one client span, a child of the event's traceparent (structured
// and binary content mode), carrying the endpoint ID, the attempt number and
// the outcome (the same as ClickHouse's row of that attempt), and the
// endpoint's request carries a traceparent whose parent is that span.
// Endpoint "flaky" fails every first attempt, so retries make second spans.
func TestAttemptSpans(t *testing.T) {
	const events = 6
	otlp := newOTLPReceiver(t)
	h := newHarness(t, config{Env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=200", // ms: export batches promptly; the test polls anyway
	}})
	flaky := newReceiver(t, "flaky", failFirst())
	steady := newReceiver(t, "steady", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "flaky", URL: flaky.URL, Secret: flaky.Secret, Events: []string{"traced.*"}})
	h.addEndpoint(endpoint{ID: "steady", URL: steady.URL, Secret: steady.Secret, Events: []string{"traced.*"}})
	p := h.start("traces-1")

	evs := make([]tracedEvent, events)
	byTrace := map[string]tracedEvent{}
	var recs []*kgo.Record
	for i := range evs {
		id := fmt.Sprintf("traced-%d", i)
		evs[i] = tracedEvent{
			ev:       cloudEvent{ID: id, Source: "urn:e2e:traces", Type: "traced.thing", Time: time.Now(), Data: eventData{Event: id, N: i}},
			traceID:  randomHex(16),
			parentID: randomHex(8),
			binary:   i%2 == 1,
		}
		byTrace[evs[i].traceID] = evs[i]
		recs = append(recs, evs[i].record(h.topic("events")))
	}
	h.produce(recs...)

	// 2 attempts per event at flaky, 1 at steady.
	const want = events * 3
	rows := h.waitAttempts(90*time.Second, "every attempt in ClickHouse", func(rows []attemptRow) (bool, string) {
		return len(rows) >= want, fmt.Sprintf("%d of %d attempt rows", len(rows), want)
	})
	eventually(t, 60*time.Second, "a span for every attempt", func() (bool, string) {
		n := 0
		for _, s := range otlp.Spans() {
			if _, ok := byTrace[s.TraceID]; ok && s.Name == attemptSpanName {
				n++
			}
		}
		return n >= want, fmt.Sprintf("%d of %d attempt spans (undecodable export requests: %v)", n, want, otlp.Bad())
	})
	// A clean stop flushes the batcher: whatever else was recorded is
	// exported now, so the count below is final.
	p.stop()
	if bad := otlp.Bad(); len(bad) > 0 {
		t.Errorf("OTLP export requests the receiver could not decode: %v", bad)
	}

	type key struct {
		event, endpoint string
		attempt         int64
	}
	spans := map[key][]otlpSpan{}
	for _, s := range otlp.Spans() {
		te, ok := byTrace[s.TraceID]
		if !ok {
			if s.Name == attemptSpanName {
				t.Errorf("attempt span %s in trace %s, which no event of this test started (parent %s, endpoint %q)",
					s.SpanID, s.TraceID, s.ParentSpanID, s.str(attrEndpointID))
			}
			continue
		}
		if s.Name != attemptSpanName {
			t.Errorf("%s: unexpected span %q in the event's trace", te.ev.ID, s.Name)
			continue
		}
		k := key{te.ev.ID, s.str(attrEndpointID), s.num(attrAttempt)}
		spans[k] = append(spans[k], s)
		if s.ParentSpanID != te.parentID {
			t.Errorf("%s %s attempt %d: span parent %q, want the event's traceparent span %s (binary mode %v)",
				te.ev.ID, k.endpoint, k.attempt, s.ParentSpanID, te.parentID, te.binary)
		}
		if s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("%s %s attempt %d: span kind %v, want CLIENT", te.ev.ID, k.endpoint, k.attempt, s.Kind)
		}
		if s.Service != "hookrelay" {
			t.Errorf("%s: resource service.name %q, want hookrelay", te.ev.ID, s.Service)
		}
	}
	if len(spans) != want {
		t.Errorf("%d distinct (event, endpoint, attempt) spans, want %d: %v", len(spans), want, sortedSpanKeys(spans))
	}

	rowOf := map[key]attemptRow{}
	for _, r := range rows {
		rowOf[key{r.EventID, r.EndpointID, int64(r.AttemptNumber)}] = r
	}
	reqsOf := func(rc *receiver) map[string][]request { return byEvent(t, rc.Requests()) }
	reqs := map[string]map[string][]request{"flaky": reqsOf(flaky), "steady": reqsOf(steady)}
	for _, te := range evs {
		for _, ep := range []struct {
			id       string
			attempts int
			outcomes []string
			status   []int64
		}{
			{"flaky", 2, []string{"retry_scheduled", "delivered"}, []int64{500, 200}},
			{"steady", 1, []string{"delivered"}, []int64{200}},
		} {
			got := reqs[ep.id][te.ev.ID]
			if len(got) != ep.attempts {
				t.Errorf("%s at %s: %d requests, want %d", te.ev.ID, ep.id, len(got), ep.attempts)
				continue
			}
			for n := 1; n <= ep.attempts; n++ {
				k := key{te.ev.ID, ep.id, int64(n)}
				ss := spans[k]
				if len(ss) != 1 {
					t.Errorf("%s at %s attempt %d: %d spans, want exactly 1", te.ev.ID, ep.id, n, len(ss))
					continue
				}
				s := ss[0]
				if o := s.str(attrOutcome); o != ep.outcomes[n-1] {
					t.Errorf("%s at %s attempt %d: span outcome %q, want %q", te.ev.ID, ep.id, n, o, ep.outcomes[n-1])
				}
				if row, ok := rowOf[k]; !ok {
					t.Errorf("%s at %s attempt %d: no attempt row in ClickHouse", te.ev.ID, ep.id, n)
				} else if row.Outcome != s.str(attrOutcome) {
					t.Errorf("%s at %s attempt %d: span outcome %q, ClickHouse row outcome %q", te.ev.ID, ep.id, n, s.str(attrOutcome), row.Outcome)
				}
				if st := s.num(attrHTTPStatus); st != ep.status[n-1] {
					t.Errorf("%s at %s attempt %d: span %s %d, want %d", te.ev.ID, ep.id, n, attrHTTPStatus, st, ep.status[n-1])
				}
				wantStatus := tracepb.Status_STATUS_CODE_UNSET
				if ep.outcomes[n-1] != "delivered" {
					wantStatus = tracepb.Status_STATUS_CODE_ERROR
				}
				if s.Status != wantStatus {
					t.Errorf("%s at %s attempt %d: span status %v, want %v", te.ev.ID, ep.id, n, s.Status, wantStatus)
				}
				r := got[n-1] // the n-th request of this webhook-id is attempt n
				if s.str(attrWebhookID) != r.WebhookID {
					t.Errorf("%s at %s attempt %d: span webhook_id %q, request webhook-id %q", te.ev.ID, ep.id, n, s.str(attrWebhookID), r.WebhookID)
				}
				wantTP := "00-" + te.traceID + "-" + s.SpanID + "-01"
				if tp := r.Header.Get("traceparent"); tp != wantTP {
					t.Errorf("%s at %s attempt %d: request traceparent %q, want %q (the attempt span's child)", te.ev.ID, ep.id, n, tp, wantTP)
				}
			}
		}
	}
	t.Logf("%d events (%d binary mode), %d attempt spans checked against %d receiver requests and %d ClickHouse rows",
		events, events/2, len(spans), flaky.Count()+steady.Count(), len(rows))
}

func sortedSpanKeys[K comparable, V any](m map[K]V) []string {
	var out []string
	for k := range m {
		out = append(out, fmt.Sprint(k))
	}
	slices.Sort(out)
	return out
}
