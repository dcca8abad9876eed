package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Store is a delivery-log backend: chstore.Store in production, [Memory] in
// tests. Every implementation passes the conformance suite in package
// audit/audittest. Implementations are safe for concurrent use.
//
// A Store reads as if each AttemptID were stored at most once: Insert is
// idempotent by AttemptID, so a batch retried after a timeout or a crash never
// yields duplicate rows. An Attempt is immutable once produced: two inserts of
// one AttemptID must carry the same values (see chstore.Store for why).
//
// Consumers that need less declare their own smaller interface (the audit
// sink (audit/sink) needs only [Inserter]).
type Store interface {
	// Insert stores attempts. It validates every attempt first (see
	// [Attempt.Validate]) and stores none when one is invalid, returning an
	// error wrapping ErrInvalidAttempt. An empty slice is a no-op. Times are
	// stored with millisecond precision (truncated) and read back in UTC;
	// ResponseBody is cut to MaxResponseBody bytes. Any other error means the
	// batch may or may not be stored: retry it whole.
	Insert(ctx context.Context, attempts []Attempt) error

	// Log returns one endpoint's attempts matching q, newest first: ordered by
	// AttemptedAt (millisecond precision), then AttemptID, both descending. An
	// invalid q returns an error wrapping ErrInvalidQuery.
	Log(ctx context.Context, q Query) ([]Attempt, error)

	// Count returns how many distinct attempts match f.
	Count(ctx context.Context, f Filter) (int64, error)

	// Summary returns one EndpointSummary per endpoint with at least one
	// attempt matching f, ordered by EndpointID.
	Summary(ctx context.Context, f Filter) ([]EndpointSummary, error)
}

// Inserter is the part of a [Store] the sink (audit/sink) writes to.
type Inserter interface {
	Insert(ctx context.Context, attempts []Attempt) error
}

// Unstored is implemented by an [Inserter] whose derived counts (the
// ClickHouse views) count every inserted row, so that a writer can make its
// inserts exactly-once: before inserting a batch that may already be stored
// in part (a retry after an ambiguous failure, records a previous owner of
// the partition may have inserted), the sink (audit/sink) asks Unstored for
// the rows not yet stored and inserts only those.
type Unstored interface {
	// Unstored returns, in order, the attempts of which no row with the
	// same AttemptID and Outcome is stored. A row that carries another
	// outcome of a stored attempt (the outcome replacing an Interrupted
	// row) is unstored. An error means nothing was decided: retry.
	Unstored(ctx context.Context, attempts []Attempt) ([]Attempt, error)
}

// Limits of [Query.Limit].
const (
	DefaultLimit = 100  // used when Query.Limit is 0
	MaxLimit     = 1000 // a larger Query.Limit is an error
)

// Errors callers branch on with errors.Is. The wrapping error names the field.
var (
	// ErrInvalidAttempt: an attempt cannot be stored (see Attempt.Validate).
	ErrInvalidAttempt = errors.New("audit: invalid attempt")
	// ErrInvalidQuery: a Query or Filter is malformed.
	ErrInvalidQuery = errors.New("audit: invalid query")
)

// Query selects rows of one endpoint's delivery log for [Store.Log].
type Query struct {
	// EndpointID is the endpoint whose log is read. Required.
	EndpointID string
	// Tenant, when not nil, keeps only attempts whose Tenant equals *Tenant
	// ("" selects attempts of events without a tenant). An endpoint ID can
	// change tenant over time (an admin's change of tenantid, a re-created
	// ID), so a reader scoped to a tenant (the management API) always sets
	// it to the endpoint's current tenant: rows written for the endpoint's
	// earlier tenant are then never read under the new one. Optional.
	// Default (nil): every tenant.
	Tenant *string
	// EventID keeps only attempts of this CloudEvent id. Optional.
	EventID string
	// DeliveryID keeps only attempts of this delivery. Optional.
	DeliveryID string
	// WebhookID keeps only attempts of this message (the Standard Webhooks
	// webhook-id, stable across attempts and resends). Optional.
	WebhookID string
	// EventType keeps only attempts of events of exactly this CloudEvents
	// type. Optional.
	EventType string
	// Outcomes keeps only attempts with one of these outcomes (e.g. Abandoned
	// and Exhausted, to find deliveries to resend). Optional. Default: all.
	Outcomes []Outcome
	// Since keeps only attempts made at or after this instant (millisecond
	// precision). Optional. Default (zero): no lower bound.
	Since time.Time
	// Until keeps only attempts made strictly before this instant
	// (millisecond precision). Optional. Default (zero): no upper bound.
	Until time.Time
	// Before keeps only attempts strictly older than the cursor in the log's
	// order, for paging: pass CursorOf(the last attempt of the previous page).
	// Optional. Default (zero): start at the newest attempt.
	Before Cursor
	// Limit is the most attempts returned. Optional. Default DefaultLimit (0
	// means the default); at most MaxLimit; negative is an error.
	Limit int
}

// Cursor is a position in a delivery log, which is ordered by
// (AttemptedAt in milliseconds, AttemptID), newest first. The zero Cursor
// means "no position".
type Cursor struct {
	AttemptedAt time.Time
	AttemptID   string
}

// CursorOf returns the position of a, to page on with [Query.Before].
func CursorOf(a Attempt) Cursor {
	return Cursor{AttemptedAt: a.AttemptedAt.Truncate(time.Millisecond).UTC(), AttemptID: a.AttemptID}
}

// IsZero reports whether c is the zero Cursor.
func (c Cursor) IsZero() bool { return c.AttemptedAt.IsZero() && c.AttemptID == "" }

// Filter selects attempts for [Store.Count] and [Store.Summary]. The zero
// Filter selects every attempt.
type Filter struct {
	// EndpointID keeps only this endpoint's attempts. Optional. Default: all
	// endpoints.
	EndpointID string
	// Tenant, when not nil, keeps only attempts whose Tenant equals *Tenant
	// ("" selects attempts of events without a tenant); see Query.Tenant.
	// Optional. Default (nil): every tenant.
	Tenant *string
	// Since keeps only attempts made at or after this instant (millisecond
	// precision). Optional. Default (zero): no lower bound.
	Since time.Time
	// Until keeps only attempts made strictly before this instant
	// (millisecond precision). Optional. Default (zero): no upper bound.
	Until time.Time
}

// EndpointSummary is one endpoint's figures in [Store.Summary]: what `make
// demo` prints per endpoint.
type EndpointSummary struct {
	EndpointID string
	// Attempts counts attempt rows (every outcome).
	Attempts int64
	// Deliveries counts distinct DeliveryIDs.
	Deliveries int64
	// Outcomes counts attempts by outcome; an outcome with none is absent.
	Outcomes map[Outcome]int64
	// LatencyP50 and LatencyP99 are exact quantiles of LatencyMs (millisecond
	// resolution) over the attempts that went to the network: every outcome
	// except Abandoned, Expired, Blocked, Skipped and ConfigError. The q-quantile of n sorted
	// latencies is the one at index floor(q*n) (0-based), as ClickHouse's
	// quantileExact computes it. Zero when there is no such attempt.
	LatencyP50 time.Duration
	LatencyP99 time.Duration
}

// Quantile levels of EndpointSummary.
const (
	p50 = 0.5
	p99 = 0.99
)

// WentToNetwork reports whether an attempt with outcome o made (or tried to
// make) a request with a measured latency, so its latency counts in
// EndpointSummary. Sending and Interrupted attempts have no measured
// latency; the others listed never made a request.
func (o Outcome) WentToNetwork() bool {
	return o != Abandoned && o != Expired && o != Blocked && o != Skipped && o != ConfigError && o != Sending && o != Interrupted
}

// MinTime and MaxTime bound the times a Store holds: the range of a
// ClickHouse DateTime (UInt32 unix seconds), which stores AttemptedAt and
// NextAttemptAt. Treat them as constants.
var (
	MinTime = time.Unix(0, 0).UTC()
	MaxTime = time.Unix(math.MaxUint32, 0).UTC()
)

// Validate reports whether a can be stored. It returns an error wrapping
// ErrInvalidAttempt and naming the field when: AttemptID or EndpointID is
// empty; Outcome is unknown; AttemptedAt is zero or outside 1970-01-01 ..
// 2106-02-07 (UTC); NextAttemptAt or FirstAttemptAt is neither zero nor in
// that range;
// AttemptNumber or HTTPStatus is outside 0..65535; LatencyMs is outside
// 0..4294967295.
//
// The sink (audit/sink) skips (and counts) a record whose attempt fails Validate, so one
// bad record never blocks the attempts topic.
func (a *Attempt) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidAttempt, a.AttemptID, fmt.Sprintf(format, args...))
	}
	switch {
	case a.AttemptID == "":
		return bad("AttemptID is empty")
	case a.EndpointID == "":
		return bad("EndpointID is empty")
	case !a.Outcome.Valid():
		return bad("Outcome %q is unknown", a.Outcome)
	case a.AttemptedAt.IsZero():
		return bad("AttemptedAt is zero")
	case !inTimeRange(a.AttemptedAt):
		return bad("AttemptedAt %s is outside %s..%s", a.AttemptedAt.UTC().Format(time.RFC3339), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	case !a.NextAttemptAt.IsZero() && !inTimeRange(a.NextAttemptAt):
		return bad("NextAttemptAt %s is outside %s..%s", a.NextAttemptAt.UTC().Format(time.RFC3339), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	case !a.FirstAttemptAt.IsZero() && !inTimeRange(a.FirstAttemptAt):
		return bad("FirstAttemptAt %s is outside %s..%s", a.FirstAttemptAt.UTC().Format(time.RFC3339), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	case a.AttemptNumber < 0 || a.AttemptNumber > math.MaxUint16:
		return bad("AttemptNumber %d is outside 0..%d", a.AttemptNumber, math.MaxUint16)
	case a.HTTPStatus < 0 || a.HTTPStatus > math.MaxUint16:
		return bad("HTTPStatus %d is outside 0..%d", a.HTTPStatus, math.MaxUint16)
	case a.LatencyMs < 0 || a.LatencyMs > math.MaxUint32:
		return bad("LatencyMs %d is outside 0..%d", a.LatencyMs, uint32(math.MaxUint32))
	}
	return nil
}

func inTimeRange(t time.Time) bool { return !t.Before(MinTime) && !t.After(MaxTime) }

// Validate checks q and returns it with Limit defaulted (DefaultLimit). An
// error wraps ErrInvalidQuery and names the field. Stores call it first.
func (q Query) Validate() (Query, error) {
	switch {
	case q.EndpointID == "":
		return q, fmt.Errorf("%w: Query.EndpointID is required", ErrInvalidQuery)
	case q.Limit < 0:
		return q, fmt.Errorf("%w: Query.Limit %d is negative", ErrInvalidQuery, q.Limit)
	case q.Limit > MaxLimit:
		return q, fmt.Errorf("%w: Query.Limit %d exceeds %d", ErrInvalidQuery, q.Limit, MaxLimit)
	case !q.Since.IsZero() && !inTimeRange(q.Since):
		return q, fmt.Errorf("%w: Query.Since %s is outside %s..%s", ErrInvalidQuery, q.Since.UTC().Format(time.RFC3339), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	case !q.Until.IsZero() && !inTimeRange(q.Until):
		return q, fmt.Errorf("%w: Query.Until %s is outside %s..%s", ErrInvalidQuery, q.Until.UTC().Format(time.RFC3339), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	case !q.Before.IsZero() && !inTimeRange(q.Before.AttemptedAt):
		return q, fmt.Errorf("%w: Query.Before.AttemptedAt %s is outside %s..%s", ErrInvalidQuery, q.Before.AttemptedAt.UTC().Format(time.RFC3339), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	}
	for _, o := range q.Outcomes {
		if !o.Valid() {
			return q, fmt.Errorf("%w: Query.Outcomes: unknown outcome %q", ErrInvalidQuery, o)
		}
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	return q, nil
}

func (f Filter) Validate() error {
	switch {
	case !f.Since.IsZero() && !inTimeRange(f.Since):
		return fmt.Errorf("%w: Filter.Since %s is outside %s..%s", ErrInvalidQuery, f.Since.UTC().Format(time.RFC3339), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	case !f.Until.IsZero() && !inTimeRange(f.Until):
		return fmt.Errorf("%w: Filter.Until %s is outside %s..%s", ErrInvalidQuery, f.Until.UTC().Format(time.RFC3339), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	}
	return nil
}

// Normalize returns a as a Store holds it: times truncated to milliseconds
// in UTC, ResponseBody cut to MaxResponseBody bytes.
func Normalize(a Attempt) Attempt {
	a.AttemptedAt = a.AttemptedAt.Truncate(time.Millisecond).UTC()
	if a.NextAttemptAt.IsZero() {
		a.NextAttemptAt = time.Time{}
	} else {
		a.NextAttemptAt = a.NextAttemptAt.Truncate(time.Millisecond).UTC()
	}
	if a.FirstAttemptAt.IsZero() {
		a.FirstAttemptAt = time.Time{}
	} else {
		a.FirstAttemptAt = a.FirstAttemptAt.Truncate(time.Millisecond).UTC()
	}
	if len(a.ResponseBody) > MaxResponseBody {
		a.ResponseBody = a.ResponseBody[:MaxResponseBody]
	}
	a.RequestHeaders = cutUTF8(a.RequestHeaders, MaxHeaders)
	a.ResponseHeaders = cutUTF8(a.ResponseHeaders, MaxHeaders)
	a.BodyPreview = cutUTF8(a.BodyPreview, MaxBodyPreview)
	return a
}

// ValidateAll returns the first error of [Attempt.Validate] among attempts.
func ValidateAll(attempts []Attempt) error {
	for i := range attempts {
		if err := attempts[i].Validate(); err != nil {
			return err
		}
	}
	return nil
}

// InsertUnstored inserts the attempts ins does not hold yet: those
// [Unstored] returns when ins implements it, else all of them (a store
// idempotent by AttemptID). It is how a writer retries a batch that may be
// stored in part without counting a row twice in the store's views.
func InsertUnstored(ctx context.Context, ins Inserter, attempts []Attempt) error {
	if u, ok := ins.(Unstored); ok {
		var err error
		if attempts, err = u.Unstored(ctx, attempts); err != nil {
			return err
		}
	}
	return ins.Insert(ctx, attempts)
}
