// Command standardwebhooks is a hookrelay webhook receiver in Go with the
// Standard Webhooks project's library
// (go get github.com/standard-webhooks/standard-webhooks/libraries).
// Run: WEBHOOK_SECRET=whsec_… PORT=8000 go run .
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func main() {
	wh, err := standardwebhooks.NewWebhook(os.Getenv("WEBHOOK_SECRET")) // the endpoint's whsec_… secret
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{} // webhook-ids already handled; use a unique key in your database instead
	http.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20)) // the raw bytes
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		// Checks the signature and a timestamp within 5 minutes.
		if err := wh.Verify(raw, r.Header); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var event struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(raw, &event) // parse only after verifying
		id := r.Header.Get("webhook-id")
		mu.Lock()
		first := !seen[id]
		seen[id] = true
		mu.Unlock()
		if first {
			fmt.Printf("verified %s %s\n", id, event.Type) // hand the event to a queue here; answer fast
		}
		w.WriteHeader(http.StatusNoContent)
	})
	log.Fatal(http.ListenAndServe(net.JoinHostPort("127.0.0.1", os.Getenv("PORT")), nil))
}
