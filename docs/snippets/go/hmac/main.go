// Command hmac is a hookrelay webhook receiver in Go with nothing but the
// standard library (crypto/hmac). Run: WEBHOOK_SECRET=whsec_… PORT=8000 go run .
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

const tolerance = 5 * time.Minute

// verify checks a Standard Webhooks request: HMAC-SHA256 over
// "<webhook-id>.<webhook-timestamp>.<raw body>" with the secret's key, and a
// timestamp no further than tolerance from now.
func verify(key, raw []byte, h http.Header, now time.Time) bool {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || sigs == "" || err != nil {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return false // too old (or too new): a replay
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.", id, ts)
	mac.Write(raw) // the raw body bytes
	expected := mac.Sum(nil)
	for _, s := range strings.Split(sigs, " ") {
		version, b64, _ := strings.Cut(s, ",")
		got, err := base64.StdEncoding.DecodeString(b64)
		if version == "v1" && err == nil && hmac.Equal(got, expected) {
			return true
		}
	}
	return false
}

func main() {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(os.Getenv("WEBHOOK_SECRET"), "whsec_"))
	if err != nil {
		log.Fatalf("WEBHOOK_SECRET: %v", err)
	}
	var mu sync.Mutex
	seen := map[string]bool{} // webhook-ids already handled; use a unique key in your database instead
	http.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || !verify(key, raw, r.Header, time.Now()) {
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
			fmt.Printf("verified %s %s\n", id, event.Type)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	log.Fatal(http.ListenAndServe(net.JoinHostPort("127.0.0.1", os.Getenv("PORT")), nil))
}
