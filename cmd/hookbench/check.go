package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Check is the audit check of one run: ClickHouse must hold exactly one
// attempt row per request the receivers saw, endpoint by endpoint, so no
// figure is bought by dropping the log. Rows that involve no request
// (abandoned, expired) are left out; so are endpoints without a receiver
// (the backlog run's dead endpoint, whose attempts never connect).
type Check struct {
	OK         bool     `json:"ok"`
	Requests   int64    `json:"requests"`
	Rows       int64    `json:"rows"`
	Waited     float64  `json:"waited_s"`
	Mismatches []string `json:"mismatches,omitempty"`
	// Signatures: every verify-every-th request was verified with the
	// standard-webhooks library; BadSignatures must be 0.
	Verified      int64  `json:"signatures_verified"`
	BadSignatures int64  `json:"bad_signatures"`
	SignatureErr  string `json:"signature_error,omitempty"`
}

// checkAttempts waits (up to timeout) for the audit sink to catch up, then
// compares per endpoint the distinct attempt rows with the requests seen.
// Call it once nothing is in flight at the receivers.
func (e *env) checkAttempts(ctx context.Context, rs receivers, timeout time.Duration) Check {
	start := time.Now()
	want := map[string]int64{}
	var c Check
	for _, r := range rs {
		want[r.id] = r.requests.Load()
		c.Requests += want[r.id]
	}
	c.Verified, c.BadSignatures, c.SignatureErr = rs.signatureProblems()
	for {
		got, err := e.rowsPerEndpoint(ctx)
		var mism []string
		var rows int64
		if err != nil {
			mism = []string{"query: " + err.Error()}
		} else {
			for id, n := range want {
				rows += got[id]
				if got[id] != n {
					mism = append(mism, fmt.Sprintf("%s: %d requests, %d rows", id, n, got[id]))
				}
			}
		}
		c.Rows = rows
		if len(mism) == 0 || time.Since(start) > timeout || ctx.Err() != nil {
			slices.Sort(mism)
			if len(mism) > 5 {
				mism = append(mism[:5], fmt.Sprintf("… and %d more", len(mism)-5))
			}
			c.Mismatches = mism
			c.OK = len(mism) == 0 && c.BadSignatures == 0
			c.Waited = round1(time.Since(start).Seconds())
			return c
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// rowsPerEndpoint counts distinct attempt IDs per endpoint among rows that
// stand for a request.
func (e *env) rowsPerEndpoint(ctx context.Context) (map[string]int64, error) {
	rows, err := e.b.ch.Query(ctx, fmt.Sprintf(
		"SELECT endpoint_id, uniqExact(attempt_id) FROM %s.attempts WHERE outcome NOT IN ('abandoned', 'expired') GROUP BY endpoint_id", e.db))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var n uint64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = int64(n)
	}
	return out, rows.Err()
}

// quiesce waits until the receivers have had nothing in flight and no new
// request for settle, or timeout passes; it reports whether they settled.
func quiesce(ctx context.Context, rs receivers, settle, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	last, _ := rs.total()
	quietSince := time.Now()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
		n, _ := rs.total()
		if n != last || rs.inFlight() > 0 {
			last, quietSince = n, time.Now()
			continue
		}
		if time.Since(quietSince) >= settle {
			return true
		}
	}
	return false
}
