package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"
)

// BacklogPoint is hookrelay's state once a given number of deliveries for
// the dead endpoint were pending (fanned out, taken by the dispatcher).
type BacklogPoint struct {
	Pending      int     `json:"pending"`
	ReachedAfter float64 `json:"reached_after_s"`
	RSSMiB       float64 `json:"rss_mib"`        // mean over five samples once caught up
	HeapInuseMiB float64 `json:"heap_inuse_mib"` // Go heap in use (go_memstats_heap_inuse_bytes) at the end of those samples
	Goroutines   float64 `json:"goroutines"`
	RelayBuffer  float64 `json:"relay_buffered"` // records the retry relay holds in memory (hookrelay_retry_relay_buffered)
	Backlog      float64 `json:"dispatch_backlog"`
	PeakRSSMiB   float64 `json:"peak_rss_mib_so_far"`
	Parked       float64 `json:"parked"`
	CaughtUp     bool    `json:"caught_up"`
}

// BacklogResult is scenario 6.
type BacklogResult struct {
	DeadEndpointURL   string                 `json:"dead_endpoint_url"`
	EndpointBacklog   int                    `json:"endpoint_backlog"`
	HealthyEndpoints  int                    `json:"healthy_endpoints"`
	HealthyOffered    float64                `json:"healthy_offered_per_s"`
	First             BacklogPoint           `json:"first"`
	Last              BacklogPoint           `json:"last"`
	RSSRatio          float64                `json:"rss_ratio"`        // last / first; bounded means <= 1.1
	HeapRatio         float64                `json:"heap_inuse_ratio"` // the same for the Go heap in use
	Bounded           bool                   `json:"bounded"`
	HealthyPerSec     float64                `json:"healthy_delivered_per_s_while_growing"`
	HealthyRatio      float64                `json:"healthy_ratio_to_offered"`
	HealthyLatency    Dist                   `json:"healthy_latency_while_growing"`
	DeadProducePerSec float64                `json:"dead_produce_per_s"`
	CPUPer1000        float64                `json:"hookrelay_cpu_s_per_1000_healthy"` // per healthy delivery while growing (taking in the dead backlog costs too)
	KafkaCPUPer1000   float64                `json:"kafka_cpu_s_per_1000_healthy"`
	Processes         map[string]procFigures `json:"processes"`
	KafkaProbe        ProbeResult            `json:"kafka_probe"` // while the backlog grew
	Check             Check                  `json:"check"`
}

// runBacklog is scenario 6: a dead endpoint (its port refuses connections)
// subscribed to events produced as fast as Kafka takes them, until first and
// then last deliveries are pending for it, while healthy endpoints get a
// steady paced load. hookrelay's RSS is read once the pipeline has caught up
// with each mark (fan-out lag near 0 and the dispatcher's parked count
// covering the backlog beyond its in-memory cap).
func (b *bench) runBacklog(ctx context.Context) (*BacklogResult, error) {
	o := b.o
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	deadURL := "http://" + ln.Addr().String() + "/dead"
	ln.Close() // nothing listens there any more: connection refused
	res := &BacklogResult{DeadEndpointURL: deadURL, EndpointBacklog: 1000, HealthyEndpoints: o.s6Healthy, HealthyOffered: o.s6HealthyRate}
	b.logf("scenario 6 (backlog): dead endpoint %s, pending marks %d and %d; %d healthy endpoints at %g events/s",
		deadURL, o.s6First, o.s6Pending, o.s6Healthy, o.s6HealthyRate)
	e, err := b.newEnv(ctx, "s6")
	if err != nil {
		return nil, err
	}
	defer e.cleanup(ctx)
	rs, specs, err := startFleet(o.s6Healthy, "healthy-", "bench.s6.h", Behaviour{}, o.verifyEvery, 200, 8)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	specs = append(specs, endpointSpec{ID: "dead", URL: deadURL, Secret: rs[0].secret, Events: []string{"bench.s6.dead"}, Rate: 10, MaxInFlight: 4})
	if err := e.addEndpoints(ctx, specs); err != nil {
		return nil, err
	}
	if err := e.start(ctx); err != nil {
		return nil, err
	}
	defer e.Stop()

	hgen := newEventGen(b.runID+"-s6h-", o.payloadBytes)
	dgen := newEventGen(b.runID+"-s6d-", o.payloadBytes)
	start := time.Now()
	stopHealthy := make(chan struct{})
	healthyDone := make(chan error, 1)
	var healthyN int
	go func() {
		produced, err := b.paced(ctx, hgen, e.prefix+"events", o.s6HealthyRate, stopHealthy, func(i int) string {
			return "bench.s6.h" + strconv.Itoa(i%o.s6Healthy)
		})
		healthyN = len(produced)
		healthyDone <- err
	}()
	dead := func(int) string { return "bench.s6.dead" }
	t := time.Now()
	if err := b.preload(ctx, dgen, e.prefix+"events", o.s6First, dead); err != nil {
		return nil, err
	}
	res.First = b.backlogPoint(ctx, e, o.s6First, start)
	profDone := make(chan struct{})
	if o.profile > 0 {
		go func() {
			defer close(profDone)
			e.profile(ctx, "cpu", fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(o.profile.Seconds())))
		}()
	} else {
		close(profDone)
	}
	if err := b.preload(ctx, dgen, e.prefix+"events", o.s6Pending-o.s6First, dead); err != nil {
		return nil, err
	}
	res.DeadProducePerSec = round1(float64(o.s6Pending) / time.Since(t).Seconds())
	<-profDone
	res.Last = b.backlogPoint(ctx, e, o.s6Pending, start)
	growEnd := time.Now()
	close(stopHealthy)
	if err := <-healthyDone; err != nil {
		return nil, err
	}
	res.RSSRatio = ratio(res.Last.RSSMiB, res.First.RSSMiB)
	res.HeapRatio = ratio(res.Last.HeapInuseMiB, res.First.HeapInuseMiB)
	res.Bounded = res.RSSRatio <= 1.1
	from := start.Add(o.warmup)
	res.HealthyPerSec = round1(float64(countBetween(rs.completions(), from, growEnd)) / growEnd.Sub(from).Seconds())
	res.HealthyRatio = ratio(res.HealthyPerSec, o.s6HealthyRate)
	res.HealthyLatency = summarize(rs.latencies(from, growEnd))
	res.Processes = e.cpuReport(start, growEnd)
	grown := countBetween(rs.completions(), start, growEnd)
	res.CPUPer1000, res.KafkaCPUPer1000 = per1000(res.Processes, "hookrelay", grown), per1000(res.Processes, "kafka", grown)
	res.KafkaProbe = e.probe.Result(start, growEnd)
	if err := b.waitDelivered(ctx, e, rs, int64(healthyN), 3*time.Minute); err != nil {
		b.logf("  healthy endpoints: %v", err)
	}
	quiesce(ctx, rs, time.Second, 30*time.Second)
	res.Check = e.checkAttempts(ctx, rs, o.checkTimeout)
	if err := e.Stop(); err != nil {
		res.Check.OK = false
		res.Check.Mismatches = append(res.Check.Mismatches, err.Error())
	}
	b.logf("  => RSS %.0f MiB at %d pending, %.0f MiB at %d pending (ratio %.2f, bounded %v; Go heap ratio %.2f); healthy %.0f/s of %g offered while growing (p99 %.0f ms); check %s",
		res.First.RSSMiB, res.First.Pending, res.Last.RSSMiB, res.Last.Pending, res.RSSRatio, res.Bounded, res.HeapRatio,
		res.HealthyPerSec, o.s6HealthyRate, res.HealthyLatency.P99, checkWord(res.Check))
	b.logf("     CPU while growing (cores): %s; %s", coresLine(res.Processes), res.KafkaProbe)
	return res, nil
}

// backlogPoint waits until hookrelay has taken in pending dead deliveries
// (fan-out lag <= 100 and parked >= pending - endpoint backlog - 1 %), then
// averages its RSS over three samples.
func (b *bench) backlogPoint(ctx context.Context, e *env, pending int, start time.Time) BacklogPoint {
	p := BacklogPoint{Pending: pending}
	deadline := time.Now().Add(b.o.drainTimeout)
	want := float64(pending-1000) * 0.99
	report := time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		lag := int64(-1)
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lags, err := b.adm.Lag(lctx, e.prefix+"fanout")
		cancel()
		if err == nil {
			if l, ok := lags[e.prefix+"fanout"]; ok && l.Error() == nil {
				lag = l.Lag.Total()
			}
		}
		parked := e.metric("hookrelay_deliveries_parked_total")
		if lag >= 0 && lag <= 100 && parked >= want {
			p.CaughtUp = true
			break
		}
		if time.Since(report) >= b.o.progress {
			s, _ := e.smp.Last("hookrelay")
			b.logf("  catching up with %d pending: fan-out lag %d, parked %.0f, RSS %.0f MiB, hookrelay %.1f CPU-s",
				pending, lag, parked, float64(s.RSSKiB)/1024, s.CPU)
			report = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
	p.ReachedAfter = round1(time.Since(start).Seconds())
	t0 := time.Now()
	time.Sleep(5 * b.o.sample)
	ser := e.smp.Series("hookrelay")
	p.RSSMiB = round1(float64(meanRSS(ser, t0, time.Now())) / 1024)
	p.PeakRSSMiB = round1(float64(peakRSS(ser, time.Time{}, time.Time{})) / 1024)
	p.Parked = e.metric("hookrelay_deliveries_parked_total")
	p.HeapInuseMiB = round1(e.metric("go_memstats_heap_inuse_bytes") / (1 << 20))
	if b.o.profile > 0 {
		e.profile(ctx, "heap-"+strconv.Itoa(pending), "/debug/pprof/heap?gc=1")
	}
	p.Goroutines = e.metric("go_goroutines")
	p.RelayBuffer = e.metric("hookrelay_retry_relay_buffered")
	p.Backlog = e.metric("hookrelay_dispatch_backlog")
	b.logf("  %d pending (caught up %v after %.0fs): RSS %.0f MiB (peak so far %.0f), Go heap in use %.0f MiB, %0.f goroutines, parked %.0f, dispatch backlog %.0f, relay buffered %.0f",
		pending, p.CaughtUp, p.ReachedAfter, p.RSSMiB, p.PeakRSSMiB, p.HeapInuseMiB, p.Goroutines, p.Parked, p.Backlog, p.RelayBuffer)
	if !p.CaughtUp {
		b.logf("  WARNING: hookrelay did not catch up with %d pending within %s", pending, b.o.drainTimeout)
	}
	return p
}
