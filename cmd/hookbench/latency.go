package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// LatencyResult is scenario 2: produce-to-receive latency at a fixed
// offered load.
type LatencyResult struct {
	Endpoints       int                    `json:"endpoints"`
	OfferedPerSec   float64                `json:"offered_events_per_s"`
	RatePerEndpoint float64                `json:"rate_per_endpoint"`
	WarmupSeconds   float64                `json:"warmup_s"`
	WindowSeconds   float64                `json:"window_s"`
	Produced        int                    `json:"produced"`
	DeliveredPerSec float64                `json:"delivered_per_s"` // 2xx in the window
	Latency         Dist                   `json:"latency"`         // events produced in the window
	HookrelayCores  float64                `json:"hookrelay_cores"`
	KafkaCores      float64                `json:"kafka_cores"`
	StackCores      float64                `json:"hookrelay_plus_kafka_cores"`
	CPUPer1000      float64                `json:"hookrelay_cpu_s_per_1000"`
	KafkaCPUPer1000 float64                `json:"kafka_cpu_s_per_1000"`
	PeakRSSMiB      float64                `json:"hookrelay_peak_rss_mib"`
	Processes       map[string]procFigures `json:"processes"`
	KafkaProbe      ProbeResult            `json:"kafka_probe"`
	Check           Check                  `json:"check"`
}

// latencyLoad is one paced run of runLatency: scenario 2 (-s2-*) or the
// steady scenario 9 (-steady-*).
type latencyLoad struct {
	key, title   string
	endpoints    int
	rate, epRate float64
	window       time.Duration
}

// runLatency is scenario 2 (and 9): an open-loop load of l.rate events/s
// spread over l.endpoints fast endpoints; the latency of each event produced
// in the window (after -warmup) is receive time minus produce time.
func (b *bench) runLatency(ctx context.Context, l latencyLoad) (*LatencyResult, error) {
	o := b.o
	res := &LatencyResult{Endpoints: l.endpoints, OfferedPerSec: l.rate, RatePerEndpoint: l.epRate,
		WarmupSeconds: o.warmup.Seconds(), WindowSeconds: l.window.Seconds()}
	b.logf("scenario %s (%s): %g events/s over %d endpoints (rate %g/s each) for %s after %s warm-up",
		l.key, l.title, l.rate, l.endpoints, l.epRate, l.window, o.warmup)
	e, err := b.newEnv(ctx, "s"+l.key)
	if err != nil {
		return nil, err
	}
	defer e.cleanup(ctx)
	typ := "bench.s" + l.key + "."
	rs, specs, err := startFleet(l.endpoints, "lat-", typ, Behaviour{}, o.verifyEvery, l.epRate, 16)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	if err := e.addEndpoints(ctx, specs); err != nil {
		return nil, err
	}
	if err := e.start(ctx); err != nil {
		return nil, err
	}
	defer e.Stop()
	gen := newEventGen(b.runID+"-s"+l.key+"-", o.payloadBytes)
	start := time.Now()
	from, to := start.Add(o.warmup), start.Add(o.warmup+l.window)
	stop := make(chan struct{})
	go func() { b.progressUntil(ctx, e, rs, to, stop); close(stop) }()
	produced, err := b.paced(ctx, gen, e.prefix+"events", l.rate, stop, func(i int) string {
		return typ + strconv.Itoa(i%l.endpoints)
	})
	if err != nil {
		return nil, err
	}
	n := len(produced)
	res.Produced = n
	if err := b.waitDelivered(ctx, e, rs, int64(n), 2*time.Minute); err != nil {
		return nil, err
	}
	e.dump(rs)
	res.Latency = summarize(rs.latencies(from, to))
	inWin := countBetween(rs.completions(), from, to)
	res.DeliveredPerSec = round1(float64(inWin) / to.Sub(from).Seconds())
	res.Processes = e.cpuReport(from, to)
	res.KafkaProbe = e.probe.Result(from, to)
	res.HookrelayCores = res.Processes["hookrelay"].Cores
	res.KafkaCores = res.Processes["kafka"].Cores
	res.StackCores = round3(res.HookrelayCores + res.KafkaCores)
	res.CPUPer1000, res.KafkaCPUPer1000 = per1000(res.Processes, "hookrelay", inWin), per1000(res.Processes, "kafka", inWin)
	res.PeakRSSMiB = res.Processes["hookrelay"].PeakRSSMiB
	quiesce(ctx, rs, time.Second, 30*time.Second)
	res.Check = e.checkAttempts(ctx, rs, o.checkTimeout)
	if err := e.Stop(); err != nil {
		res.Check.OK = false
		res.Check.Mismatches = append(res.Check.Mismatches, err.Error())
	}
	b.logf("  => latency p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms (%d events); %.0f delivered/s; cores hookrelay %.2f + kafka %.2f = %.2f; CPU-s per 1000: hookrelay %.3f, kafka %.3f; check %s",
		res.Latency.P50, res.Latency.P99, res.Latency.P999, res.Latency.Max, res.Latency.N, res.DeliveredPerSec,
		res.HookrelayCores, res.KafkaCores, res.StackCores, res.CPUPer1000, res.KafkaCPUPer1000, checkWord(res.Check))
	b.logf("     CPU in window (cores): %s; %s", coresLine(res.Processes), res.KafkaProbe)
	return res, nil
}

// progressUntil prints progress lines until the deadline (or ctx ends).
func (b *bench) progressUntil(ctx context.Context, e *env, rs receivers, deadline time.Time, stop <-chan struct{}) {
	t := time.NewTicker(b.o.progress)
	defer t.Stop()
	lastAt := time.Now()
	_, lastOK := rs.total()
	for {
		d := time.Until(deadline)
		if d <= 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-time.After(d):
			return
		case now := <-t.C:
			req, ok := rs.total()
			s, _ := e.smp.Last("hookrelay")
			b.logf("  requests %d, 2xx %d (%.0f/s); hookrelay %.1f CPU-s, RSS %.0f MiB, backlog %.0f, parked %.0f",
				req, ok, float64(ok-lastOK)/now.Sub(lastAt).Seconds(), s.CPU, float64(s.RSSKiB)/1024,
				e.metric("hookrelay_dispatch_backlog"), e.metric("hookrelay_deliveries_parked_total"))
			lastAt, lastOK = now, ok
		}
	}
}

// IsolationRun is one run of the isolation load.
type IsolationRun struct {
	Pipeline          string                 `json:"pipeline"` // "hookrelay" or "naive pool of N workers"
	HungEndpoint      bool                   `json:"hung_endpoint"`
	Produced          int                    `json:"produced"`
	FastOfferedInWin  int                    `json:"fast_offered_in_window"`
	FastPerSec        float64                `json:"fast_delivered_per_s"`
	FastDeliveredFrac float64                `json:"fast_delivered_fraction"` // of fast events produced in the window, delivered by the end of the run
	FastLatency       Dist                   `json:"fast_latency"`            // of those delivered
	FastP99Bound      float64                `json:"fast_p99_lower_bound_ms"` // p99 counting undelivered window events as waiting until the run ended
	HungRequests      int64                  `json:"hung_requests"`
	HungPeakInFlight  int64                  `json:"hung_peak_in_flight"`      // concurrent requests held by the hung receiver
	HungPeakLive      int64                  `json:"hung_peak_in_flight_live"` // the same, not counting requests older than the timeout (abandoned by the client, not yet noticed by the server)
	HookrelayCores    float64                `json:"hookrelay_cores"`
	CPUPer1000        float64                `json:"hookrelay_cpu_s_per_1000"`
	KafkaCPUPer1000   float64                `json:"kafka_cpu_s_per_1000"`
	Processes         map[string]procFigures `json:"processes"`
	KafkaProbe        ProbeResult            `json:"kafka_probe"`
	Check             Check                  `json:"check"`
}

// IsolationResult is scenarios 3 and 4 side by side.
type IsolationResult struct {
	FastEndpoints   int                      `json:"fast_endpoints"`
	OfferedPerSec   float64                  `json:"offered_events_per_s"`
	HungShare       float64                  `json:"hung_share"`
	HungTimeout     float64                  `json:"hung_timeout_s"`
	HungMaxInFlight int                      `json:"hung_max_in_flight"`
	FastRate        float64                  `json:"fast_rate_per_endpoint"`
	WindowSeconds   float64                  `json:"window_s"`
	NaiveWorkers    int                      `json:"naive_workers,omitempty"`
	Runs            map[string]*IsolationRun `json:"runs"`
	P99Ratio        float64                  `json:"hookrelay_fast_p99_ratio,omitempty"`        // hung / no hung; goal <= 1.5
	ThroughputRatio float64                  `json:"hookrelay_fast_throughput_ratio,omitempty"` // hung / no hung
	NaiveP99Ratio   float64                  `json:"naive_fast_p99_ratio,omitempty"`
	NaiveThruRatio  float64                  `json:"naive_fast_throughput_ratio,omitempty"`
}

// isoTypes: of every 5 events one goes to the hung endpoint (20 %) and
// four to the fast endpoints in turn.
func isoType(i, fast int) string {
	if i%5 == 4 {
		return "bench.iso.hung"
	}
	return "bench.iso.f" + strconv.Itoa((i/5*4+i%5)%fast)
}

// runIsolation runs the isolation load once: through hookrelay, or (naive)
// through the shared-pool baseline fed by hookrelay's fan-out; with or
// without the hung endpoint subscribed.
func (b *bench) runIsolation(ctx context.Context, key string, hung, naive bool) (*IsolationRun, error) {
	o := b.o
	run := &IsolationRun{Pipeline: "hookrelay", HungEndpoint: hung}
	if naive {
		run.Pipeline = fmt.Sprintf("naive pool of %d workers", o.naiveWorkers)
	}
	b.logf("scenario %s: %s, %d fast endpoints, hung endpoint %v, %g events/s for %s after %s warm-up",
		key, run.Pipeline, o.isoFast, hung, o.isoRate, o.isoDuration, o.warmup)
	e, err := b.newEnv(ctx, "s"+key)
	if err != nil {
		return nil, err
	}
	defer e.cleanup(ctx)
	rs, specs, err := startFleet(o.isoFast, "fast-", "bench.iso.f", Behaviour{}, o.verifyEvery, o.isoFastRate, 8)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	all := rs
	var hr *receiver
	if hung {
		// Live: held for less than the timeout minus 100 ms, so a request
		// the client has abandoned (the server notices the closed
		// connection a moment later) never counts, and more than
		// max-in-flight live requests can only mean the cap was exceeded.
		hr, err = startReceiver("hung", Behaviour{Hang: true, LiveWindow: max(o.hangTimeout-100*time.Millisecond, time.Millisecond)}, o.verifyEvery)
		if err != nil {
			return nil, err
		}
		defer hr.Close()
		all = append(receivers{hr}, rs...)
		specs = append(specs, endpointSpec{ID: "hung", URL: hr.url, Secret: hr.secret, Events: []string{"bench.iso.hung"},
			Rate: o.isoHungRate, MaxInFlight: o.isoHungInFlight, Timeout: o.hangTimeout})
	}
	if err := e.addEndpoints(ctx, specs); err != nil {
		return nil, err
	}
	var pool *naivePool
	poolStop := make(chan struct{})
	poolDone := make(chan error, 1)
	if naive {
		eps := map[string]naiveEndpoint{}
		for _, s := range specs {
			sec, err := webhook.ParseSecret(s.Secret)
			if err != nil {
				return nil, err
			}
			eps[s.ID] = naiveEndpoint{URL: s.URL, Secret: sec, Timeout: s.Timeout}
		}
		if pool, err = newNaivePool(b, e, o.naiveWorkers, eps); err != nil {
			return nil, err
		}
		if err := e.start(ctx, "HOOKRELAY_ROLES=fanout,audit"); err != nil {
			return nil, err
		}
		go func() { poolDone <- pool.Run(ctx, splitBrokers(o.brokers), e.prefix, poolStop) }()
	} else if err := e.start(ctx); err != nil {
		return nil, err
	}
	defer e.Stop()

	gen := newEventGen(b.runID+"-s"+key+"-", o.payloadBytes)
	start := time.Now()
	from, to := start.Add(o.warmup), start.Add(o.warmup+o.isoDuration)
	stop := make(chan struct{})
	go func() { b.progressUntil(ctx, e, all, to, stop); close(stop) }()
	produced, err := b.paced(ctx, gen, e.prefix+"events", o.isoRate, stop, func(i int) string { return isoType(i, o.isoFast) })
	if err != nil {
		return nil, err
	}
	run.Produced = len(produced)
	fastWant := int64(0)
	for i, at := range produced {
		if i%5 == 4 {
			continue
		}
		fastWant++
		if at >= from.UnixNano() && at < to.UnixNano() {
			run.FastOfferedInWin++
		}
	}
	if !naive {
		// hookrelay delivers every fast event; wait for the stragglers.
		if err := b.waitDelivered(ctx, e, rs, fastWant, 2*time.Minute); err != nil {
			b.logf("  %v", err)
		}
	}
	e.dump(rs)
	lat := rs.latencies(from, to)
	run.FastLatency = summarize(lat)
	if run.FastOfferedInWin > 0 {
		run.FastDeliveredFrac = round3(float64(len(lat)) / float64(run.FastOfferedInWin))
	}
	// Undelivered window events waited at least from the window's end until
	// now: counting them so gives a lower bound of the true p99.
	censored := lat
	if missing := run.FastOfferedInWin - len(lat); missing > 0 {
		censored = append([]int64(nil), lat...)
		wait := time.Since(to).Nanoseconds()
		for range missing {
			censored = append(censored, wait)
		}
	}
	run.FastP99Bound = percentileMs(censored, 99)
	inWin := countBetween(all.completions(), from, to)
	run.FastPerSec = round1(float64(countBetween(rs.completions(), from, to)) / to.Sub(from).Seconds())
	run.Processes = e.cpuReport(from, to)
	run.CPUPer1000, run.KafkaCPUPer1000 = per1000(run.Processes, "hookrelay", inWin), per1000(run.Processes, "kafka", inWin)
	run.KafkaProbe = e.probe.Result(from, to)
	run.HookrelayCores = run.Processes["hookrelay"].Cores

	// Quiesce: nothing may be in flight when rows are counted.
	if hung {
		if !naive {
			if _, err := e.hookrelayCmd(ctx, "endpoints", "disable", "hung", "--reason", "bench-end"); err != nil {
				b.logf("  disable hung endpoint: %v", err)
			}
		}
		hr.Release()
	}
	if naive {
		close(poolStop)
		if err := <-poolDone; err != nil {
			b.logf("  naive pool: %v", err)
		}
	}
	if hung {
		run.HungRequests, run.HungPeakInFlight, run.HungPeakLive = hr.requests.Load(), hr.peak.Load(), hr.peakLive.Load()
	}
	quiesce(ctx, all, 2*time.Second, o.hangTimeout+30*time.Second)
	run.Check = e.checkAttempts(ctx, all, o.checkTimeout)
	if err := e.Stop(); err != nil {
		run.Check.OK = false
		run.Check.Mismatches = append(run.Check.Mismatches, err.Error())
	}
	b.logf("  => fast endpoints: %.0f delivered/s, p50 %.1f ms, p99 %.1f ms (%d of %d window events delivered; p99 counting the rest >= %.0f ms); hung: %d requests, peak %d in flight (%d live); check %s",
		run.FastPerSec, run.FastLatency.P50, run.FastLatency.P99, run.FastLatency.N, run.FastOfferedInWin, run.FastP99Bound,
		run.HungRequests, run.HungPeakInFlight, run.HungPeakLive, checkWord(run.Check))
	b.logf("     CPU in window (cores): %s; %s", coresLine(run.Processes), run.KafkaProbe)
	return run, nil
}

// runIsolationAll runs scenarios 3 and/or 4 and computes the ratios.
func (b *bench) runIsolationAll(ctx context.Context, with3, with4 bool) (*IsolationResult, error) {
	o := b.o
	res := &IsolationResult{FastEndpoints: o.isoFast, OfferedPerSec: o.isoRate, HungShare: 0.2,
		HungTimeout: o.hangTimeout.Seconds(), HungMaxInFlight: o.isoHungInFlight, FastRate: o.isoFastRate,
		WindowSeconds: o.isoDuration.Seconds(), Runs: map[string]*IsolationRun{}}
	type plan struct {
		key         string
		name        string
		hung, naive bool
	}
	var plans []plan
	if with3 {
		plans = append(plans, plan{"3a", "hookrelay_no_hung", false, false}, plan{"3b", "hookrelay_hung", true, false})
	}
	if with4 {
		res.NaiveWorkers = o.naiveWorkers
		plans = append(plans, plan{"4a", "naive_no_hung", false, true}, plan{"4b", "naive_hung", true, true})
	}
	for _, p := range plans {
		r, err := b.runIsolation(ctx, p.key, p.hung, p.naive)
		if err != nil {
			return res, fmt.Errorf("scenario %s: %w", p.key, err)
		}
		res.Runs[p.name] = r
	}
	if a, h := res.Runs["hookrelay_no_hung"], res.Runs["hookrelay_hung"]; a != nil && h != nil {
		res.P99Ratio = ratio(h.FastLatency.P99, a.FastLatency.P99)
		res.ThroughputRatio = ratio(h.FastPerSec, a.FastPerSec)
	}
	if a, h := res.Runs["naive_no_hung"], res.Runs["naive_hung"]; a != nil && h != nil {
		res.NaiveP99Ratio = ratio(h.FastLatency.P99, a.FastLatency.P99)
		res.NaiveThruRatio = ratio(h.FastPerSec, a.FastPerSec)
	}
	return res, nil
}
