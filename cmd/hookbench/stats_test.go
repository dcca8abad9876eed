package main

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	sorted := []int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	for _, tc := range []struct {
		p    float64
		want int64
	}{
		{0, 10}, {1, 10}, {10, 10}, {11, 20}, {50, 50}, {90, 90}, {99, 100}, {99.9, 100}, {100, 100},
	} {
		if got := percentile(sorted, tc.p); got != tc.want {
			t.Errorf("percentile(p%g) = %d, want %d", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile of empty = %d, want 0", got)
	}
	// Nearest rank on 1000 samples 1..1000: p99.9 is the 999th.
	var big []int64
	for i := int64(1); i <= 1000; i++ {
		big = append(big, i)
	}
	if got := percentile(big, 99.9); got != 999 {
		t.Errorf("p99.9 of 1..1000 = %d, want 999", got)
	}
}

func TestSummarize(t *testing.T) {
	ms := int64(time.Millisecond)
	in := []int64{5 * ms, -2 * ms, 1 * ms, 3 * ms, 4 * ms}
	d := summarize(in)
	want := Dist{N: 5, Min: -2, P50: 3, P90: 5, P99: 5, P999: 5, Max: 5, Mean: 2.2, Below: 1}
	if d != want {
		t.Errorf("summarize = %+v, want %+v", d, want)
	}
	if in[0] != 5*ms {
		t.Error("summarize reordered its input")
	}
	if (summarize(nil) != Dist{}) {
		t.Error("summarize(nil) is not the zero Dist")
	}
}

func TestSteadyWindow(t *testing.T) {
	base := time.Unix(1000, 0)
	var done []int64
	// 101 completions, one every 10 ms, given out of order.
	for i := 100; i >= 0; i-- {
		done = append(done, base.Add(time.Duration(i)*10*time.Millisecond).UnixNano())
	}
	w, ok := steadyWindow(done, 0.1, 0.9)
	if !ok {
		t.Fatal("steadyWindow: not ok")
	}
	if !w.Start.Equal(base.Add(100*time.Millisecond)) || !w.End.Equal(base.Add(900*time.Millisecond)) || w.Count != 80 {
		t.Errorf("window = %v..%v count %d, want +100ms..+900ms count 80", w.Start.Sub(base), w.End.Sub(base), w.Count)
	}
	if r := w.Rate(); math.Abs(r-100) > 1e-9 {
		t.Errorf("rate = %g, want 100/s", r)
	}
	if _, ok := steadyWindow(done[:5], 0.1, 0.9); ok {
		t.Error("steadyWindow of 5 completions is ok, want not ok")
	}
	same := []int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	if _, ok := steadyWindow(same, 0.1, 0.9); ok {
		t.Error("steadyWindow of simultaneous completions is ok, want not ok")
	}
}

func TestCountBetween(t *testing.T) {
	base := time.Unix(50, 0)
	ins := []int64{base.UnixNano(), base.Add(time.Second).UnixNano(), base.Add(2 * time.Second).UnixNano()}
	if n := countBetween(ins, base, base.Add(2*time.Second)); n != 2 {
		t.Errorf("countBetween = %d, want 2 (half-open interval)", n)
	}
}

func TestCPUBetweenAndRSS(t *testing.T) {
	base := time.Unix(0, 0)
	s := []Sample{
		{At: base, CPU: 10, RSSKiB: 100},
		{At: base.Add(time.Second), CPU: 11, RSSKiB: 300},
		{At: base.Add(3 * time.Second), CPU: 15, RSSKiB: 200},
	}
	for _, tc := range []struct {
		from, to time.Duration
		want     float64
	}{
		{0, time.Second, 1},
		{500 * time.Millisecond, 2 * time.Second, 2.5}, // 10.5 -> 13
		{-time.Second, 10 * time.Second, 5},            // clamped to the first and last samples
	} {
		if got := cpuBetween(s, base.Add(tc.from), base.Add(tc.to)); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("cpuBetween(%v, %v) = %g, want %g", tc.from, tc.to, got, tc.want)
		}
	}
	if p := peakRSS(s, time.Time{}, time.Time{}); p != 300 {
		t.Errorf("peakRSS = %d, want 300", p)
	}
	if p := peakRSS(s, base.Add(2*time.Second), time.Time{}); p != 200 {
		t.Errorf("peakRSS after 2s = %d, want 200", p)
	}
	if m := meanRSS(s, base, base.Add(time.Second)); m != 200 {
		t.Errorf("meanRSS = %d, want 200", m)
	}
}

func TestCrossing(t *testing.T) {
	base := time.Unix(0, 0)
	at := []time.Time{base, base.Add(time.Second), base.Add(2 * time.Second)}
	vals := []float64{0, 100, 100}
	got, ok := crossing(at, vals, 25)
	if !ok || !got.Equal(base.Add(250*time.Millisecond)) {
		t.Errorf("crossing(25) = %v, %v; want +250ms", got.Sub(base), ok)
	}
	if got, ok := crossing(at, vals, 100); !ok || !got.Equal(base.Add(time.Second)) {
		t.Errorf("crossing(100) = %v, %v; want +1s", got.Sub(base), ok)
	}
	if _, ok := crossing(at, vals, 101); ok {
		t.Error("crossing(101) is ok, want never reached")
	}
}

func TestParseProducedNs(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int64
		ok   bool
	}{
		{`{"type":"x","data":{"seq":1,"produced_ns":1796000000123456789,"pad":"a"}}`, 1796000000123456789, true},
		{`{"data":{"produced_ns":42}}`, 42, true},
		{`{"data":{"produced_ns":"42"}}`, 0, false},
		{`{"data":{}}`, 0, false},
		{`{"produced_ns":99999999999999999999}`, 0, false}, // 20 digits overflow
	} {
		got, ok := parseProducedNs([]byte(tc.body))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseProducedNs(%s) = %d, %v; want %d, %v", tc.body, got, ok, tc.want, tc.ok)
		}
	}
}

func TestEventGenRecord(t *testing.T) {
	g := newEventGen("run-s1-", 1024)
	now := time.Unix(1796000000, 123456789)
	r := g.record("p.events", "bench.s1.7", now)
	var ev struct {
		SpecVersion     string          `json:"specversion"`
		ID              string          `json:"id"`
		Source          string          `json:"source"`
		Type            string          `json:"type"`
		Time            time.Time       `json:"time"`
		DataContentType string          `json:"datacontenttype"`
		Data            json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.Value, &ev); err != nil {
		t.Fatalf("event is not JSON: %v\n%s", err, r.Value)
	}
	if ev.SpecVersion != "1.0" || ev.ID != "run-s1-1" || ev.Source != eventSource || ev.Type != "bench.s1.7" ||
		!ev.Time.Equal(now) || ev.DataContentType != "application/json" {
		t.Errorf("event attributes = %+v", ev)
	}
	if n := len(ev.Data); n < 1000 || n > 1050 {
		t.Errorf("data is %d bytes, want about 1024", n)
	}
	if got, ok := parseProducedNs(ev.Data); !ok || got != now.UnixNano() {
		t.Errorf("produced_ns = %d, %v; want %d", got, ok, now.UnixNano())
	}
	if len(r.Headers) != 1 || r.Headers[0].Key != "content-type" || string(r.Headers[0].Value) != "application/cloudevents+json" {
		t.Errorf("headers = %v", r.Headers)
	}
	if r2 := g.record("p.events", "t", now); string(r2.Key) != "run-s1-2" {
		t.Errorf("second key = %s, want run-s1-2", r2.Key)
	}
}

func TestIsoType(t *testing.T) {
	counts := map[string]int{}
	for i := range 1000 {
		counts[isoType(i, 50)]++
	}
	if counts["bench.iso.hung"] != 200 {
		t.Errorf("hung share = %d of 1000, want 200", counts["bench.iso.hung"])
	}
	for k := range 50 {
		if n := counts["bench.iso.f"+strconv.Itoa(k)]; n != 16 {
			t.Errorf("fast endpoint %d got %d of 1000, want 16", k, n)
		}
	}
}

func TestParseProc(t *testing.T) {
	// Field 2 holds spaces and a ')'; utime=1234, stime=566 ticks.
	stat := []byte("4242 (hook relay) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 566 0 0 20 0 12 0 500 1000000 2000 18446744073709551615")
	cpu, err := parseStatCPU(stat)
	if err != nil || math.Abs(cpu-18.0) > 1e-9 {
		t.Errorf("parseStatCPU = %g, %v; want 18.0 s", cpu, err)
	}
	if _, err := parseStatCPU([]byte("garbage")); err == nil {
		t.Error("parseStatCPU(garbage): no error")
	}
	status := []byte("Name:\thookrelay\nVmPeak:\t  900000 kB\nVmRSS:\t   123456 kB\nThreads:\t12\n")
	rss, err := parseStatusRSS(status)
	if err != nil || rss != 123456 {
		t.Errorf("parseStatusRSS = %d, %v; want 123456", rss, err)
	}
	if _, err := parseStatusRSS([]byte("Name:\tx\n")); err == nil {
		t.Error("parseStatusRSS without VmRSS: no error")
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP hookrelay_attempts_total Delivery attempts by outcome.
# TYPE hookrelay_attempts_total counter
hookrelay_attempts_total{outcome="delivered",otel_scope_name="x"} 90
hookrelay_attempts_total{outcome="retry_scheduled",otel_scope_name="x"} 10
# TYPE hookrelay_dispatch_backlog gauge
hookrelay_dispatch_backlog{otel_scope_name="x"} 7
# TYPE hookrelay_attempt_duration_seconds histogram
hookrelay_attempt_duration_seconds_bucket{le="+Inf"} 3
hookrelay_attempt_duration_seconds_sum 0.5
hookrelay_attempt_duration_seconds_count 3
`
	ms, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if v := ms.Sum("hookrelay_attempts_total"); v != 100 {
		t.Errorf("Sum(attempts) = %g, want 100", v)
	}
	if by := ms.By("hookrelay_attempts_total", "outcome"); by["delivered"] != 90 || by["retry_scheduled"] != 10 {
		t.Errorf("By(outcome) = %v", by)
	}
	if v := ms.Sum("hookrelay_dispatch_backlog"); v != 7 {
		t.Errorf("Sum(backlog) = %g, want 7", v)
	}
	if v := ms.Sum("hookrelay_attempt_duration_seconds"); v != 3 {
		t.Errorf("Sum(histogram) = %g, want its count 3", v)
	}
	if v := ms.Sum("absent"); v != 0 {
		t.Errorf("Sum(absent) = %g, want 0", v)
	}
}

func TestWrkParsing(t *testing.T) {
	out := []byte(`Running 5s test @ http://127.0.0.1:41583/hook/ceiling
  2 threads and 64 connections
  Latency Distribution
     50%    1.23ms
     75%    2.00ms
     90%    5.00ms
     99%   13.70ms
  217358 requests in 5.02s, 15.13MB read
  Socket errors: connect 0, read 0, write 0, timeout 3
Requests/sec:  43275.90
Transfer/sec:      3.01MB
`)
	m := wrkRate.FindSubmatch(out)
	if m == nil || string(m[1]) != "43275.90" {
		t.Errorf("rate = %q", m)
	}
	got := map[string]string{}
	for _, m := range wrkPct.FindAllSubmatch(out, -1) {
		got[string(m[1])] = string(m[2])
	}
	if got["50"] != "1.23ms" || got["99"] != "13.70ms" || len(got) != 2 {
		t.Errorf("percentiles = %v", got)
	}
	if e := wrkErrs.FindSubmatch(out); e == nil || !strings.HasPrefix(string(e[1]), "Socket errors") {
		t.Errorf("errors = %q", e)
	}
}
