package main

import (
	"context"
	"strconv"
	"time"
)

// BurstResult is scenario 10: healthy endpoints under a steady paced load
// while one endpoint receives a burst of -burst-events events produced at
// -burst-rate per second.
type BurstResult struct {
	HealthyEndpoints int                    `json:"healthy_endpoints"`
	HealthyOffered   float64                `json:"healthy_offered_per_s"`
	BurstEvents      int                    `json:"burst_events"`
	BurstRate        float64                `json:"burst_rate_per_s"`          // offered
	BurstProduced    float64                `json:"burst_produced_per_s"`      // achieved by the producer
	BurstEndpointCap float64                `json:"burst_endpoint_rate_limit"` // rate_per_sec of the burst endpoint
	BurstSeconds     float64                `json:"burst_s"`                   // first to last burst event produced
	BurstDelivered   int64                  `json:"burst_delivered"`           // by the end of the measurement
	HealthyLatency   Dist                   `json:"healthy_latency"`           // healthy events produced during the burst
	HealthyP99Bound  float64                `json:"healthy_p99_lower_bound_ms"`
	HealthyFrac      float64                `json:"healthy_delivered_fraction"`
	HealthyPerSec    float64                `json:"healthy_delivered_per_s"`
	CPUPer1000       float64                `json:"hookrelay_cpu_s_per_1000"` // per delivery (healthy + burst) during the burst
	KafkaCPUPer1000  float64                `json:"kafka_cpu_s_per_1000"`
	Processes        map[string]procFigures `json:"processes"`
	KafkaProbe       ProbeResult            `json:"kafka_probe"`
	Check            Check                  `json:"check"`
}

// runBurst is scenario 10: -burst-healthy fast endpoints get -burst-healthy-rate
// events/s in all (open loop) from start to end; after -warmup, one more fast
// endpoint ("burst", rate limit -burst-endpoint-rate) gets -burst-events events
// produced at -burst-rate. The figure is the healthy endpoints' latency for
// the events produced while the burst was produced (the goal: p99 <= 2 s);
// undelivered ones count as waiting until the measurement ended (a lower
// bound). The burst endpoint is disabled at the end, so the rest of its
// backlog ends without requests.
func (b *bench) runBurst(ctx context.Context) (*BurstResult, error) {
	o := b.o
	res := &BurstResult{HealthyEndpoints: o.burstHealthy, HealthyOffered: o.burstHealthyRate, BurstEvents: o.burstEvents,
		BurstRate: o.burstRate, BurstEndpointCap: o.burstEndpointRate}
	b.logf("scenario 10 (burst): %d healthy endpoints at %g events/s; one endpoint gets %d events at %g/s (its rate limit %g/s)",
		o.burstHealthy, o.burstHealthyRate, o.burstEvents, o.burstRate, o.burstEndpointRate)
	e, err := b.newEnv(ctx, "s10")
	if err != nil {
		return nil, err
	}
	defer e.cleanup(ctx)
	rs, specs, err := startFleet(o.burstHealthy, "healthy-", "bench.s10.h", Behaviour{}, o.verifyEvery, 200, 8)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	br, err := startReceiver("burst", Behaviour{}, o.verifyEvery)
	if err != nil {
		return nil, err
	}
	defer br.Close()
	all := append(receivers{br}, rs...)
	specs = append(specs, endpointSpec{ID: "burst", URL: br.url, Secret: br.secret, Events: []string{"bench.s10.burst"},
		Rate: o.burstEndpointRate, MaxInFlight: 16})
	if err := e.addEndpoints(ctx, specs); err != nil {
		return nil, err
	}
	if err := e.start(ctx); err != nil {
		return nil, err
	}
	defer e.Stop()

	hgen := newEventGen(b.runID+"-s10h-", o.payloadBytes)
	bgen := newEventGen(b.runID+"-s10b-", o.payloadBytes)
	stopHealthy := make(chan struct{})
	healthyDone := make(chan error, 1)
	var healthyN int
	go func() {
		produced, err := b.paced(ctx, hgen, e.prefix+"events", o.burstHealthyRate, stopHealthy, func(i int) string {
			return "bench.s10.h" + strconv.Itoa(i%o.burstHealthy)
		})
		healthyN = len(produced)
		healthyDone <- err
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(o.warmup):
	}
	from := time.Now()
	burstDone := make(chan struct{})
	var burstN int
	var burstErr error
	go func() {
		defer close(burstDone)
		var produced []int64
		produced, burstErr = b.pacedN(ctx, bgen, e.prefix+"events", o.burstRate, o.burstEvents, nil, func(int) string {
			return "bench.s10.burst"
		})
		burstN = len(produced)
	}()
	go b.progressUntil(ctx, e, all, from.Add(o.drainTimeout), burstDone)
	<-burstDone
	to := time.Now()
	if burstErr != nil {
		return nil, burstErr
	}
	res.BurstSeconds = round1(to.Sub(from).Seconds())
	res.BurstProduced = round1(float64(burstN) / to.Sub(from).Seconds())
	b.logf("  burst of %d produced in %.1fs (%.0f/s)", burstN, res.BurstSeconds, res.BurstProduced)
	// Keep the healthy load on a little longer, so events produced at the
	// burst's end are measured against an unchanged load.
	select {
	case <-ctx.Done():
	case <-time.After(o.warmup):
	}
	close(stopHealthy)
	if err := <-healthyDone; err != nil {
		return nil, err
	}
	if err := b.waitDelivered(ctx, e, rs, int64(healthyN), 2*time.Minute); err != nil {
		b.logf("  healthy endpoints: %v", err)
	}
	lat := rs.latencies(from, to)
	res.HealthyLatency = summarize(lat)
	// Healthy events produced during the burst: rate × duration (open loop).
	want := int(o.burstHealthyRate * to.Sub(from).Seconds())
	if want > 0 {
		res.HealthyFrac = round3(float64(len(lat)) / float64(want))
	}
	censored := lat
	if missing := want - len(lat); missing > 0 {
		censored = append([]int64(nil), lat...)
		wait := time.Since(to).Nanoseconds()
		for range missing {
			censored = append(censored, wait)
		}
	}
	res.HealthyP99Bound = percentileMs(censored, 99)
	res.HealthyPerSec = round1(float64(countBetween(rs.completions(), from, to)) / to.Sub(from).Seconds())
	res.Processes = e.cpuReport(from, to)
	res.KafkaProbe = e.probe.Result(from, to)
	inWin := countBetween(all.completions(), from, to)
	res.CPUPer1000, res.KafkaCPUPer1000 = per1000(res.Processes, "hookrelay", inWin), per1000(res.Processes, "kafka", inWin)

	if _, err := e.hookrelayCmd(ctx, "endpoints", "disable", "burst", "--reason", "bench-end"); err != nil {
		b.logf("  disable burst endpoint: %v", err)
	}
	quiesce(ctx, all, 2*time.Second, 30*time.Second)
	res.BurstDelivered = br.requests.Load()
	res.Check = e.checkAttempts(ctx, all, o.checkTimeout)
	if err := e.Stop(); err != nil {
		res.Check.OK = false
		res.Check.Mismatches = append(res.Check.Mismatches, err.Error())
	}
	b.logf("  => healthy endpoints during the burst: p50 %.1f ms, p99 %.1f ms (%d events, %.3f of offered; p99 counting the rest >= %.0f ms), %.0f/s; burst endpoint %d requests; CPU-s per 1000: hookrelay %.3f, kafka %.3f; check %s",
		res.HealthyLatency.P50, res.HealthyLatency.P99, res.HealthyLatency.N, res.HealthyFrac, res.HealthyP99Bound, res.HealthyPerSec,
		res.BurstDelivered, res.CPUPer1000, res.KafkaCPUPer1000, checkWord(res.Check))
	b.logf("     CPU during the burst (cores): %s; %s", coresLine(res.Processes), res.KafkaProbe)
	return res, nil
}
