package faults

// The load generator and the verifying receivers.
//
// Ten endpoints. ep0…ep7 have no tenant and form a ring: ep<i> subscribes
// to u.<i> and u.<i+1 mod 8>, so an event of type u.<k> goes to ep<k> and
// ep<k-1 mod 8>. ep8 and ep9 belong to tenant "acme" and subscribe to a.*;
// every fifth event is an a.* event of tenant acme. So every valid event goes
// to exactly two of the ten endpoints.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	numEndpoints = 10
	ringSize     = 8
	tenant       = "acme"
)

// endpointIDs are ep0…ep9.
var endpointIDs = func() []string {
	ids := make([]string, numEndpoints)
	for i := range ids {
		ids[i] = fmt.Sprintf("ep%d", i)
	}
	return ids
}()

// request is one request a receiver saw.
type request struct {
	Arrived   time.Time
	WebhookID string
	Event     string // data.event of the body; "" if the body is not ours
	Body      []byte
	VerifyErr error
}

// receiver answers 200 to every request and records it, verified with the
// Standard Webhooks library against the endpoint's secret.
type receiver struct {
	Endpoint string
	Secret   string
	Addr     string // where it listens
	verify   *standardwebhooks.Webhook
	srv      *http.Server

	mu   sync.Mutex
	reqs []request
}

func newReceiver(t testing.TB, endpoint string) *receiver {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(b)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{Endpoint: endpoint, Secret: secret, Addr: ln.Addr().String(), verify: wh}
	rc.srv = &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { // owner: rc; the cleanup waits for it
		defer close(served)
		_ = rc.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = rc.srv.Close()
		<-served
	})
	return rc
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	arrived := time.Now()
	body, err := io.ReadAll(io.LimitReader(hr.Body, 4<<20))
	if err != nil {
		return // the connection broke: hookrelay saw an error, not an answer
	}
	r := request{Arrived: arrived, WebhookID: hr.Header.Get("webhook-id"), Body: body,
		VerifyErr: rc.verify.Verify(body, hr.Header)}
	var b struct {
		Data struct {
			Event string `json:"event"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &b) == nil {
		r.Event = b.Data.Event
	}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, r)
	rc.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// Requests returns a copy of the requests seen so far.
func (rc *receiver) Requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.reqs...)
}

// Count is the number of requests seen so far.
func (rc *receiver) Count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

// event is one valid event the load generator produced and the broker acked.
type event struct {
	ID      string
	Type    string
	Tenant  string
	Targets [2]string
}

// malformed is one malformed record the broker acked.
type malformed struct {
	Kind      string
	Partition int32
	Offset    int64
}

// malformedKinds are the kinds of bad input the generator cycles through
// (10 % of the records when enabled).
var malformedKinds = []string{
	"bad_json", "missing_attribute", "oversize", "bad_base64", "invalid_utf8",
	"binary_duplicate_header", "binary_non_utf8_header", "binary_missing_attribute",
}

// loadGen produces a steady rate of events to the events topic.
type loadGen struct {
	cl        *kgo.Client
	topic     string
	runID     string
	rate      int
	malformed bool // every tenth record malformed

	mu       sync.Mutex
	valid    []event
	bad      []malformed
	errs     int
	firstErr error
	started  time.Time
	stopped  time.Time

	stopc chan struct{}
	done  chan struct{}
}

// startLoad starts producing rate records per second with cl to topic.
func startLoad(cl *kgo.Client, topic string, rate int, withMalformed bool) *loadGen {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	g := &loadGen{cl: cl, topic: topic, runID: fmt.Sprintf("%x", b), rate: rate, malformed: withMalformed,
		stopc: make(chan struct{}), done: make(chan struct{}), started: time.Now()}
	go g.loop() // owner: g; stop waits for it
	return g
}

func (g *loadGen) loop() {
	defer close(g.done)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	sent := 0
	for {
		select {
		case <-g.stopc:
			return
		case <-tick.C:
		}
		due := int(time.Since(g.started).Seconds() * float64(g.rate))
		for ; sent < due; sent++ {
			g.produce(sent)
		}
	}
}

func (g *loadGen) produce(n int) {
	if g.malformed && n%10 == 9 {
		kind := malformedKinds[(n/10)%len(malformedKinds)]
		rec := malformedRecord(g.topic, kind, fmt.Sprintf("%s-bad-%07d", g.runID, n))
		g.cl.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.noteErr(err) {
				g.bad = append(g.bad, malformed{Kind: kind, Partition: r.Partition, Offset: r.Offset})
			}
		})
		return
	}
	ev := event{ID: fmt.Sprintf("%s-%07d", g.runID, n)}
	if n%5 == 4 {
		ev.Type, ev.Tenant = fmt.Sprintf("a.kind%d", n%3), tenant
		ev.Targets = [2]string{"ep8", "ep9"}
	} else {
		k := n % ringSize
		ev.Type = fmt.Sprintf("u.%d", k)
		ev.Targets = [2]string{fmt.Sprintf("ep%d", k), fmt.Sprintf("ep%d", (k+ringSize-1)%ringSize)}
	}
	m := map[string]any{
		"specversion": "1.0", "id": ev.ID, "source": "hookrelay-faults", "type": ev.Type,
		"datacontenttype": "application/json", "time": time.Now().UTC().Format(time.RFC3339Nano),
		"data": map[string]any{"event": ev.ID, "n": n},
	}
	if ev.Tenant != "" {
		m["tenantid"] = ev.Tenant
	}
	v, _ := json.Marshal(m)
	rec := &kgo.Record{Topic: g.topic, Key: []byte(ev.ID), Value: v, Headers: []kgo.RecordHeader{
		{Key: "content-type", Value: []byte("application/cloudevents+json; charset=utf-8")}}}
	g.cl.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.noteErr(err) {
			g.valid = append(g.valid, ev)
		}
	})
}

// noteErr counts a produce error (g.mu held) and reports whether err is nil.
func (g *loadGen) noteErr(err error) bool {
	if err == nil {
		return true
	}
	g.errs++
	if g.firstErr == nil {
		g.firstErr = err
	}
	return false
}

// stop stops producing and waits until every record produced is acked or
// failed.
func (g *loadGen) stop(t testing.TB) {
	select {
	case <-g.stopc:
		return
	default:
	}
	close(g.stopc)
	<-g.done
	g.mu.Lock()
	g.stopped = time.Now()
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := g.cl.Flush(ctx); err != nil {
		t.Errorf("faults: flushing the load generator: %v", err)
	}
}

// snapshot returns what was acked so far and the produce errors.
func (g *loadGen) snapshot() (valid []event, bad []malformed, errs int, firstErr error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]event(nil), g.valid...), append([]malformed(nil), g.bad...), g.errs, g.firstErr
}

// malformedRecord returns one record of the given kind of bad input.
func malformedRecord(topic, kind, id string) *kgo.Record {
	structured := []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}
	binary := func(extra ...kgo.RecordHeader) []kgo.RecordHeader {
		hs := []kgo.RecordHeader{
			{Key: "ce_specversion", Value: []byte("1.0")},
			{Key: "ce_id", Value: []byte(id)},
			{Key: "ce_source", Value: []byte("hookrelay-faults")},
			{Key: "ce_type", Value: []byte("u.0")},
			{Key: "content-type", Value: []byte("application/json")},
		}
		return append(hs, extra...)
	}
	rec := &kgo.Record{Topic: topic, Key: []byte(id)}
	switch kind {
	case "bad_json":
		rec.Headers, rec.Value = structured, []byte(`{"specversion":"1.0","id":"`+id+`","source":"s","type":"u.0","data":{`)
	case "missing_attribute":
		rec.Headers, rec.Value = structured, []byte(`{"specversion":"1.0","id":"`+id+`","type":"u.0","data":{}}`)
	case "oversize":
		rec.Headers = structured
		rec.Value = []byte(`{"specversion":"1.0","id":"` + id + `","source":"s","type":"u.0","data":{"pad":"` +
			strings.Repeat("x", 300<<10) + `"}}`)
	case "bad_base64":
		rec.Headers, rec.Value = structured, []byte(`{"specversion":"1.0","id":"`+id+`","source":"s","type":"u.0","data_base64":"%%%not base64%%%"}`)
	case "invalid_utf8":
		rec.Headers, rec.Value = structured, []byte("{\"specversion\":\"1.0\",\"id\":\""+id+"\",\"source\":\"s\",\"type\":\"u.\xff\xfe\",\"data\":{}}")
	case "binary_duplicate_header":
		rec.Headers, rec.Value = binary(kgo.RecordHeader{Key: "ce_id", Value: []byte(id + "-again")}), []byte(`{}`)
	case "binary_non_utf8_header":
		rec.Headers, rec.Value = binary(kgo.RecordHeader{Key: "ce_subject", Value: []byte("\xff\xfe")}), []byte(`{}`)
	case "binary_missing_attribute":
		hs := binary()
		rec.Headers, rec.Value = append(hs[:2:2], hs[3:]...), []byte(`{}`) // no ce_source
	default:
		panic("unknown malformed kind " + kind)
	}
	return rec
}
