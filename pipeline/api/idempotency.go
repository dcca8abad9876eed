package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultIdempotencyWindow is how long an Idempotency-Key is remembered:
// 24 h, as Stripe's API does; the idempotency topic's retention.ms is the
// same (compact,delete), and older records are ignored on read.
const DefaultIdempotencyWindow = 24 * time.Hour

// MaxIdempotencyKey is the longest Idempotency-Key accepted, in bytes.
const MaxIdempotencyKey = 255

// Idempotency remembers the responses of POSTs sent with an Idempotency-Key
// header in the compacted `<prefix>idempotency` topic, keyed by the SHA-256
// of principal and key, so every api replica sees them. A repeat of a
// request (same principal, key, method, path and body) within the window
// gets the first response again and changes nothing; the same key with
// another request gets 422. Only 2xx responses are remembered: a request
// that failed did nothing and may be retried with the same key.
//
// Concurrent repeats are serialised within one replica; two replicas that
// receive the same key at the same instant may both act (the record is
// written after the action), which for a create ends in one 201 and one 409.
// Safe for concurrent use.
type Idempotency struct {
	t      *table
	window time.Duration
	log    *slog.Logger
	locks  sync.Map // record key -> *sync.Mutex
}

// NewIdempotency returns the idempotency store of topic. window 0 means
// DefaultIdempotencyWindow.
func NewIdempotency(topic string, clientOpts []kgo.Opt, window time.Duration, log *slog.Logger) *Idempotency {
	if window <= 0 {
		window = DefaultIdempotencyWindow
	}
	if log == nil {
		log = slog.Default()
	}
	return &Idempotency{t: newTable(topic, clientOpts, log), window: window, log: log}
}

// Run reads the topic until ctx ends.
func (s *Idempotency) Run(ctx context.Context) error { return s.t.Run(ctx) }

// idemRecord is a remembered response.
type idemRecord struct {
	Fingerprint string            `json:"fingerprint"` // SHA-256 of method, path and body
	Status      int               `json:"status"`
	Header      map[string]string `json:"header"` // Content-Type, ETag, Location
	Body        []byte            `json:"body"`
	At          time.Time         `json:"at"`
}

// wrap runs next at most once per (principal, Idempotency-Key) within the
// window.
func (s *Idempotency) wrap(p Principal, w http.ResponseWriter, r *http.Request, next http.HandlerFunc) {
	key := r.Header.Get("Idempotency-Key")
	if s == nil || key == "" {
		next(w, r)
		return
	}
	if len(key) > MaxIdempotencyKey {
		writeProblem(w, r, probValidation, "Idempotency-Key is too long", FieldDetail{Field: "Idempotency-Key", Reason: "at most 255 bytes"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeProblem(w, r, probValidation, "request body too large or unreadable: "+err.Error())
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	scope := "admin"
	if !p.Admin {
		scope = "tenant:" + p.Tenant
	}
	rk := sha256.Sum256([]byte(scope + "\x00" + key))
	recKey := hex.EncodeToString(rk[:])
	fp := sha256.Sum256([]byte(r.Method + " " + r.URL.Path + "\x00" + string(body)))
	fingerprint := hex.EncodeToString(fp[:])

	mu, _ := s.locks.LoadOrStore(recKey, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()

	got, ok, err := s.t.get(r.Context(), recKey)
	if err != nil {
		writeProblem(w, r, probUnavailable, "idempotency records: "+err.Error())
		return
	}
	var rec idemRecord
	if ok && json.Unmarshal(got.value, &rec) == nil && time.Since(rec.At) < s.window {
		if rec.Fingerprint != fingerprint {
			writeProblem(w, r, probIdempotency, "this Idempotency-Key was first used with another method, path or body")
			return
		}
		for k, v := range rec.Header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(rec.Status)
		_, _ = w.Write(rec.Body)
		return
	}
	rw := &recorder{ResponseWriter: w, status: http.StatusOK}
	next(rw, r)
	if rw.status < 200 || rw.status > 299 {
		return
	}
	rec = idemRecord{Fingerprint: fingerprint, Status: rw.status, Body: rw.buf.Bytes(), At: time.Now().UTC(), Header: map[string]string{}}
	for _, h := range []string{"Content-Type", "ETag", "Location"} {
		if v := w.Header().Get(h); v != "" {
			rec.Header[h] = v
		}
	}
	b, _ := json.Marshal(rec)
	// The response is already sent: the action happened, so a failed
	// write is logged, not answered (a retry would then act again).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	if err := s.t.put(ctx, recKey, b); err != nil {
		s.log.Error("api: idempotency record not written", "err", err)
	}
}

// recorder passes a response through and keeps a copy of its status and
// body.
type recorder struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (r *recorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }
func (r *recorder) Write(b []byte) (int, error) {
	r.buf.Write(b)
	return r.ResponseWriter.Write(b)
}
