package e2e

// Acceptance tests of the delivery path (issue 3) against the real stack and
// the real hookrelay binary.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// matches is the subscription rule, computed by the test from its own
// filters: "*" matches every type, "p.*" every type starting with "p.", else
// the exact type; and the tenants must be equal ("" only matches "").
func matches(ep endpoint, ev cloudEvent) bool {
	if ep.Tenant != ev.Tenant {
		return false
	}
	for _, f := range ep.Events {
		switch {
		case f == "*", f == ev.Type:
			return true
		case strings.HasSuffix(f, ".*") && strings.HasPrefix(ev.Type, strings.TrimSuffix(f, "*")):
			return true
		}
	}
	return false
}

// eventData is the data of every test event: it names the event, so a body
// can be traced back to the event that made it.
type eventData struct {
	Event string `json:"event"`
	N     int    `json:"n"`
	Note  string `json:"note"`
}

// bodyOf decodes a Standard Webhooks body {"type","timestamp","data"}.
type webhookBody struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// TestFanoutExactlyOnce: 1,000 events of mixed types, tenants and content
// modes to 20 endpoints with different filters. Every expected (event,
// endpoint) pair arrives exactly once and nothing else does; every signature
// verifies with the third-party verifier and fails on a tampered body; the
// attempts table holds exactly one row per request the receivers saw.
func TestFanoutExactlyOnce(t *testing.T) {
	start := time.Now()
	h := newHarness(t, config{})

	specs := []struct {
		id     string
		events []string
		tenant string
	}{
		{"ep01", []string{"invoice.paid"}, ""},
		{"ep02", []string{"invoice.*"}, ""},
		{"ep03", []string{"*"}, ""},
		{"ep04", []string{"*"}, "acme"},
		{"ep05", []string{"invoice.*"}, "acme"},
		{"ep06", []string{"customer.created", "order.*"}, "globex"},
		{"ep07", []string{"nomatch.never"}, ""}, // receives nothing: no such type
		{"ep08", []string{"*"}, "initech"},      // receives nothing: no such tenant
		{"ep09", []string{"order.shipped"}, ""},
		{"ep10", []string{"customer.*"}, ""},
		{"ep11", []string{"invoice.paid", "invoice.voided"}, "acme"},
		{"ep12", []string{"order.*"}, ""},
		{"ep13", []string{"ping"}, "globex"},
		{"ep14", []string{"invoice.*"}, "globex"},
		{"ep15", []string{"invoice"}, ""}, // receives nothing: "invoice" is not "invoice.*"
		{"ep16", []string{"customer.deleted"}, "acme"},
		{"ep17", []string{"*"}, "globex"},
		{"ep18", []string{"order.cancelled", "ping"}, ""},
		{"ep19", []string{"customer.*"}, "acme"},
		{"ep20", []string{"order.*"}, "initech"}, // receives nothing: no such tenant
	}
	eps := make([]endpoint, len(specs))
	recv := make(map[string]*receiver, len(specs))
	for i, s := range specs {
		rc := newReceiver(t, s.id, always(http.StatusOK))
		recv[s.id] = rc
		eps[i] = endpoint{ID: s.id, URL: rc.URL, Secret: rc.Secret, Events: s.events, Tenant: s.tenant, Rate: 1000, MaxInFlight: 8}
		h.addEndpoint(eps[i])
	}

	types := []string{"invoice.paid", "invoice.created", "invoice.voided", "customer.created",
		"customer.deleted", "order.shipped", "order.cancelled", "ping"}
	tenants := []string{"", "acme", "globex"}
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Now().UTC().Truncate(time.Second)
	evs := make([]cloudEvent, 1000)
	byID := make(map[string]cloudEvent, len(evs))
	for i := range evs {
		id := fmt.Sprintf("evt-%04d", i)
		evs[i] = cloudEvent{
			ID:     id,
			Source: "urn:hookrelay:e2e:fanout",
			Type:   types[rng.IntN(len(types))],
			Tenant: tenants[rng.IntN(len(tenants))],
			Time:   base.Add(time.Duration(i) * time.Millisecond),
			Data:   eventData{Event: id, N: i, Note: "<&> ünïcode"},
		}
		byID[id] = evs[i]
	}
	// expected[endpoint] = set of event IDs it must receive.
	expected := make(map[string]map[string]bool)
	total := 0
	for _, ep := range eps {
		expected[ep.ID] = map[string]bool{}
		for _, ev := range evs {
			if matches(ep, ev) {
				expected[ep.ID][ev.ID] = true
				total++
			}
		}
	}
	for _, id := range []string{"ep07", "ep08", "ep15", "ep20"} {
		if len(expected[id]) != 0 {
			t.Fatalf("test bug: %s should expect nothing, expects %d", id, len(expected[id]))
		}
	}
	t.Logf("%d events, %d expected deliveries", len(evs), total)

	h.start("fanout-1")
	recs := make([]*kgo.Record, len(evs))
	for i, ev := range evs {
		if i%2 == 0 {
			recs[i] = ev.structured(h.topic("events"), []byte(ev.ID))
		} else {
			recs[i] = ev.binary(h.topic("events"), []byte(ev.ID))
		}
	}
	produced := time.Now()
	h.produce(recs...)

	received := func() int {
		n := 0
		for _, rc := range recv {
			n += rc.Count()
		}
		return n
	}
	allArrived := waitFor(t, 90*time.Second, "every expected delivery", func() (bool, string) {
		n := received()
		return n >= total, fmt.Sprintf("%d of %d requests", n, total)
	})
	deliveredIn := time.Since(produced)
	if !allArrived {
		// Say where the missing ones stopped: never fanned out, or fanned
		// out and never sent.
		fanned := h.countByKey(h.topic("deliveries"))
		for _, ep := range eps {
			if got := recv[ep.ID].Distinct(); got != len(expected[ep.ID]) {
				t.Logf("%s (%v, tenant %q): expected %d, deliveries topic holds %d, receiver saw %d distinct",
					ep.ID, ep.Events, ep.Tenant, len(expected[ep.ID]), fanned[ep.ID], got)
			}
		}
	}

	// The attempts table: exactly one row per request the receivers saw.
	var rows []attemptRow
	waitFor(t, 60*time.Second, "one attempt row per request", func() (bool, string) {
		rows = h.attempts()
		n := received()
		return len(rows) >= n, fmt.Sprintf("%d rows, %d requests", len(rows), n)
	})
	t.Logf("delivered %d in %v; attempt rows complete %v after produce", total, deliveredIn.Round(time.Millisecond), time.Since(produced).Round(time.Millisecond))

	// Receivers: exactly the expected pairs, once each, with valid bodies
	// and signatures.
	webhookIDOf := map[string]string{} // event ID -> webhook-id
	eventOf := map[string]string{}     // webhook-id -> event ID
	seen := map[[2]string]int{}        // (endpoint, webhook-id) -> requests
	var bad []string
	for _, id := range sortedKeys(recv) {
		rc := recv[id]
		for _, r := range rc.Requests() {
			var b webhookBody
			var d eventData
			if err := json.Unmarshal(r.Body, &b); err != nil || json.Unmarshal(b.Data, &d) != nil {
				bad = append(bad, fmt.Sprintf("%s: body not a webhook body: %q", id, r.Body))
				continue
			}
			ev, ok := byID[d.Event]
			if !ok {
				bad = append(bad, fmt.Sprintf("%s: body of unknown event %q", id, d.Event))
				continue
			}
			seen[[2]string{id, r.WebhookID}]++
			if !expected[id][ev.ID] {
				bad = append(bad, fmt.Sprintf("%s received %s (type %s, tenant %q) it does not subscribe to", id, ev.ID, ev.Type, ev.Tenant))
			}
			if prev, ok := webhookIDOf[ev.ID]; ok && prev != r.WebhookID {
				bad = append(bad, fmt.Sprintf("%s: event %s has webhook-id %s here and %s elsewhere", id, ev.ID, r.WebhookID, prev))
			}
			webhookIDOf[ev.ID] = r.WebhookID
			if prev, ok := eventOf[r.WebhookID]; ok && prev != ev.ID {
				bad = append(bad, fmt.Sprintf("webhook-id %s used by events %s and %s", r.WebhookID, prev, ev.ID))
			}
			eventOf[r.WebhookID] = ev.ID
			if r.WebhookID == "" || strings.Contains(r.WebhookID, ".") {
				bad = append(bad, fmt.Sprintf("%s: bad webhook-id %q", id, r.WebhookID))
			}
			if b.Type != ev.Type {
				bad = append(bad, fmt.Sprintf("%s: event %s body type %q, want %q", id, ev.ID, b.Type, ev.Type))
			}
			if ts, err := time.Parse(time.RFC3339Nano, b.Timestamp); err != nil || !ts.Equal(ev.Time) {
				bad = append(bad, fmt.Sprintf("%s: event %s body timestamp %q, want %s", id, ev.ID, b.Timestamp, ev.Time.Format(time.RFC3339Nano)))
			}
			want, _ := json.Marshal(ev.Data)
			if !jsonEqual(b.Data, want) {
				bad = append(bad, fmt.Sprintf("%s: event %s body data %s, want %s", id, ev.ID, b.Data, want))
			}
			if r.VerifyErr != nil {
				bad = append(bad, fmt.Sprintf("%s: event %s: signature does not verify: %v", id, ev.ID, r.VerifyErr))
			}
			tampered := bytes.Clone(r.Body)
			tampered[len(tampered)/2] ^= 0x01
			if err := rc.verify.VerifyIgnoringTimestamp(tampered, r.Header); err == nil {
				bad = append(bad, fmt.Sprintf("%s: event %s: a tampered body verifies", id, ev.ID))
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				bad = append(bad, fmt.Sprintf("%s: content-type %q", id, ct))
			}
			if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, "hookrelay/") {
				bad = append(bad, fmt.Sprintf("%s: user-agent %q", id, ua))
			}
			// Signed for this attempt: after the event was produced, before
			// the request arrived (unix seconds; one clock). An order, not
			// a delay bound a loaded machine can miss.
			if ts, err := strconv.ParseInt(r.Timestamp, 10, 64); err != nil || ts < produced.Unix() || ts > r.Arrived.Unix() {
				bad = append(bad, fmt.Sprintf("%s: webhook-timestamp %q not between the produce (%d) and the arrival (%d)", id, r.Timestamp, produced.Unix(), r.Arrived.Unix()))
			}
		}
	}
	// A signature made with one endpoint's secret must not verify with another's.
	if r1 := recv["ep03"].Requests(); len(r1) > 0 {
		if err := recv["ep02"].verify.VerifyIgnoringTimestamp(r1[0].Body, r1[0].Header); err == nil {
			bad = append(bad, "ep03's request verifies with ep02's secret")
		}
	}
	var missing, dup []string
	for _, ep := range eps {
		for evID := range expected[ep.ID] {
			switch n := seen[[2]string{ep.ID, webhookIDOf[evID]}]; {
			case webhookIDOf[evID] == "" || n == 0:
				missing = append(missing, ep.ID+"/"+evID)
			case n > 1:
				dup = append(dup, fmt.Sprintf("%s/%s×%d", ep.ID, evID, n))
			}
		}
	}
	slices.Sort(missing)
	slices.Sort(dup)
	if len(missing) > 0 {
		t.Errorf("%d expected deliveries missing: %s", len(missing), firstN(missing, 10))
	}
	if len(dup) > 0 {
		t.Errorf("%d deliveries arrived more than once: %s", len(dup), firstN(dup, 10))
	}
	for _, id := range []string{"ep07", "ep08", "ep15", "ep20"} {
		if n := recv[id].Count(); n != 0 {
			t.Errorf("%s must receive nothing, received %d", id, n)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d bad requests:\n  %s", len(bad), strings.Join(bad[:min(len(bad), 15)], "\n  "))
	}

	// Attempt rows: one per request, matching it.
	n := received()
	if len(rows) != n {
		t.Errorf("attempts table holds %d rows (FINAL), receivers saw %d requests", len(rows), n)
	}
	rowsPer := map[[2]string]int{}
	for _, r := range rows {
		rowsPer[[2]string{r.EndpointID, r.WebhookID}]++
		ev, ok := byID[r.EventID]
		switch {
		case !ok:
			t.Errorf("attempt row for unknown event %q: %+v", r.EventID, r)
		case r.Outcome != "delivered" || r.HTTPStatus != 200 || r.AttemptNumber != 1:
			t.Errorf("attempt row %s/%s: outcome %s, status %d, attempt %d; want delivered, 200, 1", r.EndpointID, r.EventID, r.Outcome, r.HTTPStatus, r.AttemptNumber)
		case r.EventType != ev.Type || r.Tenant != ev.Tenant || r.WebhookID != webhookIDOf[ev.ID]:
			t.Errorf("attempt row %s/%s: type %q tenant %q webhook-id %q; want %q %q %q", r.EndpointID, r.EventID, r.EventType, r.Tenant, r.WebhookID, ev.Type, ev.Tenant, webhookIDOf[ev.ID])
		}
	}
	var mismatch []string
	for k, c := range seen {
		if rowsPer[k] != c {
			mismatch = append(mismatch, fmt.Sprintf("%s/%s: %d requests, %d rows", k[0], k[1], c, rowsPer[k]))
		}
	}
	for k, c := range rowsPer {
		if _, ok := seen[k]; !ok {
			mismatch = append(mismatch, fmt.Sprintf("%s/%s: 0 requests, %d rows", k[0], k[1], c))
		}
	}
	slices.Sort(mismatch)
	if len(mismatch) > 0 {
		t.Errorf("attempt rows do not match requests: %s", firstN(mismatch, 10))
	}
	t.Logf("TestFanoutExactlyOnce: %d deliveries to %d endpoints verified in %v (whole test %v)", total, len(eps), deliveredIn.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// partitionOf is the partition franz-go's default key partitioner (murmur2,
// as Kafka's) gives key among n partitions: where the fan-out puts an
// endpoint's deliveries.
func partitionOf(key string, n int) int {
	return kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: []byte(key)}, n)
}

// TestHungEndpointDoesNotBlockPartition: a hung endpoint whose events come
// first shares a deliveries partition with fast endpoints. Every fast
// delivery completes while the hung receiver still holds all its requests
// open (an order, not a latency bound: the latencies are logged), and the
// hung endpoint never has more than max_in_flight requests open (and
// reaches it).
func TestHungEndpointDoesNotBlockPartition(t *testing.T) {
	const (
		partitions  = 4
		hungInFl    = 3
		hungEvents  = 30
		fastEvents  = 300 // each to every fast endpoint
		fastPerTick = 10
		tick        = 50 * time.Millisecond
		timeout     = 60 * time.Second // the hung endpoint's request timeout (the most an endpoint may have): its requests hang this long
	)
	start := time.Now()
	h := newHarness(t, config{Partitions: partitions, RetrySchedule: "30s"})

	hungID := "hung-0"
	part := partitionOf(hungID, partitions)
	var fastIDs []string
	for i := 0; len(fastIDs) < 3; i++ {
		if id := fmt.Sprintf("fast-%d", i); partitionOf(id, partitions) == part {
			fastIDs = append(fastIDs, id)
		}
	}
	t.Logf("partition %d holds %s and %v", part, hungID, fastIDs)

	hung := newReceiver(t, hungID, hang())
	defer hung.Release() // also on failure: hookrelay's graceful stop waits for requests in flight
	h.addEndpoint(endpoint{ID: hungID, URL: hung.URL, Secret: hung.Secret, Events: []string{"slow.*"},
		Rate: 1000, MaxInFlight: hungInFl, Timeout: timeout})
	fast := map[string]*receiver{}
	for _, id := range fastIDs {
		fast[id] = newReceiver(t, id, always(http.StatusOK))
		h.addEndpoint(endpoint{ID: id, URL: fast[id].URL, Secret: fast[id].Secret, Events: []string{"fast.*"},
			Rate: 1000, MaxInFlight: 4, Timeout: timeout})
	}
	h.start("hung-1")

	var hungEvs []cloudEvent
	for i := range hungEvents {
		hungEvs = append(hungEvs, cloudEvent{ID: fmt.Sprintf("slow-%03d", i), Source: "urn:e2e:hung", Type: "slow.thing",
			Time: time.Now(), Data: eventData{Event: fmt.Sprintf("slow-%03d", i), N: i}})
	}
	h.produce(h.events(hungEvs)...)
	eventually(t, 30*time.Second, "the hung endpoint to hold max_in_flight requests", func() (bool, string) {
		return hung.Open() == hungInFl, fmt.Sprintf("%d open", hung.Open())
	})
	hungSince := time.Now()

	// Fast events, paced as a steady stream; latency is produce to arrival.
	producedAt := map[string]time.Time{}
	ticker := time.NewTicker(tick)
	for i := 0; i < fastEvents; i += fastPerTick {
		var batch []cloudEvent
		for j := i; j < i+fastPerTick; j++ {
			id := fmt.Sprintf("fast-%03d", j)
			batch = append(batch, cloudEvent{ID: id, Source: "urn:e2e:hung", Type: "fast.thing", Time: time.Now(), Data: eventData{Event: id, N: j}})
		}
		now := time.Now()
		for _, e := range batch {
			producedAt[e.ID] = now
		}
		h.produce(h.events(batch)...)
		<-ticker.C
	}
	ticker.Stop()
	eventually(t, timeout-10*time.Second, "every fast delivery while the hung requests hang", func() (bool, string) {
		var s []string
		done := true
		for _, id := range fastIDs {
			n := fast[id].Distinct()
			done = done && n >= fastEvents
			s = append(s, fmt.Sprintf("%s %d/%d", id, n, fastEvents))
		}
		return done, strings.Join(s, ", ")
	})
	fastDone := time.Now()
	openAtEnd := hung.Open()

	var lat []time.Duration
	for _, id := range fastIDs {
		for _, r := range fast[id].Requests() {
			var b webhookBody
			var d eventData
			if json.Unmarshal(r.Body, &b) != nil || json.Unmarshal(b.Data, &d) != nil {
				t.Errorf("%s: bad body %q", id, r.Body)
				continue
			}
			lat = append(lat, r.Arrived.Sub(producedAt[d.Event]))
			if r.VerifyErr != nil {
				t.Errorf("%s: signature does not verify: %v", id, r.VerifyErr)
			}
		}
	}
	p50, p99, pmax := percentile(lat, 50), percentile(lat, 99), percentile(lat, 100)
	t.Logf("fast deliveries: %d, latency p50 %v p99 %v max %v (hung endpoint request timeout %v)", len(lat),
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), pmax.Round(time.Millisecond), timeout)

	hungReqs := hung.Requests()
	answered := 0
	for _, r := range hungReqs {
		if !r.Answered.IsZero() {
			answered++
		}
	}
	if openAtEnd != hungInFl || answered != 0 {
		t.Errorf("the hung receiver did not hold its requests for the whole test: %d open at the end, %d answered", openAtEnd, answered)
	}
	if peak := hung.Peak(); peak != hungInFl {
		t.Errorf("hung endpoint peak concurrency %d, want exactly max_in_flight %d", peak, hungInFl)
	}
	if n := len(hungReqs); n != hungInFl {
		t.Errorf("hung endpoint got %d requests, want %d (its max_in_flight) while they hang", n, hungInFl)
	}
	t.Logf("fast deliveries done %v after the hung endpoint filled its slots", fastDone.Sub(hungSince).Round(time.Millisecond))
	t.Logf("TestHungEndpointDoesNotBlockPartition: whole test %v", time.Since(start).Round(time.Millisecond))
}

// TestCrashRestartNoLoss: SIGKILL the process after N deliveries while
// requests are in flight, restart it with the same instance ID: every
// expected delivery arrives; duplicates carry the same webhook-id and
// identical body bytes.
func TestCrashRestartNoLoss(t *testing.T) {
	const (
		events  = 200
		killAt  = 100 // deliveries received before SIGKILL
		latency = 40 * time.Millisecond
	)
	start := time.Now()
	h := newHarness(t, config{})
	ids := []string{"crash-a", "crash-b"}
	recv := map[string]*receiver{}
	for _, id := range ids {
		recv[id] = newReceiver(t, id, delayed(latency))
		h.addEndpoint(endpoint{ID: id, URL: recv[id].URL, Secret: recv[id].Secret, Events: []string{"crash.*"}, Rate: 1000, MaxInFlight: 4})
	}
	p := h.start("crash-1")
	var evs []cloudEvent
	for i := range events {
		id := fmt.Sprintf("crash-%03d", i)
		evs = append(evs, cloudEvent{ID: id, Source: "urn:e2e:crash", Type: "crash.thing", Time: time.Now(), Data: eventData{Event: id, N: i}})
	}
	h.produce(h.events(evs)...)

	total := func() int { return recv[ids[0]].Count() + recv[ids[1]].Count() }
	eventually(t, 60*time.Second, fmt.Sprintf("%d deliveries with requests in flight", killAt), func() (bool, string) {
		open := recv[ids[0]].Open() + recv[ids[1]].Open()
		return total() >= killAt && open > 0, fmt.Sprintf("%d received, %d open", total(), open)
	})
	open := recv[ids[0]].Open() + recv[ids[1]].Open()
	p.kill()
	killedAt := time.Now()
	before := total()
	t.Logf("SIGKILL after %d requests with %d in flight", before, open)

	p = h.start("crash-1") // same instance ID: its transactional producer fences the dead one
	eventually(t, 120*time.Second, "every delivery after the restart", func() (bool, string) {
		a, b := recv[ids[0]].Distinct(), recv[ids[1]].Distinct()
		return a >= events && b >= events, fmt.Sprintf("%s %d/%d, %s %d/%d", ids[0], a, events, ids[1], b, events)
	})
	recovered := time.Since(killedAt)
	skipped, _ := p.metric("hookrelay_deliveries_skipped_finished_total")

	// A duplicate is either of a request in flight at the kill (unavoidable)
	// or of one answered before it whose completion was not yet committed.
	dups, dupsOfFinished := 0, 0
	var oldestFinished time.Duration // longest a re-sent delivery had been answered before the kill
	for _, id := range ids {
		first := map[string]request{}
		seenEvents := map[string]bool{}
		for _, r := range recv[id].Requests() {
			var b webhookBody
			var d eventData
			if json.Unmarshal(r.Body, &b) != nil || json.Unmarshal(b.Data, &d) != nil {
				t.Errorf("%s: bad body %q", id, r.Body)
				continue
			}
			seenEvents[d.Event] = true
			if r.VerifyErr != nil {
				t.Errorf("%s: %s: signature does not verify: %v", id, d.Event, r.VerifyErr)
			}
			f, ok := first[d.Event]
			if !ok {
				first[d.Event] = r
				continue
			}
			dups++
			if f.Answered.Before(killedAt) && f.Status == http.StatusOK {
				dupsOfFinished++
				oldestFinished = max(oldestFinished, killedAt.Sub(f.Answered))
			}
			if r.WebhookID != f.WebhookID {
				t.Errorf("%s: duplicate of %s has webhook-id %s, first had %s", id, d.Event, r.WebhookID, f.WebhookID)
			}
			if !bytes.Equal(r.Body, f.Body) {
				t.Errorf("%s: duplicate of %s has different body bytes:\n first %q\n  dup  %q", id, d.Event, f.Body, r.Body)
			}
		}
		var missing []string
		for _, ev := range evs {
			if !seenEvents[ev.ID] {
				missing = append(missing, ev.ID)
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s: %d deliveries missing: %s", id, len(missing), firstN(missing, 10))
		}
	}
	t.Logf("TestCrashRestartNoLoss: %d requests before the kill (%d in flight), %d duplicates (%d of deliveries answered 200 up to %v before the kill), %v re-read deliveries skipped as finished, all %d deliveries done %v after the kill (whole test %v)",
		before, open, dups, dupsOfFinished, oldestFinished.Round(time.Millisecond), skipped, 2*events, recovered.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// TestInvalidEvents: malformed records on the events topic (bad JSON,
// missing attributes, oversize) land in events.invalid with their reason and
// origin, and the good records around them, on the same partition, are
// delivered.
func TestInvalidEvents(t *testing.T) {
	start := time.Now()
	h := newHarness(t, config{})
	rc := newReceiver(t, "valid", always(http.StatusOK))
	h.addEndpoint(endpoint{ID: "valid", URL: rc.URL, Secret: rc.Secret, Events: []string{"*"}})
	p := h.start("invalid-1")

	topic := h.topic("events")
	key := []byte("same-partition")
	good := func(i int, binaryMode bool) *kgo.Record {
		id := fmt.Sprintf("good-%d", i)
		ev := cloudEvent{ID: id, Source: "urn:e2e:invalid", Type: "good.thing", Time: time.Now(), Data: eventData{Event: id, N: i}}
		if binaryMode {
			return ev.binary(topic, key)
		}
		return ev.structured(topic, key)
	}
	ceJSON := []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json")}}
	bigData := strings.Repeat("x", 300<<10) // over the 256 KiB default limit
	type bad struct {
		rec    *kgo.Record
		reason string
	}
	bads := []bad{
		{&kgo.Record{Topic: topic, Key: key, Headers: ceJSON, Value: []byte(`{"specversion":"1.0","id":"x",`)}, "bad_json"},
		{&kgo.Record{Topic: topic, Key: key, Headers: ceJSON, Value: []byte(`{"specversion":"1.0","id":"no-source","type":"good.thing"}`)}, "missing_attribute"},
		{&kgo.Record{Topic: topic, Key: key, Headers: ceJSON, Value: []byte(`{"specversion":"1.0","id":"too-big","source":"urn:e2e:invalid","type":"good.thing","data":"` + bigData + `"}`)}, "too_large"},
		{&kgo.Record{Topic: topic, Key: key, Headers: []kgo.RecordHeader{
			{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_source", Value: []byte("urn:e2e:invalid")},
			{Key: "ce_type", Value: []byte("good.thing")}, {Key: "content-type", Value: []byte("application/json")},
		}, Value: []byte(`{"no":"id"}`)}, "missing_attribute"},
	}
	var recs []*kgo.Record
	goods := 0
	for i, b := range bads {
		recs = append(recs, good(goods, i%2 == 1), b.rec)
		goods++
	}
	recs = append(recs, good(goods, false))
	goods++
	h.produce(recs...)
	for _, r := range recs[1:] {
		if r.Partition != recs[0].Partition {
			t.Fatalf("test bug: records on partitions %d and %d", recs[0].Partition, r.Partition)
		}
	}

	invalid := h.readTopic(h.topic("events.invalid"), 60*time.Second, func(got []*kgo.Record) (bool, string) {
		return len(got) >= len(bads), fmt.Sprintf("%d of %d invalid records", len(got), len(bads))
	})
	eventually(t, 60*time.Second, "the good records' deliveries", func() (bool, string) {
		return rc.Distinct() >= goods, fmt.Sprintf("%d of %d", rc.Distinct(), goods)
	})

	if len(invalid) != len(bads) {
		t.Errorf("events.invalid holds %d records, want %d", len(invalid), len(bads))
	}
	byOffset := map[string]*kgo.Record{}
	for _, r := range invalid {
		off, _ := header(r, hdrOriginalOffset)
		byOffset[off] = r
	}
	for i, b := range bads {
		off := strconv.FormatInt(b.rec.Offset, 10)
		r, ok := byOffset[off]
		if !ok {
			t.Errorf("bad record %d (offset %d, want reason %s) not in events.invalid", i, b.rec.Offset, b.reason)
			continue
		}
		if reason, _ := header(r, hdrReason); reason != b.reason {
			t.Errorf("bad record %d: %s = %q, want %q", i, hdrReason, reason, b.reason)
		}
		if v, _ := header(r, hdrOriginalTopic); v != topic {
			t.Errorf("bad record %d: %s = %q, want %q", i, hdrOriginalTopic, v, topic)
		}
		if v, _ := header(r, hdrOriginalPart); v != strconv.Itoa(int(b.rec.Partition)) {
			t.Errorf("bad record %d: %s = %q, want %d", i, hdrOriginalPart, v, b.rec.Partition)
		}
		if !bytes.Equal(r.Value, b.rec.Value) || !bytes.Equal(r.Key, b.rec.Key) {
			t.Errorf("bad record %d: key or value changed on the way to events.invalid", i)
		}
	}
	got := map[string]int{}
	for _, r := range rc.Requests() {
		var b webhookBody
		var d eventData
		if json.Unmarshal(r.Body, &b) != nil || json.Unmarshal(b.Data, &d) != nil {
			t.Errorf("bad body %q", r.Body)
			continue
		}
		got[d.Event]++
		if r.VerifyErr != nil {
			t.Errorf("%s: signature does not verify: %v", d.Event, r.VerifyErr)
		}
	}
	for i := range goods {
		if id := fmt.Sprintf("good-%d", i); got[id] != 1 {
			t.Errorf("good record %s delivered %d times, want 1", id, got[id])
		}
	}
	if len(got) != goods {
		t.Errorf("receiver got %d distinct events, want %d: %v", len(got), goods, sortedKeys(got))
	}
	// Counted in metrics.
	if n, ok := p.metric("hookrelay_events_total", `result="invalid"`); n != float64(len(bads)) {
		t.Errorf("hookrelay_events_total{result=\"invalid\"} = %v (found %v), want %d", n, ok, len(bads))
	}
	// Each stage's transactions show in its request count (EndTxn): fan-out
	// committed the deliveries, the dispatcher their outcomes.
	for _, client := range []string{"fanout", "dispatch"} {
		deadline := time.Now().Add(30 * time.Second) // hang guard
		for {
			n, _ := p.metric("hookrelay_kafka_requests_total", `client="`+client+`"`, `request="EndTxn"`)
			if n >= 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("hookrelay_kafka_requests_total{client=%q,request=\"EndTxn\"} = %v, want >= 1", client, n)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("TestInvalidEvents: whole test %v", time.Since(start).Round(time.Millisecond))
}

// TestSSRFGuard: without an allow-list, an endpoint whose host name resolves
// to 127.0.0.1 and one at the IPv4-mapped [::ffff:127.0.0.1] are never
// connected to and their attempts are `blocked`. A 302 answer is `failed`
// and its target receives nothing.
func TestSSRFGuard(t *testing.T) {
	t.Run("blocked", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, config{NoAllowList: true})
		rc := newReceiver(t, "ssrf", always(http.StatusOK))
		_, port, _ := strings.Cut(rc.Addr, ":")
		urls := map[string]string{
			"by-name":     "http://localhost:" + port + "/by-name",
			"ipv4-mapped": "http://[::ffff:127.0.0.1]:" + port + "/mapped",
		}
		for id, u := range urls {
			// The CLI refuses the literal without an allow-list: add it as
			// an operator with another allow-list (or another producer) could.
			h.addEndpointAllowing("127.0.0.0/8", endpoint{ID: id, URL: u, Secret: rc.Secret, Events: []string{"ssrf.*"}})
		}
		h.start("ssrf-1")
		var evs []cloudEvent
		for i := range 3 {
			id := fmt.Sprintf("ssrf-%d", i)
			evs = append(evs, cloudEvent{ID: id, Source: "urn:e2e:ssrf", Type: "ssrf.thing", Time: time.Now(), Data: eventData{Event: id}})
		}
		h.produce(h.events(evs)...)
		want := len(evs) * len(urls)
		rows := h.waitAttempts(60*time.Second, "an attempt row per delivery", func(rows []attemptRow) (bool, string) {
			return len(rows) >= want, fmt.Sprintf("%d of %d rows", len(rows), want)
		})
		if len(rows) != want {
			t.Errorf("%d attempt rows, want %d (one per delivery, no retry)", len(rows), want)
		}
		for _, r := range rows {
			if r.Outcome != "blocked" || r.AttemptNumber != 1 {
				t.Errorf("endpoint %s event %s: outcome %q attempt %d (error %q), want blocked, 1", r.EndpointID, r.EventID, r.Outcome, r.AttemptNumber, r.ErrorClass)
			}
		}
		if n := rc.Accepts(); n != 0 {
			t.Errorf("receiver accepted %d connections, want 0", n)
		}
		if n := rc.Count(); n != 0 {
			t.Errorf("receiver got %d requests, want 0", n)
		}
	})
	t.Run("redirect", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, config{})
		target := newReceiver(t, "target", always(http.StatusOK))
		redir := newReceiver(t, "redirect", redirectTo(target.URL))
		h.addEndpoint(endpoint{ID: "redirect", URL: redir.URL, Secret: redir.Secret, Events: []string{"redir.*"}})
		h.start("redirect-1")
		h.produce(h.events([]cloudEvent{{ID: "redir-0", Source: "urn:e2e:ssrf", Type: "redir.thing", Time: time.Now(), Data: eventData{Event: "redir-0"}}})...)
		rows := h.waitAttempts(60*time.Second, "the attempt row", func(rows []attemptRow) (bool, string) {
			return len(rows) >= 1, fmt.Sprintf("%d rows", len(rows))
		})
		// The DLQ record is committed with the decision: once it is there,
		// no retry can follow.
		h.readTopic(h.topic("dlq"), 30*time.Second, func(got []*kgo.Record) (bool, string) {
			return len(got) >= 1, fmt.Sprintf("%d DLQ records", len(got))
		})
		if len(rows) != 1 || rows[0].Outcome != "failed" || rows[0].HTTPStatus != http.StatusFound {
			t.Errorf("attempt rows %+v, want one failed row with status 302", rows)
		}
		if n := redir.Count(); n != 1 {
			t.Errorf("redirecting receiver got %d requests, want 1", n)
		}
		if n, a := target.Count(), target.Accepts(); n != 0 || a != 0 {
			t.Errorf("redirect target got %d requests over %d connections, want none", n, a)
		}
	})
}
