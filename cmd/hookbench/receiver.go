package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// Behaviour is how a receiver answers.
type Behaviour struct {
	// Latency is how long it waits before answering 200. Zero: at once.
	Latency time.Duration
	// FailFirst answers 503 to the first FailFirst requests of each
	// webhook-id, then 200 (retry precision).
	FailFirst int
	// Hang holds every request open until the client gives up (hookrelay's
	// request timeout) or the receiver is released, then answers 503.
	Hang bool
	// LiveWindow, with Hang, also keeps peakLive: the most held requests
	// younger than LiveWindow (a little less than the client's timeout) at
	// any arrival. An older one has been or is about to be abandoned by the
	// client; the server just has not noticed the closed connection yet.
	LiveWindow time.Duration
	// TrackIDs records every request's arrival per webhook-id (for retry
	// precision) and counts webhook-ids answered 2xx twice (duplicates).
	TrackIDs bool
}

// receiver is one in-process webhook receiver: an http.Server on its own
// 127.0.0.1 port (so hookrelay's per-host connection pool treats every
// endpoint as a distinct host, as in production), answering per its
// Behaviour, verifying every verifyEvery-th signature with the third-party
// Standard Webhooks library, and recording what the benchmark needs.
//
// Safe for concurrent use. Start with startReceiver; Close stops the server
// and waits for its handlers.
type receiver struct {
	id          string
	secret      string
	url         string
	behaviour   Behaviour
	verifyEvery int64
	wh          *standardwebhooks.Webhook

	srv      *http.Server
	served   chan struct{}
	released chan struct{}
	release  sync.Once

	requests   atomic.Int64 // every request that reached the handler
	ok         atomic.Int64 // answered 2xx
	inFlight   atomic.Int64
	peak       atomic.Int64
	verified   atomic.Int64
	badSig     atomic.Int64
	duplicates atomic.Int64
	peakLive   atomic.Int64
	conns      atomic.Int64 // TCP connections accepted

	mu        sync.Mutex
	completed []int64 // unix ns of each 2xx answer
	latency   []latencySample
	lastErr   string
	arrivals  map[string][]int64 // webhook-id -> arrival instants (TrackIDs)
	succeeded map[string]bool    // webhook-id answered 2xx (TrackIDs)
	held      map[int64]int64    // request number -> arrival, while held (Hang)
}

// latencySample is one 2xx request's produce and receive instants (unix ns).
type latencySample struct{ produced, received int64 }

// startReceiver listens on a fresh loopback port and serves.
func startReceiver(id string, b Behaviour, verifyEvery int) (*receiver, error) {
	secret := webhook.NewSecret()
	wh, err := standardwebhooks.NewWebhook(secret.String())
	if err != nil {
		return nil, fmt.Errorf("receiver %s: %w", id, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("receiver %s: %w", id, err)
	}
	r := &receiver{
		id: id, secret: secret.String(), behaviour: b, verifyEvery: int64(max(verifyEvery, 1)), wh: wh,
		url:      "http://" + ln.Addr().String() + "/hook/" + id,
		served:   make(chan struct{}),
		released: make(chan struct{}),
	}
	if b.Hang {
		r.held = make(map[int64]int64)
	}
	if b.TrackIDs {
		r.arrivals = make(map[string][]int64)
		r.succeeded = make(map[string]bool)
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				r.conns.Add(1)
			}
		}}
	go func() {
		defer close(r.served)
		_ = r.srv.Serve(ln) // ErrServerClosed after Close
	}()
	return r, nil
}

// ServeHTTP handles one webhook request.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	arrived := time.Now().UnixNano()
	n := r.requests.Add(1)
	cur := r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	for {
		p := r.peak.Load()
		if cur <= p || r.peak.CompareAndSwap(p, cur) {
			break
		}
	}
	body, err := readBody(req)
	if err != nil {
		r.fail("read body: " + err.Error())
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	id := req.Header.Get(webhook.HeaderWebhookID)
	if id != "" && n%r.verifyEvery == 0 {
		if err := r.wh.Verify(body, req.Header); err != nil {
			r.badSig.Add(1)
			r.fail(fmt.Sprintf("signature of %s: %v", id, err))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		r.verified.Add(1)
	}
	prior := 0
	if r.behaviour.TrackIDs && id != "" {
		r.mu.Lock()
		prior = len(r.arrivals[id])
		r.arrivals[id] = append(r.arrivals[id], arrived)
		r.mu.Unlock()
	}
	switch {
	case r.behaviour.Hang:
		r.hold(n, arrived)
		defer r.unhold(n)
		select {
		case <-req.Context().Done():
			return // the client gave up; nothing to answer
		case <-r.released:
			http.Error(w, "released", http.StatusServiceUnavailable)
			return
		}
	case prior < r.behaviour.FailFirst:
		http.Error(w, "failing on purpose", http.StatusServiceUnavailable)
		return
	case r.behaviour.Latency > 0:
		t := time.NewTimer(r.behaviour.Latency)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return
		}
	}
	w.WriteHeader(http.StatusOK)
	done := time.Now().UnixNano()
	r.ok.Add(1)
	produced, hasProduced := parseProducedNs(body)
	r.mu.Lock()
	r.completed = append(r.completed, done)
	if hasProduced {
		r.latency = append(r.latency, latencySample{produced: produced, received: arrived})
	}
	if r.behaviour.TrackIDs && id != "" {
		if r.succeeded[id] {
			r.duplicates.Add(1)
		}
		r.succeeded[id] = true
	}
	r.mu.Unlock()
}

// readBody reads the whole request body, at most 1 MiB.
func readBody(req *http.Request) ([]byte, error) {
	const limit = 1 << 20
	if req.ContentLength > limit {
		return nil, errors.New("body too large")
	}
	var buf []byte
	if req.ContentLength >= 0 {
		buf = make([]byte, req.ContentLength)
		_, err := io.ReadFull(req.Body, buf)
		return buf, err
	}
	return io.ReadAll(io.LimitReader(req.Body, limit))
}

// hold registers a held request and updates peakLive.
func (r *receiver) hold(n, arrived int64) {
	r.mu.Lock()
	r.held[n] = arrived
	live := int64(0)
	for _, at := range r.held {
		if r.behaviour.LiveWindow == 0 || arrived-at < r.behaviour.LiveWindow.Nanoseconds() {
			live++
		}
	}
	r.mu.Unlock()
	for {
		p := r.peakLive.Load()
		if live <= p || r.peakLive.CompareAndSwap(p, live) {
			return
		}
	}
}

func (r *receiver) unhold(n int64) {
	r.mu.Lock()
	delete(r.held, n)
	r.mu.Unlock()
}

func (r *receiver) fail(msg string) {
	r.mu.Lock()
	r.lastErr = msg
	r.mu.Unlock()
}

// Release makes a hanging receiver answer 503 to every held and later
// request, so nothing stays in flight when the run is checked.
func (r *receiver) Release() { r.release.Do(func() { close(r.released) }) }

// Close stops the server, cutting held requests, and waits for it.
func (r *receiver) Close() {
	r.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil {
		r.srv.Close()
	}
	<-r.served
}

// snapshot copies what the receiver recorded.
func (r *receiver) snapshot() receiverSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := receiverSnapshot{
		ID:         r.id,
		Requests:   r.requests.Load(),
		OK:         r.ok.Load(),
		InFlight:   r.inFlight.Load(),
		Peak:       r.peak.Load(),
		Verified:   r.verified.Load(),
		BadSig:     r.badSig.Load(),
		Duplicates: r.duplicates.Load(),
		LastErr:    r.lastErr,
		Completed:  append([]int64(nil), r.completed...),
		Latency:    append([]latencySample(nil), r.latency...),
	}
	if r.arrivals != nil {
		s.Arrivals = make(map[string][]int64, len(r.arrivals))
		for k, v := range r.arrivals {
			s.Arrivals[k] = append([]int64(nil), v...)
		}
	}
	return s
}

// receiverSnapshot is a copy of a receiver's records.
type receiverSnapshot struct {
	ID                                                         string
	Requests, OK, InFlight, Peak, Verified, BadSig, Duplicates int64
	LastErr                                                    string
	Completed                                                  []int64
	Latency                                                    []latencySample
	Arrivals                                                   map[string][]int64
}

// receivers is a set of receivers owned by one scenario.
type receivers []*receiver

// Close closes them all.
func (rs receivers) Close() {
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(r.Close)
	}
	wg.Wait()
}

// total sums requests and 2xx answers.
func (rs receivers) total() (requests, ok int64) {
	for _, r := range rs {
		requests += r.requests.Load()
		ok += r.ok.Load()
	}
	return requests, ok
}

// connections sums the TCP connections the receivers accepted.
func (rs receivers) connections() int64 {
	var n int64
	for _, r := range rs {
		n += r.conns.Load()
	}
	return n
}

// inFlight sums requests being handled now.
func (rs receivers) inFlight() int64 {
	var n int64
	for _, r := range rs {
		n += r.inFlight.Load()
	}
	return n
}

// completions merges every 2xx instant.
func (rs receivers) completions() []int64 {
	var out []int64
	for _, r := range rs {
		r.mu.Lock()
		out = append(out, r.completed...)
		r.mu.Unlock()
	}
	return out
}

// latencies returns receive-minus-produce (ns) of the 2xx requests whose
// event was produced in [from, to), and how many such requests there were.
func (rs receivers) latencies(from, to time.Time) []int64 {
	a, b := from.UnixNano(), to.UnixNano()
	var out []int64
	for _, r := range rs {
		r.mu.Lock()
		for _, l := range r.latency {
			if l.produced >= a && l.produced < b {
				out = append(out, l.received-l.produced)
			}
		}
		r.mu.Unlock()
	}
	return out
}

// signatureProblems sums bad signatures and returns one example message.
func (rs receivers) signatureProblems() (verified, bad int64, example string) {
	for _, r := range rs {
		verified += r.verified.Load()
		if n := r.badSig.Load(); n > 0 {
			bad += n
			r.mu.Lock()
			example = r.id + ": " + r.lastErr
			r.mu.Unlock()
		}
	}
	return verified, bad, example
}

// dumpLatency writes every 2xx request's endpoint, produce and receive
// instants (unix ns) as CSV, for looking at a run afterwards (-dump).
func (rs receivers) dumpLatency(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "endpoint,produced_ns,received_ns,latency_ms")
	for _, r := range rs {
		r.mu.Lock()
		for _, l := range r.latency {
			fmt.Fprintf(w, "%s,%d,%d,%.3f\n", r.id, l.produced, l.received, float64(l.received-l.produced)/1e6)
		}
		r.mu.Unlock()
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
