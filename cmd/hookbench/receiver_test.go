package main

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// send posts body to r with hookrelay's sender, signed with r's secret.
func send(t *testing.T, s *webhook.Sender, r *receiver, id string, body []byte, timeout time.Duration) webhook.Result {
	t.Helper()
	sec, err := webhook.ParseSecret(r.secret)
	if err != nil {
		t.Fatal(err)
	}
	return s.Send(context.Background(), &webhook.Request{URL: r.url, Body: body, WebhookID: id, Secrets: []webhook.Secret{sec}, Timeout: timeout})
}

func newTestSender(t *testing.T) *webhook.Sender {
	t.Helper()
	allow, err := webhook.ParseAllowList("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	s, err := webhook.NewSender(webhook.Options{AllowNetworks: allow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestReceiverFailFirstAndSignatures(t *testing.T) {
	r, err := startReceiver("rx", Behaviour{FailFirst: 2, TrackIDs: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := newTestSender(t)
	produced := time.Now().Add(-50 * time.Millisecond).UnixNano()
	body := []byte(`{"type":"t","timestamp":"2026-01-01T00:00:00Z","data":{"seq":1,"produced_ns":` + strconv.FormatInt(produced, 10) + `}}`)
	var codes []int
	for range 4 {
		codes = append(codes, send(t, s, r, "msg_a", body, 5*time.Second).StatusCode)
	}
	if want := []int{503, 503, 200, 200}; !slices.Equal(codes, want) {
		t.Errorf("statuses = %v, want %v", codes, want)
	}
	snap := r.snapshot()
	if snap.Requests != 4 || snap.OK != 2 || snap.Verified != 4 || snap.BadSig != 0 {
		t.Errorf("requests %d ok %d verified %d bad %d; want 4 2 4 0", snap.Requests, snap.OK, snap.Verified, snap.BadSig)
	}
	if snap.Duplicates != 1 {
		t.Errorf("duplicates = %d, want 1 (msg_a answered 2xx twice)", snap.Duplicates)
	}
	if len(snap.Arrivals["msg_a"]) != 4 || len(snap.Latency) != 2 || snap.Latency[0].produced != produced {
		t.Errorf("arrivals %d latency samples %d; want 4 and 2 with the produced instant", len(snap.Arrivals["msg_a"]), len(snap.Latency))
	}

	// A request signed with another secret is refused and counted.
	other, err := startReceiver("other", Behaviour{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	wrong := &receiver{url: other.url, secret: r.secret}
	if res := send(t, s, wrong, "msg_b", body, 5*time.Second); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrongly signed request got %d, want 401", res.StatusCode)
	}
	if _, bad, example := (receivers{other}).signatureProblems(); bad != 1 || example == "" {
		t.Errorf("bad signatures = %d (%q), want 1 with an example", bad, example)
	}
}

func TestReceiverHang(t *testing.T) {
	r, err := startReceiver("hung", Behaviour{Hang: true, LiveWindow: time.Hour}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := newTestSender(t)
	// The client gives up: the receiver answers nothing, counts the request.
	res := send(t, s, r, "msg_h", []byte(`{}`), 100*time.Millisecond)
	if res.Err == nil || webhook.Classify(res).ErrorClass != webhook.ClassTimeout {
		t.Errorf("hung request: err %v class %q, want a timeout", res.Err, webhook.Classify(res).ErrorClass)
	}
	if !quiesce(context.Background(), receivers{r}, 50*time.Millisecond, 30*time.Second) {
		t.Fatal("receiver did not notice the abandoned request")
	}
	// Two held at once, then released: both answered 503.
	done := make(chan int, 2)
	for _, id := range []string{"msg_1", "msg_2"} {
		go func() { done <- send(t, s, r, id, []byte(`{}`), time.Minute).StatusCode }()
	}
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for r.inFlight.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	r.Release()
	for range 2 {
		if code := <-done; code != http.StatusServiceUnavailable {
			t.Errorf("released request got %d, want 503", code)
		}
	}
	if p, live := r.peak.Load(), r.peakLive.Load(); p != 2 || live != 2 {
		t.Errorf("peak %d live %d, want 2 and 2", p, live)
	}
	if n := r.requests.Load(); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
}
