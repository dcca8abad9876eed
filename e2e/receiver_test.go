package e2e

// Go webhook receivers for the e2e tests: each records every request it
// sees (arrival and answer times, headers, exact body bytes), verifies its
// signature with the third-party Standard Webhooks library, counts accepted
// TCP connections, and tracks how many requests it holds open at once.

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// request is one request a receiver saw.
type request struct {
	Receiver  string
	Arrived   time.Time // when the handler started
	Answered  time.Time // when the status was written; zero if never
	Status    int       // status written; 0 if never answered
	Nth       int       // 1 for the first request of this webhook-id at this receiver
	WebhookID string
	Timestamp string // webhook-timestamp header
	Signature string // webhook-signature header
	Header    http.Header
	Body      []byte
	VerifyErr error // third-party verification of the request as received
}

// BodySHA is the hex SHA-256 of the body.
func (r *request) BodySHA() string {
	s := sha256.Sum256(r.Body)
	return hex.EncodeToString(s[:])
}

// answer is what a behaviour makes the receiver do with one request.
type answer struct {
	Status int
	Header http.Header
	Hang   bool // never answer: hold the request until the client gives up or the receiver is released
}

// behaviour decides the answer to a request; nth counts requests of its
// webhook-id at this receiver, from 1.
type behaviour func(r *request) answer

func always(status int) behaviour {
	return func(*request) answer { return answer{Status: status} }
}

// delayed answers 200 after d.
func delayed(d time.Duration) behaviour {
	return func(*request) answer {
		time.Sleep(d) // simulates a slow receiver; not synchronization
		return answer{Status: http.StatusOK}
	}
}

func hang() behaviour { return func(*request) answer { return answer{Hang: true} } }

// hostile is the seed's hostile receiver, per webhook-id: first 500, then 429
// with Retry-After: retryAfter seconds, then 200.
func hostile(retryAfter int) behaviour {
	return func(r *request) answer {
		switch r.Nth {
		case 1:
			return answer{Status: http.StatusInternalServerError}
		case 2:
			return answer{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {strconv.Itoa(retryAfter)}}}
		default:
			return answer{Status: http.StatusOK}
		}
	}
}

// redirectTo answers 302 with Location: url.
func redirectTo(url string) behaviour {
	return func(*request) answer {
		return answer{Status: http.StatusFound, Header: http.Header{"Location": {url}}}
	}
}

// receiver is one webhook receiver on its own port.
type receiver struct {
	Name   string
	URL    string // http://host:port/name
	Secret string
	Addr   string // host:port

	t       testing.TB
	verify  *standardwebhooks.Webhook
	act     behaviour
	accepts atomic.Int64
	release chan struct{} // closed by Release: hanging requests return
	relOnce sync.Once
	srv     *http.Server

	mu    sync.Mutex
	reqs  []*request
	perID map[string]int
	open  int
	peak  int
}

// newReceiver starts a receiver on 127.0.0.1 with a fresh secret. It stops
// when the test ends (hanging requests are released first).
func newReceiver(t testing.TB, name string, act behaviour) *receiver {
	return newReceiverOn(t, receiverHost(t), name, act)
}

// newReceiverOn is newReceiver listening on host (e.g. 127.0.0.2).
func newReceiverOn(t testing.TB, host, name string, act behaviour) *receiver {
	t.Helper()
	secret := newSecret()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("receiver %s: standardwebhooks.NewWebhook: %v", name, err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("receiver %s: listen: %v", name, err)
	}
	rc := &receiver{
		Name:    name,
		Secret:  secret,
		Addr:    ln.Addr().String(),
		t:       t,
		verify:  wh,
		act:     act,
		release: make(chan struct{}),
		perID:   make(map[string]int),
	}
	rc.URL = "http://" + rc.Addr + "/" + name
	rc.srv = &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { // owner: rc; the cleanup below waits for it
		defer close(served)
		_ = rc.srv.Serve(&countingListener{Listener: ln, n: &rc.accepts})
	}()
	t.Cleanup(func() {
		rc.Release()
		_ = rc.srv.Close()
		<-served
	})
	return rc
}

// Release makes hanging requests return (with 503) and later ones answer at
// once; idempotent.
func (rc *receiver) Release() { rc.relOnce.Do(func() { close(rc.release) }) }

func (rc *receiver) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	arrived := time.Now()
	body, err := io.ReadAll(io.LimitReader(hr.Body, 4<<20))
	if err != nil {
		return
	}
	r := &request{
		Receiver:  rc.Name,
		Arrived:   arrived,
		WebhookID: hr.Header.Get("webhook-id"),
		Timestamp: hr.Header.Get("webhook-timestamp"),
		Signature: hr.Header.Get("webhook-signature"),
		Header:    hr.Header.Clone(),
		Body:      body,
	}
	r.VerifyErr = rc.verify.Verify(body, hr.Header)
	rc.mu.Lock()
	rc.perID[r.WebhookID]++
	r.Nth = rc.perID[r.WebhookID]
	rc.reqs = append(rc.reqs, r)
	rc.open++
	rc.peak = max(rc.peak, rc.open)
	rc.mu.Unlock()
	defer func() {
		rc.mu.Lock()
		rc.open--
		rc.mu.Unlock()
	}()

	a := rc.act(r)
	if a.Hang {
		select {
		case <-hr.Context().Done(): // the client gave up
			return
		case <-rc.release:
			a.Status = http.StatusServiceUnavailable
		}
	}
	for k, vs := range a.Header {
		w.Header()[k] = vs
	}
	rc.mu.Lock()
	r.Status, r.Answered = a.Status, time.Now()
	rc.mu.Unlock()
	w.WriteHeader(a.Status)
}

// Requests returns a copy of the requests seen so far, in arrival order.
func (rc *receiver) Requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]request, len(rc.reqs))
	for i, r := range rc.reqs {
		out[i] = *r
	}
	return out
}

// Count is the number of requests seen so far.
func (rc *receiver) Count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

// Distinct is the number of distinct webhook-ids seen so far.
func (rc *receiver) Distinct() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.perID)
}

// Open is the number of requests being handled now; Peak the most at once.
func (rc *receiver) Open() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.open
}

func (rc *receiver) Peak() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.peak
}

// Accepts is the number of TCP connections accepted.
func (rc *receiver) Accepts() int64 { return rc.accepts.Load() }

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}
