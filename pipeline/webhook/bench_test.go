package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// benchData is a ~1 KiB JSON event payload.
var benchData = json.RawMessage(`{"id":"inv_0001","object":"invoice","customer":"cus_42","lines":[` +
	strings.Repeat(`{"description":"Widget subscription, monthly","amount":1999,"currency":"eur","quantity":1},`, 10) +
	`{"description":"tax","amount":380}],"total":20370,"paid":true}`)

func BenchmarkWebhookID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		webhook.WebhookID("https://billing.example/api", "0f8fad5b-d9cb-469f-a165-70867728950e")
	}
}

// BenchmarkBodySign is the per-delivery CPU work: Body once (fan-out) and
// Sign per attempt, with one and two (rotation) secrets.
func BenchmarkBodySign(b *testing.B) {
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	id := webhook.WebhookID("urn:bench", "1")
	for _, n := range []int{1, 2} {
		secrets := make([]webhook.Secret, n)
		for i := range secrets {
			secrets[i] = webhook.NewSecret()
		}
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(benchData)))
			for b.Loop() {
				body, err := webhook.Body("invoice.paid", ts, benchData)
				if err != nil {
					b.Fatal(err)
				}
				_ = webhook.Sign(id, ts, body, secrets...)
			}
		})
	}
}

func BenchmarkSign(b *testing.B) {
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	body, _ := webhook.Body("invoice.paid", ts, benchData)
	sec := webhook.NewSecret()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		webhook.Sign("msg_xnyyebvvjjxfv3yfenxzqfnxri", ts, body, sec)
	}
}

// BenchmarkSend posts to a local httptest server over keep-alive
// connections: the sender's own overhead plus loopback HTTP.
func BenchmarkSend(b *testing.B) {
	srv, ln := newServer(b, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"ok":true}`))
	})
	s := newSender(b, webhook.Options{AllowNetworks: loopback})
	req := testRequest(b, srv.URL+"/hook")
	req.Body, _ = webhook.Body("invoice.paid", time.Now(), benchData)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if res := s.Send(context.Background(), req); res.StatusCode != 200 {
				b.Fatalf("Send = %d %v", res.StatusCode, res.Err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if res := s.Send(context.Background(), req); res.StatusCode != 200 {
					b.Errorf("Send = %d %v", res.StatusCode, res.Err)
					return
				}
			}
		})
	})
	b.Logf("connections accepted: %d", ln.accepts.Load())
}
