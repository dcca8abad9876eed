package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// generationPauseGuard bounds the longest pause of a healthy endpoint
// across the partition move. A hang guard only: the design bound is the
// gate's grace plus the old generation's drain (docs/OPERATIONS.md,
// "Growing the deliveries topic"); the figure is logged.
const generationPauseGuard = 60 * time.Second

// TestGrowDeliveriesUnderLoad: two hookrelay instances deliver a steady
// load (100 events/s to six endpoints, one of which fails every first
// attempt so retries cross the move) while `hookrelay deliveries grow`
// moves the deliveries topic from 4 to 8 partitions. Then: every event
// reaches every endpoint (0 lost), a duplicate has the same webhook-id
// and body, each request has exactly one attempt row, the new generation
// carries deliveries, the old one drains and retires; and the longest
// pause of the healthy endpoints across the move is measured (logged).
func TestGrowDeliveriesUnderLoad(t *testing.T) {
	h := newHarness(t, config{Partitions: 4})
	var ids []string
	recv := map[string]*receiver{}
	for i := range 6 {
		id := fmt.Sprintf("gm-%d", i)
		act := always(http.StatusOK)
		if i == 5 { // retries through the tiers and the relay, across the move
			act = func(r *request) answer {
				if r.Nth == 1 {
					return answer{Status: http.StatusInternalServerError}
				}
				return answer{Status: http.StatusOK}
			}
		}
		recv[id] = newReceiver(t, id, act)
		h.addEndpoint(endpoint{ID: id, URL: recv[id].URL, Secret: recv[id].Secret, Events: []string{"recovery.*"}, Rate: 1000, MaxInFlight: 8})
		ids = append(ids, id)
	}
	healthy := ids[:5]
	h.start("gm-1")
	h.start("gm-2")
	load := startLoad(t, h, "gm", 10, 100*time.Millisecond)
	total := func() int {
		n := 0
		for _, id := range healthy {
			n += recv[id].Count()
		}
		return n
	}
	// Counts, not rates: on a loaded machine the flow is slower, never
	// absent.
	eventually(t, 180*time.Second, "deliveries flowing before the move", func() (bool, string) {
		return total() >= 500, fmt.Sprintf("%d requests", total())
	})
	// At least 12 s of flow before the move, so the pause has a baseline
	// (the longest gap in the 10 s before).
	eventually(t, 180*time.Second, "12 s of flow before the move", func() (bool, string) {
		var first time.Time
		for _, id := range healthy {
			for _, r := range recv[id].Requests() {
				if first.IsZero() || r.Arrived.Before(first) {
					first = r.Arrived
				}
			}
		}
		return !first.IsZero() && time.Since(first) >= 12*time.Second, fmt.Sprintf("first request %v ago", time.Since(first).Round(time.Second))
	})
	loadBefore := loadAvg()
	growAt := time.Now()
	out := h.cli("deliveries", "grow", "--partitions", "8")
	t.Logf("grow: %s(took %v)", out, time.Since(growAt).Round(time.Millisecond))
	if !strings.Contains(out, "generation 2") || !strings.Contains(out, h.topic("deliveries.g2")) {
		t.Fatalf("grow output %q: want generation 2 on %s", out, h.topic("deliveries.g2"))
	}
	// The dispatchers of generation 2 start when generation 1 drained.
	eventually(t, 90*time.Second, "generation 1 drained", func() (bool, string) {
		st := h.cli("deliveries", "status")
		for _, line := range strings.Split(st, "\n") {
			if strings.HasPrefix(line, "1 ") {
				return strings.Contains(line, "0 (drained)"), st
			}
		}
		return false, st
	})
	drainedAt := time.Since(growAt).Round(time.Millisecond)
	// Keep the load on well past the move.
	base := total()
	eventually(t, 180*time.Second, "deliveries flowing after the move", func() (bool, string) {
		return total() >= base+1000, fmt.Sprintf("%d new requests", total()-base)
	})
	load.stopLoad()
	loadAfter := loadAvg()
	if len(load.errs) > 0 {
		t.Fatalf("producing the load: %d errors, first %v", len(load.errs), load.errs[0])
	}
	want := len(load.ids)
	delivered := func(id string) int { // events answered 200 at id
		ok := map[string]bool{}
		for _, r := range recv[id].Requests() {
			if r.Status == http.StatusOK {
				ok[r.WebhookID] = true
			}
		}
		return len(ok)
	}
	eventually(t, 300*time.Second, "every delivery at every endpoint", func() (bool, string) {
		var short []string
		for _, id := range ids {
			if d := delivered(id); d < want {
				short = append(short, fmt.Sprintf("%s %d/%d", id, d, want))
			}
		}
		return len(short) == 0, strings.Join(short, ", ")
	})

	// 0 lost; duplicates only with the same webhook-id and body (the
	// flaky endpoint gets each event twice by design: 500, then 200).
	dups := 0
	var dupAt []string
	for i, id := range ids {
		expect := 1
		if i == 5 {
			expect = 2
		}
		first := map[string]request{}
		count := map[string]int{}
		for _, r := range recv[id].Requests() {
			ev := eventOf(r)
			if ev == "" {
				t.Errorf("%s: bad body %q", id, r.Body)
				continue
			}
			if r.VerifyErr != nil {
				t.Errorf("%s: %s: signature does not verify: %v", id, ev, r.VerifyErr)
			}
			count[ev]++
			if count[ev] > expect && len(dupAt) < 10 {
				dupAt = append(dupAt, fmt.Sprintf("%s %s at grow%+v (first at grow%+v)", id, ev, r.Arrived.Sub(growAt).Round(time.Millisecond), first[ev].Arrived.Sub(growAt).Round(time.Millisecond)))
			}
			f, ok := first[ev]
			if !ok {
				first[ev] = r
				continue
			}
			if r.WebhookID != f.WebhookID || !bytes.Equal(r.Body, f.Body) {
				t.Errorf("%s: another request of %s differs: webhook-id %s vs %s, body equal %v", id, ev, r.WebhookID, f.WebhookID, bytes.Equal(r.Body, f.Body))
			}
		}
		for _, ev := range load.ids {
			switch c := count[ev]; {
			case c == 0:
				t.Errorf("%s: delivery of %s missing", id, ev)
			case c > expect:
				dups += c - expect
			}
		}
	}

	if len(dupAt) > 0 {
		t.Logf("duplicates (first 10): %s", strings.Join(dupAt, "; "))
	}

	// One attempt row per request, per endpoint (every request was
	// answered, so every row has its HTTP status).
	perEndpoint := map[string]int{}
	h.waitAttempts(120*time.Second, "one attempt row per request", func(rows []attemptRow) (bool, string) {
		clear(perEndpoint)
		for _, r := range rows {
			if r.HTTPStatus > 0 {
				perEndpoint[r.EndpointID]++
			}
		}
		var off []string
		for _, id := range ids {
			if got, n := perEndpoint[id], recv[id].Count(); got != n {
				off = append(off, fmt.Sprintf("%s: %d rows for %d requests", id, got, n))
			}
		}
		return len(off) == 0, strings.Join(off, ", ")
	})

	// The new generation carried deliveries; the old one retires.
	g2 := h.countByKey(h.topic("deliveries.g2"))
	n2 := 0
	for _, n := range g2 {
		n2 += n
	}
	if n2 == 0 {
		t.Errorf("no delivery went to %s", h.topic("deliveries.g2"))
	}
	out = h.cli("deliveries", "retire", "--generation", "1", "--quiet", "1s") // drained long before; the default quiet is 5m
	if !strings.Contains(out, "generation 1") || !strings.Contains(out, "retired") {
		t.Errorf("retire: %q", out)
	}
	if st := h.cli("deliveries", "status"); !strings.Contains(st, "retired") {
		t.Errorf("status after retire: %q", st)
	}

	// The pause: the longest gap between two requests at a healthy
	// endpoint from 2 s before the grow to 20 s after, against the same
	// endpoint's longest gap in the 10 s before that window.
	var worst, worstBefore time.Duration
	var worstAt string
	for _, id := range healthy {
		var at []time.Time
		for _, r := range recv[id].Requests() {
			at = append(at, r.Arrived)
		}
		sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
		for i := 1; i < len(at); i++ {
			gap := at[i].Sub(at[i-1])
			switch {
			case at[i].After(growAt.Add(-2*time.Second)) && at[i-1].Before(growAt.Add(20*time.Second)):
				if gap > worst {
					worst, worstAt = gap, fmt.Sprintf("%s at grow%+v", id, at[i-1].Sub(growAt).Round(time.Millisecond))
				}
			case at[i].After(growAt.Add(-12*time.Second)) && at[i].Before(growAt.Add(-2*time.Second)):
				worstBefore = max(worstBefore, gap)
			}
		}
	}
	// Latency of events produced around the move: produce ack → first arrival.
	var lat []time.Duration
	for _, id := range healthy {
		seen := map[string]bool{}
		for _, r := range recv[id].Requests() {
			ev := eventOf(r)
			if seen[ev] {
				continue
			}
			seen[ev] = true
			if a := load.ackedAt(ev); a.After(growAt.Add(-time.Second)) && a.Before(growAt.Add(10*time.Second)) {
				lat = append(lat, r.Arrived.Sub(a))
			}
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("TestGrowDeliveriesUnderLoad: %d events × %d endpoints, 4 → 8 partitions; generation 1 drained %v after the grow; "+
		"healthy endpoints' longest pause across the move %v (%s; longest gap in the 10 s before: %v); "+
		"latency of events produced in [grow-1s, grow+10s]: p50 %v, p99 %v, max %v; %d duplicates; %d deliveries on generation 2; load average %s → %s",
		want, len(ids), drainedAt, worst.Round(time.Millisecond), worstAt, worstBefore.Round(time.Millisecond),
		percentile(lat, 50).Round(time.Millisecond), percentile(lat, 99).Round(time.Millisecond), percentile(lat, 100).Round(time.Millisecond),
		dups, n2, loadBefore, loadAfter)
	if worst >= generationPauseGuard {
		t.Errorf("a healthy endpoint paused %v across the move, want < %v (hang guard)", worst, generationPauseGuard)
	}
}

// loadAvg is the first three fields of /proc/loadavg ("" if unreadable).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
