package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hookrelay/hookrelay/cmd/internal/childproc"
)

// startFleet starts n receivers with IDs "<prefix><i>" and returns them
// with their endpoint specs: endpoint i subscribes to event type
// "<typePrefix><i>" only, so one event is one delivery.
func startFleet(n int, idPrefix, typePrefix string, b Behaviour, verifyEvery int, rate float64, maxInFlight int) (receivers, []endpointSpec, error) {
	var rs receivers
	var specs []endpointSpec
	for i := range n {
		id := idPrefix + strconv.Itoa(i)
		r, err := startReceiver(id, b, verifyEvery)
		if err != nil {
			rs.Close()
			return nil, nil, err
		}
		rs = append(rs, r)
		specs = append(specs, endpointSpec{ID: id, URL: r.url, Secret: r.secret,
			Events: []string{typePrefix + strconv.Itoa(i)}, Rate: rate, MaxInFlight: maxInFlight})
	}
	return rs, specs, nil
}

// ThroughputResult is scenario 1: the sustained delivery rate of a
// preloaded backlog drained through hookrelay to fast receivers.
type ThroughputResult struct {
	Payloads         string                 `json:"payloads"` // "synthetic" (~payload_bytes of JSON) or "github"
	Endpoints        int                    `json:"endpoints"`
	Deliveries       int                    `json:"deliveries"`
	PayloadBytes     int                    `json:"payload_bytes,omitempty"`
	RatePerEndpoint  float64                `json:"rate_per_endpoint"`
	MaxInFlight      int                    `json:"max_in_flight"`
	EndpointBacklog  int                    `json:"endpoint_backlog"`
	PreloadSeconds   float64                `json:"preload_s"`
	DrainSeconds     float64                `json:"drain_s"` // hookrelay ready to last delivery
	DeliveriesPerSec float64                `json:"deliveries_per_s"`
	WindowSeconds    float64                `json:"window_s"`
	WindowCount      int                    `json:"window_deliveries"`
	CPUPer1000       float64                `json:"hookrelay_cpu_s_per_1000"`
	KafkaCPUPer1000  float64                `json:"kafka_cpu_s_per_1000"`
	HookrelayCores   float64                `json:"hookrelay_cores"`
	PeakRSSMiB       float64                `json:"hookrelay_peak_rss_mib"`
	SinkRowsPerSec   float64                `json:"sink_rows_per_s"`
	Parked           float64                `json:"parked"`
	Duplicates       int64                  `json:"duplicate_deliveries"`
	Connections      int64                  `json:"connections_opened"` // TCP connections the receivers accepted: re-dials show here
	Processes        map[string]procFigures `json:"processes"`
	KafkaProbe       ProbeResult            `json:"kafka_probe"` // broker transaction latency in the window
	Check            Check                  `json:"check"`
}

// runThroughput is scenario 1 (github=false) and its run with real GitHub
// payloads (github=true): preload the events, start hookrelay, count 2xx
// completions at the receivers and take the rate between 10 % and 90 % of
// them (the steady state: no consumer-join ramp, no lone-endpoint tail).
func (b *bench) runThroughput(ctx context.Context, github bool) (*ThroughputResult, error) {
	o := b.o
	name, n := "s1", o.s1Deliveries
	res := &ThroughputResult{Payloads: "synthetic", PayloadBytes: o.payloadBytes}
	gen := newEventGen(b.runID+"-s1-", o.payloadBytes)
	if github {
		name, n = "s1g", o.githubDeliveries
		payloads, err := loadGitHubPayloads(o.githubDir)
		if err != nil {
			return nil, fmt.Errorf("GitHub payloads (run `make deps`): %w", err)
		}
		if len(payloads) == 0 {
			return nil, errors.New("no GitHub payloads found")
		}
		gen = newEventGen(b.runID+"-s1g-", 0)
		gen.github = payloads
		total := 0
		for _, p := range payloads {
			total += len(p)
		}
		res = &ThroughputResult{Payloads: fmt.Sprintf("github (%d distinct, mean %d bytes)", len(payloads), total/len(payloads))}
	}
	res.Endpoints, res.Deliveries, res.RatePerEndpoint, res.MaxInFlight, res.EndpointBacklog =
		o.s1Endpoints, n, o.s1Rate, o.s1MaxInFlight, o.s1Backlog
	b.logf("scenario 1 (%s): %d endpoints, %d deliveries preloaded, rate %g/s and %d in flight per endpoint, endpoint backlog %d",
		res.Payloads, res.Endpoints, n, o.s1Rate, o.s1MaxInFlight, o.s1Backlog)

	e, err := b.newEnv(ctx, name, "HOOKRELAY_ENDPOINT_BACKLOG="+strconv.Itoa(o.s1Backlog))
	if err != nil {
		return nil, err
	}
	defer e.cleanup(ctx)
	rs, specs, err := startFleet(o.s1Endpoints, "fast-", "bench.s1.", Behaviour{TrackIDs: true}, o.verifyEvery, o.s1Rate, o.s1MaxInFlight)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	if err := e.addEndpoints(ctx, specs); err != nil {
		return nil, err
	}
	t := time.Now()
	if err := b.preload(ctx, gen, e.prefix+"events", n, func(i int) string {
		return "bench.s1." + strconv.Itoa(i%o.s1Endpoints)
	}); err != nil {
		return nil, err
	}
	res.PreloadSeconds = round1(time.Since(t).Seconds())
	b.logf("  preloaded in %.1fs; starting hookrelay", res.PreloadSeconds)

	if err := e.start(ctx); err != nil {
		return nil, err
	}
	defer e.Stop()
	ready := time.Now()
	profDone := make(chan struct{})
	if o.profile > 0 && !github {
		go func() {
			defer close(profDone)
			// Start once the drain is under way, so the profile sees the
			// steady state.
			for ctx.Err() == nil {
				if _, ok := rs.total(); ok >= int64(n)/10 {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			e.profile(ctx, "cpu", fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(o.profile.Seconds())))
		}()
	} else {
		close(profDone)
	}
	if err := b.waitDelivered(ctx, e, rs, int64(n), o.drainTimeout); err != nil {
		return nil, err
	}
	<-profDone
	if o.profile > 0 && !github {
		e.profile(ctx, "allocs", "/debug/pprof/allocs")
	}
	done := rs.completions()
	w, ok := steadyWindow(done, 0.1, 0.9)
	if !ok {
		return nil, errors.New("too few completions for a steady-state window")
	}
	last := w.End
	for _, d := range done {
		last = time.Unix(0, max(last.UnixNano(), d))
	}
	res.DrainSeconds = round1(last.Sub(ready).Seconds())
	res.DeliveriesPerSec = round1(w.Rate())
	res.WindowSeconds, res.WindowCount = round1(w.Seconds()), w.Count
	res.Processes = e.cpuReport(w.Start, w.End)
	res.KafkaProbe = e.probe.Result(w.Start, w.End)
	hr := res.Processes["hookrelay"]
	res.HookrelayCores = hr.Cores
	res.CPUPer1000 = per1000(res.Processes, "hookrelay", w.Count)
	res.KafkaCPUPer1000 = per1000(res.Processes, "kafka", w.Count)
	res.PeakRSSMiB = round1(float64(peakRSS(e.smp.Series("hookrelay"), time.Time{}, time.Time{})) / 1024)
	sinkRows := e.metricAt("hookrelay_audit_sink_records_total", w.End) - e.metricAt("hookrelay_audit_sink_records_total", w.Start)
	res.SinkRowsPerSec = round1(sinkRows / w.Seconds())
	res.Parked = e.metric("hookrelay_deliveries_parked_total")
	for _, r := range rs {
		res.Duplicates += r.duplicates.Load()
	}
	res.Connections = rs.connections()

	quiesce(ctx, rs, time.Second, 30*time.Second)
	res.Check = e.checkAttempts(ctx, rs, o.checkTimeout)
	if err := e.Stop(); err != nil {
		res.Check.OK = false
		res.Check.Mismatches = append(res.Check.Mismatches, err.Error())
	}
	b.logf("  => %.0f deliveries/s sustained (%d in %.1fs window); CPU-s per 1000: hookrelay %.3f, kafka %.3f; hookrelay %.2f cores, peak RSS %.0f MiB; sink %.0f rows/s; %d connections opened; check %s",
		res.DeliveriesPerSec, res.WindowCount, res.WindowSeconds, res.CPUPer1000, res.KafkaCPUPer1000, res.HookrelayCores, res.PeakRSSMiB, res.SinkRowsPerSec, res.Connections, checkWord(res.Check))
	b.logf("     CPU in window (cores): %s; %s", coresLine(res.Processes), res.KafkaProbe)
	return res, nil
}

// waitDelivered waits until the receivers answered want requests 2xx,
// printing progress every few seconds, or fails after timeout.
func (b *bench) waitDelivered(ctx context.Context, e *env, rs receivers, want int64, timeout time.Duration) error {
	start := time.Now()
	lastAt, lastOK := start, int64(0)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	report := time.Now()
	for {
		_, ok := rs.total()
		if ok >= want {
			return nil
		}
		if e.hr != nil && e.hr.Exited() {
			return fmt.Errorf("hookrelay exited (%v); last lines of %s:\n%s", e.hr.Err(), e.logPath, childproc.Tail(e.logPath, 20))
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("only %d of %d deliveries arrived within %s", ok, want, timeout)
		}
		if time.Since(report) >= b.o.progress {
			now := time.Now()
			s, _ := e.smp.Last("hookrelay")
			b.logf("  delivered %d/%d (%.0f/s now); hookrelay %.1f CPU-s, RSS %.0f MiB; parked %.0f",
				ok, want, float64(ok-lastOK)/now.Sub(lastAt).Seconds(), s.CPU, float64(s.RSSKiB)/1024,
				e.metric("hookrelay_deliveries_parked_total"))
			lastAt, lastOK, report = now, ok, now
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func checkWord(c Check) string {
	if c.OK {
		return fmt.Sprintf("OK (%d requests = %d rows)", c.Requests, c.Rows)
	}
	return fmt.Sprintf("FAILED (%d requests, %d rows; %v; bad signatures %d)", c.Requests, c.Rows, c.Mismatches, c.BadSignatures)
}

func coresLine(ps map[string]procFigures) string {
	s := ""
	for _, name := range []string{"hookrelay", "hookbench", "kafka", "clickhouse"} {
		if f, ok := ps[name]; ok {
			s += fmt.Sprintf("%s %.2f  ", name, f.Cores)
		}
	}
	return s
}
