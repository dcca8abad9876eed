package endpoints

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestViewBytesPerEndpoint measures the heap the endpoints view holds per
// endpoint (the configs, the snapshot and its tenant index), applying
// HOOKRELAY_VIEW_MEM_ENDPOINTS (default 20,000; docs/SCALING.md used
// 200,000) realistic endpoints: an ID of 24 characters, an HTTPS URL, one
// secret, two event-type patterns, a tenant (100 endpoints per tenant),
// an incarnation, a status record for every tenth. It logs the figure and
// asserts only that every endpoint is in the view.
func TestViewBytesPerEndpoint(t *testing.T) {
	n := 20_000
	if s := os.Getenv("HOOKRELAY_VIEW_MEM_ENDPOINTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			t.Fatalf("HOOKRELAY_VIEW_MEM_ENDPOINTS=%q: want a positive count", s)
		}
	}
	v, err := NewView(Config{Brokers: []string{"unused:9092"}, EndpointsTopic: "e", StatusTopic: "s", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	v.configs, v.statuses, v.pos = map[string]*Endpoint{}, map[string]*Status{}, map[string]map[int32]int64{}
	const batch = 5000
	recs := func(from, to int) kgo.Fetches {
		var eps, sts []*kgo.Record
		for i := from; i < to; i++ {
			id := fmt.Sprintf("ep_%021d", i)
			e := Endpoint{ID: id, URL: fmt.Sprintf("https://hooks.customer-%d.example.com/webhooks/hookrelay?k=%d", i/100, i),
				Secrets: []Secret{{Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, EventTypes: []string{"invoice.*", "customer.created"},
				TenantID: fmt.Sprintf("tenant_%08d", i/100), Incarnation: fmt.Sprintf("%032x", i)}
			b, _ := json.Marshal(e)
			eps = append(eps, &kgo.Record{Topic: "e", Key: []byte(id), Value: b, Offset: int64(i)})
			if i%10 == 0 {
				sts = append(sts, &kgo.Record{Topic: "s", Key: []byte(id), Value: []byte(`{"state":"active","at":"2026-12-01T10:00:00Z","failing_since":"2026-12-01T10:00:00Z"}`), Offset: int64(i / 10)})
			}
		}
		return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "e", Partitions: []kgo.FetchPartition{{Records: eps}}}, {Topic: "s", Partitions: []kgo.FetchPartition{{Records: sts}}}}}}
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for i := 0; i < n; i += batch {
		v.apply(recs(i, min(i+batch, n)))
	}
	after := heap()
	if v.Len() != n || v.Skipped() != 0 {
		t.Fatalf("view holds %d endpoints, want %d; %d records skipped", v.Len(), n, v.Skipped())
	}
	// One changed endpoint costs a copy of the whole snapshot (copy-on-write).
	one := recs(n/2, n/2+1)
	t0 := time.Now()
	v.apply(one)
	perChange := time.Since(t0)
	t.Logf("endpoints view: %d endpoints, heap %.1f MiB, %.0f bytes per endpoint (status record on 1 in 10); one endpoint change applied in %v",
		n, float64(after-before)/(1<<20), float64(after-before)/float64(n), perChange.Round(time.Microsecond))
	runtime.KeepAlive(v)
}
