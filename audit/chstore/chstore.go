// Package chstore is the ClickHouse implementation of audit.Store: the
// attempts table (ReplacingMergeTree keyed by attempt ID, read with FINAL),
// its versioned migrations, and the delivery-log queries. Its SQL runs on
// ClickHouse 18.16 (native protocol) and on current releases (checked with
// chdb: testdata/chdb_check.py).
package chstore

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hookrelay/hookrelay/audit"
)

// Options configures [New].
type Options struct {
	// DSN locates the server, e.g.
	// "clickhouse://user:password@127.0.0.1:9000/hookrelay?dial_timeout=5s".
	// Required. Native protocol only (clickhouse:// or tcp://, port 9000 by
	// default); the database need not exist yet: Migrate creates it. Any
	// clickhouse-go DSN parameter is honoured unless a field below overrides
	// it.
	DSN string
	// Database overrides the DSN's database. Optional. Default: the DSN's,
	// else "default". Letters, digits and '_' only, not starting with a digit.
	Database string
	// MaxOpenConns caps open connections. Optional. Default: the DSN's
	// max_open_conns, else 10.
	MaxOpenConns int
	// MaxIdleConns caps idle connections kept for reuse. Optional. Default:
	// the DSN's max_idle_conns, else 5.
	MaxIdleConns int
	// ConnMaxLifetime closes connections older than this. Optional. Default:
	// the DSN's conn_max_lifetime, else 1 h.
	ConnMaxLifetime time.Duration
	// DialTimeout bounds opening one connection. Optional. Default: the DSN's
	// dial_timeout, else 5 s.
	DialTimeout time.Duration
	// Password overrides the DSN's password, so that it can come from a
	// secret instead of the DSN. Optional. Default: the DSN's (none without
	// one).
	Password string
	// TLS makes every connection use TLS with this configuration (the
	// server's secure native port, 9440 by default), overriding the DSN's
	// secure and skip_verify parameters; set its RootCAs to trust a private
	// CA. Optional. Default: the DSN's (secure=true: TLS with the system
	// roots; otherwise none).
	TLS *tls.Config
	// Logger receives the driver's debug logs. Optional. Default: none.
	Logger *slog.Logger
}

// ClickHouse is the production [audit.Store]: the attempts table of one ClickHouse
// database, written in batches over the native protocol. Create it with
// New (or Open, which needs no server yet), bring the schema up to date
// with Migrate, and Close it when done. Safe for concurrent use.
//
// Schema (audit/migrations): a ReplacingMergeTree partitioned by UTC day and
// ordered by (endpoint_id, attempted_at, attempted_ms, attempt_id). Reads
// collapse duplicates themselves (FINAL, or LIMIT 1 BY attempt_id), so a row
// inserted twice (a retried batch) reads once at once, before any background
// merge. This relies on an attempt being immutable: a second insert of one
// AttemptID with a different EndpointID or AttemptedAt would not collapse.
// Retention is by day partition: DropPartitionsBefore.
type Store struct {
	conn driver.Conn
	db   string
	addr []string         // server addresses, for errors
	now  func() time.Time // anchors Log's first windows; time.Now
}

var _ audit.Store = (*Store)(nil)

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// New is [Open] followed by a ping of the server (bounded by ctx): an
// unreachable server is an error (wrapping the driver's) naming the address.
// For a caller that must not depend on ClickHouse being up at start (the
// audit sink), use Open and let Ping and Migrate fail until it answers.
func New(ctx context.Context, opts Options) (*Store, error) {
	s, err := Open(opts)
	if err != nil {
		return nil, err
	}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Open validates opts and creates the connection pool without any I/O:
// connections are dialled when a call needs one, so Open succeeds while the
// server is down and each call fails (naming the address) until it answers.
// Errors about opts name the field.
func Open(opts Options) (*Store, error) {
	if opts.DSN == "" {
		return nil, fmt.Errorf("audit: Options.DSN is required")
	}
	co, err := clickhouse.ParseDSN(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("audit: Options.DSN: %w", err)
	}
	if co.Protocol != clickhouse.Native {
		return nil, fmt.Errorf("audit: Options.DSN: only the native protocol (clickhouse://host:9000) is supported, not %s", co.Protocol)
	}
	db := cmp.Or(opts.Database, co.Auth.Database, "default")
	if !identifier.MatchString(db) {
		return nil, fmt.Errorf("audit: Options.Database %q: want letters, digits and '_', not starting with a digit", db)
	}
	switch {
	case opts.MaxOpenConns < 0:
		return nil, fmt.Errorf("audit: Options.MaxOpenConns %d is negative", opts.MaxOpenConns)
	case opts.MaxIdleConns < 0:
		return nil, fmt.Errorf("audit: Options.MaxIdleConns %d is negative", opts.MaxIdleConns)
	case opts.ConnMaxLifetime < 0:
		return nil, fmt.Errorf("audit: Options.ConnMaxLifetime %s is negative", opts.ConnMaxLifetime)
	case opts.DialTimeout < 0:
		return nil, fmt.Errorf("audit: Options.DialTimeout %s is negative", opts.DialTimeout)
	}
	co.MaxOpenConns = cmp.Or(opts.MaxOpenConns, co.MaxOpenConns, 10)
	co.MaxIdleConns = cmp.Or(opts.MaxIdleConns, co.MaxIdleConns, 5)
	co.ConnMaxLifetime = cmp.Or(opts.ConnMaxLifetime, co.ConnMaxLifetime, time.Hour)
	co.DialTimeout = cmp.Or(opts.DialTimeout, co.DialTimeout, 5*time.Second)
	if co.MaxIdleConns > co.MaxOpenConns {
		co.MaxIdleConns = co.MaxOpenConns
	}
	co.Logger = opts.Logger
	if opts.Password != "" {
		co.Auth.Password = opts.Password
	}
	if opts.TLS != nil {
		co.TLS = opts.TLS.Clone()
	}
	// Sessions start in the user's default database: ours may not exist
	// before Migrate, and every statement names it.
	co.Auth.Database = ""
	conn, err := clickhouse.Open(co)
	if err != nil {
		return nil, fmt.Errorf("audit: open ClickHouse %v: %w", co.Addr, err)
	}
	return &Store{conn: conn, db: db, addr: co.Addr, now: time.Now}, nil
}

// Database returns the name of the database holding the tables.
func (c *Store) Database() string { return c.db }

// Ping checks that the server answers. Its error names the address.
func (c *Store) Ping(ctx context.Context) error {
	if err := c.conn.Ping(ctx); err != nil {
		return fmt.Errorf("audit: ping ClickHouse %v: %w", c.addr, err)
	}
	return nil
}

// Close closes the connection pool. Calls in flight fail.
func (c *Store) Close() error { return c.conn.Close() }

// The attempts table's columns, in insert and select order.
const columns = "attempt_id, delivery_id, event_id, webhook_id, event_type, tenant, endpoint_id, url_host, " +
	"attempt_number, attempted_at, attempted_ms, latency_ms, http_status, outcome, error_class, error_message, " +
	"response_body, next_attempt_at, next_attempt_ms, first_attempt_at, first_attempt_ms, " +
	"request_headers, body_preview, response_headers"

// selectColumns is columns with the DateTimes read as unix seconds.
var selectColumns = strings.NewReplacer("attempted_at,", "toUInt32(attempted_at),", "next_attempt_at,", "toUInt32(next_attempt_at),", "first_attempt_at,", "toUInt32(first_attempt_at),").Replace(columns)

// Insert implements [Store.Insert] with one batch INSERT (explicit column
// list, column-wise). Batches of thousands of rows are the efficient size;
// ClickHouse makes one part per INSERT and partition, so avoid many tiny ones.
func (c *Store) Insert(ctx context.Context, attempts []audit.Attempt) error {
	if len(attempts) == 0 {
		return nil
	}
	if err := audit.ValidateAll(attempts); err != nil {
		return err
	}
	n := len(attempts)
	strs := func() []string { return make([]string, n) }
	u16s := func() []uint16 { return make([]uint16, n) }
	attemptID, deliveryID, eventID, webhookID := strs(), strs(), strs(), strs()
	eventType, tenant, endpointID, urlHost := strs(), strs(), strs(), strs()
	outcome, errorClass, errorMessage, responseBody := strs(), strs(), strs(), strs()
	reqHeaders, bodyPreview, respHeaders := strs(), strs(), strs()
	attemptNumber, attemptedMs, httpStatus, nextMs, firstMs := u16s(), u16s(), u16s(), u16s(), u16s()
	attemptedAt, nextAt, firstAt := make([]int64, n), make([]int64, n), make([]int64, n) // unix seconds (DateTime)
	latency := make([]uint32, n)
	for i := range attempts {
		a := audit.Normalize(attempts[i])
		attemptID[i], deliveryID[i], eventID[i], webhookID[i] = a.AttemptID, a.DeliveryID, a.EventID, a.WebhookID
		eventType[i], tenant[i], endpointID[i], urlHost[i] = a.EventType, a.Tenant, a.EndpointID, a.URLHost
		outcome[i], errorClass[i], errorMessage[i], responseBody[i] = string(a.Outcome), a.ErrorClass, a.ErrorMessage, a.ResponseBody
		attemptNumber[i], httpStatus[i], latency[i] = uint16(a.AttemptNumber), uint16(a.HTTPStatus), uint32(a.LatencyMs)
		reqHeaders[i], bodyPreview[i], respHeaders[i] = a.RequestHeaders, a.BodyPreview, a.ResponseHeaders
		attemptedAt[i], attemptedMs[i] = splitMs(a.AttemptedAt)
		if !a.NextAttemptAt.IsZero() {
			nextAt[i], nextMs[i] = splitMs(a.NextAttemptAt)
		}
		if !a.FirstAttemptAt.IsZero() {
			firstAt[i], firstMs[i] = splitMs(a.FirstAttemptAt)
		}
	}
	batch, err := c.conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %s.attempts (%s)", c.db, columns))
	if err != nil {
		return fmt.Errorf("audit: insert %d attempts: %w", n, err)
	}
	for i, col := range []any{attemptID, deliveryID, eventID, webhookID, eventType, tenant, endpointID, urlHost,
		attemptNumber, attemptedAt, attemptedMs, latency, httpStatus, outcome, errorClass, errorMessage,
		responseBody, nextAt, nextMs, firstAt, firstMs, reqHeaders, bodyPreview, respHeaders} {
		if err := batch.Column(i).Append(col); err != nil {
			batch.Abort()
			return fmt.Errorf("audit: insert %d attempts: column %d: %w", n, i, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("audit: insert %d attempts: %w", n, err)
	}
	return nil
}

// Unstored implements [audit.Unstored]: one query of the attempts table,
// restricted to the batch's endpoints and its seconds' range (the table's
// key prefix), then PREWHERE attempt_id IN the batch's IDs. Rows not yet
// merged count as stored, so no FINAL is needed.
func (c *Store) Unstored(ctx context.Context, attempts []audit.Attempt) ([]audit.Attempt, error) {
	if len(attempts) == 0 {
		return nil, nil
	}
	external := len(attempts) > maxLiteralIDs
	sql := c.unstoredSQL(attempts, external)
	if external {
		keys, err := ext.NewTable(attemptKeysTable, ext.Column("attempt_id", "String"))
		if err != nil {
			return nil, fmt.Errorf("audit: look up %d attempts: %w", len(attempts), err)
		}
		eps, err := ext.NewTable(attemptEndpointsTable, ext.Column("endpoint_id", "String"))
		if err != nil {
			return nil, fmt.Errorf("audit: look up %d attempts: %w", len(attempts), err)
		}
		seen := map[string]bool{}
		for _, a := range attempts {
			err := keys.Append(a.AttemptID)
			if err == nil && !seen[a.EndpointID] {
				seen[a.EndpointID] = true
				err = eps.Append(a.EndpointID)
			}
			if err != nil {
				return nil, fmt.Errorf("audit: look up %d attempts: %w", len(attempts), err)
			}
		}
		ctx = clickhouse.Context(ctx, clickhouse.WithExternalTable(keys, eps))
	}
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"max_query_size": max(262144, 2*len(sql))}))
	rows, err := c.conn.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("audit: look up %d attempts: %w", len(attempts), err)
	}
	defer rows.Close()
	stored := make(map[[2]string]bool)
	for rows.Next() {
		var id, outcome string
		if err := rows.Scan(&id, &outcome); err != nil {
			return nil, fmt.Errorf("audit: look up %d attempts: %w", len(attempts), err)
		}
		stored[[2]string{id, outcome}] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: look up %d attempts: %w", len(attempts), err)
	}
	out := make([]audit.Attempt, 0, len(attempts))
	for _, a := range attempts {
		if !stored[[2]string{a.AttemptID, string(a.Outcome)}] {
			out = append(out, a)
		}
	}
	return out, nil
}

// attemptKeysTable and attemptEndpointsTable are the names of Unstored's
// external tables of the batch's attempt IDs and endpoint IDs, sent with
// its query when the batch has more than maxLiteralIDs rows.
const (
	attemptKeysTable      = "attempt_keys"
	attemptEndpointsTable = "attempt_endpoints"
)

// maxLiteralIDs is the most attempt IDs Unstored writes into its query's
// text: 18.16 parses a literal list of 5,000 in ~50 ms, three times the
// query's own work, and reads the same IDs sent as an external table at
// no measurable cost (BENCHMARKS.md, the audit sink).
const maxLiteralIDs = 64

// unstoredSQL renders Unstored's query; with external set, the attempt
// and endpoint IDs are read from attemptKeysTable and
// attemptEndpointsTable (sent with the query), otherwise they are inlined.
func (c *Store) unstoredSQL(attempts []audit.Attempt, external bool) string {
	endpoints := map[string]bool{}
	var ids []string
	lo, hi := int64(-1), int64(0)
	for _, a := range attempts {
		sec, _ := splitMs(audit.Normalize(a).AttemptedAt)
		if lo < 0 || sec < lo {
			lo = sec
		}
		hi = max(hi, sec)
		endpoints[a.EndpointID] = true
		if !external {
			ids = append(ids, quote(a.AttemptID))
		}
	}
	idSet, epSet := attemptKeysTable, attemptEndpointsTable
	if !external {
		eps := make([]string, 0, len(endpoints))
		for ep := range endpoints {
			eps = append(eps, quote(ep))
		}
		slices.Sort(eps)
		idSet, epSet = "("+strings.Join(ids, ", ")+")", "("+strings.Join(eps, ", ")+")"
	}
	return fmt.Sprintf("SELECT DISTINCT attempt_id, outcome FROM %s.attempts PREWHERE attempt_id IN %s "+
		"WHERE endpoint_id IN %s AND attempted_at >= toDateTime(%d, 'UTC') AND attempted_at <= toDateTime(%d, 'UTC')",
		c.db, idSet, epSet, lo, hi)
}

// splitMs splits t into unix seconds and the millisecond within the second.
func splitMs(t time.Time) (int64, uint16) {
	ms := t.UnixMilli()
	return ms / 1000, uint16(ms % 1000)
}

func joinMs(sec uint32, ms uint16) time.Time {
	return time.UnixMilli(int64(sec)*1000 + int64(ms)).UTC()
}

// logWindows are the time windows Log tries, newest first, before reading
// an endpoint's whole history.
var logWindows = []time.Duration{5 * time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

// maxIDSeconds bounds the distinct seconds an id lookup (attempt_ids)
// hands to the log query; more fall back to the endpoint's key range.
const maxIDSeconds = 10000

// Log implements [Store.Log]. It reads one endpoint's key range, collapsing
// duplicates with LIMIT 1 BY attempt_id rather than FINAL (so filters run as
// PREWHERE, reading one column before the rest), in two steps: the page's
// keys (time, attempt ID: small columns) first, then the whole rows of just
// those keys, so the large columns (response body, error message) are read
// for the page only; 18.16 cannot read in key order and would otherwise
// read and sort them for every row in range.
//
// With an EventID, WebhookID or DeliveryID filter it first reads the
// seconds that id's attempts were made at from the attempt_ids index
// (migration 0004) and restricts the read to them (an id with no attempt
// reads nothing more). Otherwise it reads the keys of growing time windows
// first, of logWindows before the Before cursor (or the store's clock): the
// newest 5 minutes, then the shortest window that would hold twice q.Limit
// at the rate the last one found (see nextLogWindow), and the whole range
// only when the week holds fewer than q.Limit attempts. A window with
// q.Limit attempts holds the newest q.Limit overall, so the result is the
// same, a busy endpoint's log reads a few minutes of one day partition
// instead of all of them, and the page's rows are read once, for the
// window that holds it (three queries for an endpoint with one attempt a
// minute: 5 minutes' keys, a day's keys, the page).
func (c *Store) Log(ctx context.Context, q audit.Query) ([]audit.Attempt, error) {
	q, err := q.Validate()
	if err != nil {
		return nil, err
	}
	if kind, id := idFilter(q); kind != 0 {
		secs, err := c.idSeconds(ctx, q.EndpointID, kind, id)
		if err != nil {
			return nil, err
		}
		switch {
		case len(secs) == 0:
			return nil, nil
		case len(secs) <= maxIDSeconds:
			return c.readLog(ctx, q, "attempted_at IN ("+strings.Join(secs, ", ")+")")
		}
		return c.readLog(ctx, q)
	}
	anchor := q.Before.AttemptedAt
	if q.Before.IsZero() {
		anchor = c.now()
	}
	if !q.Until.IsZero() && q.Until.Before(anchor) {
		anchor = q.Until
	}
	for w := logWindows[0]; w > 0; {
		from := anchor.Add(-w)
		if from.Before(audit.MinTime) || (!q.Since.IsZero() && !from.After(q.Since)) {
			break
		}
		wq := q
		wq.Since = from
		k, err := c.readKeys(ctx, wq)
		if err != nil {
			return nil, err
		}
		if len(k.ids) >= q.Limit {
			return c.readPage(ctx, wq, k)
		}
		w = nextLogWindow(w, len(k.ids), q.Limit)
	}
	return c.readLog(ctx, q)
}

// nextLogWindow returns the logWindows entry to try after window w found
// n < limit attempts: the smallest longer one that would hold twice the
// limit at w's rate (so an endpoint with a few attempts a minute skips
// from 5 minutes to a day in one step), or 0 when w is the last.
func nextLogWindow(w time.Duration, n, limit int) time.Duration {
	want := w + 1
	if n > 0 {
		want = max(want, time.Duration(float64(w)*2*float64(limit)/float64(n)))
	}
	for _, next := range logWindows {
		if next >= want {
			return next
		}
	}
	if w < logWindows[len(logWindows)-1] {
		return logWindows[len(logWindows)-1]
	}
	return 0
}

// idFilter returns the most selective id filter of q as an attempt_ids
// id_kind (1 event, 2 webhook, 3 delivery) and value; 0 when q has none.
func idFilter(q audit.Query) (uint8, string) {
	switch {
	case q.DeliveryID != "":
		return 3, q.DeliveryID
	case q.WebhookID != "":
		return 2, q.WebhookID
	case q.EventID != "":
		return 1, q.EventID
	}
	return 0, ""
}

// idSeconds returns the distinct seconds (unix, as SQL literals) at which
// endpoint's attempts with this id were made, at most maxIDSeconds+1.
func (c *Store) idSeconds(ctx context.Context, endpoint string, kind uint8, id string) ([]string, error) {
	rows, err := c.conn.Query(ctx, c.idSecondsSQL(endpoint, kind, id))
	if err != nil {
		return nil, fmt.Errorf("audit: read log of endpoint %q: id index: %w", endpoint, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s uint32
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("audit: read log of endpoint %q: id index: %w", endpoint, err)
		}
		out = append(out, strconv.FormatUint(uint64(s), 10))
	}
	return out, rows.Err()
}

func (c *Store) idSecondsSQL(endpoint string, kind uint8, id string) string {
	return fmt.Sprintf("SELECT DISTINCT toUInt32(attempted_at)\nFROM %s.attempt_ids\nWHERE endpoint_id = %s AND id_kind = %d AND id = %s\nLIMIT %d",
		c.db, quote(endpoint), kind, quote(id), maxIDSeconds+1)
}

// logKeys are the keys of a log page: quoted attempt IDs and the range of
// their seconds.
type logKeys struct {
	ids    []string
	lo, hi uint32
}

// readLog reads one page of q (with the extra conditions) in two steps:
// its keys, then the rows of those keys.
func (c *Store) readLog(ctx context.Context, q audit.Query, extra ...string) ([]audit.Attempt, error) {
	k, err := c.readKeys(ctx, q, extra...)
	if err != nil {
		return nil, err
	}
	return c.readPage(ctx, q, k, extra...)
}

// readKeys is readLog's first step: the page's (second, attempt ID).
func (c *Store) readKeys(ctx context.Context, q audit.Query, extra ...string) (logKeys, error) {
	var k logKeys
	keys, err := c.conn.Query(ctx, c.logKeysSQL(q, extra...))
	if err != nil {
		return k, fmt.Errorf("audit: read log of endpoint %q: %w", q.EndpointID, err)
	}
	defer keys.Close()
	for keys.Next() {
		var (
			sec uint32
			id  string
		)
		if err := keys.Scan(&sec, &id); err != nil {
			return k, fmt.Errorf("audit: read log of endpoint %q: %w", q.EndpointID, err)
		}
		if len(k.ids) == 0 || sec < k.lo {
			k.lo = sec
		}
		k.hi = max(k.hi, sec)
		k.ids = append(k.ids, quote(id))
	}
	if err := keys.Err(); err != nil {
		return k, fmt.Errorf("audit: read log of endpoint %q: %w", q.EndpointID, err)
	}
	return k, nil
}

// readPage is readLog's second step: the whole rows of k, which readKeys
// read for q and extra.
func (c *Store) readPage(ctx context.Context, q audit.Query, k logKeys, extra ...string) ([]audit.Attempt, error) {
	if len(k.ids) == 0 {
		return nil, nil
	}
	extra = append(extra, fmt.Sprintf("attempted_at >= %d AND attempted_at <= %d AND attempt_id IN (%s)", k.lo, k.hi, strings.Join(k.ids, ", ")))
	return c.readRows(ctx, q, c.logSQL(q, extra...))
}

func (c *Store) readRows(ctx context.Context, q audit.Query, sql string) ([]audit.Attempt, error) {
	rows, err := c.conn.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("audit: read log of endpoint %q: %w", q.EndpointID, err)
	}
	defer rows.Close()
	out := make([]audit.Attempt, 0, min(q.Limit, 128))
	for rows.Next() {
		var (
			a                                             audit.Attempt
			outcome                                       string
			attemptNumber, attMs, status, nextMs, firstMs uint16
			attAt, nextAt, latency, firstAt               uint32
		)
		if err := rows.Scan(&a.AttemptID, &a.DeliveryID, &a.EventID, &a.WebhookID, &a.EventType, &a.Tenant,
			&a.EndpointID, &a.URLHost, &attemptNumber, &attAt, &attMs, &latency, &status, &outcome,
			&a.ErrorClass, &a.ErrorMessage, &a.ResponseBody, &nextAt, &nextMs, &firstAt, &firstMs,
			&a.RequestHeaders, &a.BodyPreview, &a.ResponseHeaders); err != nil {
			return nil, fmt.Errorf("audit: read log of endpoint %q: %w", q.EndpointID, err)
		}
		a.Outcome = audit.Outcome(outcome)
		a.AttemptNumber, a.HTTPStatus, a.LatencyMs = int(attemptNumber), int(status), int64(latency)
		a.AttemptedAt = joinMs(attAt, attMs)
		if nextAt != 0 || nextMs != 0 {
			a.NextAttemptAt = joinMs(nextAt, nextMs)
		}
		if firstAt != 0 || firstMs != 0 {
			a.FirstAttemptAt = joinMs(firstAt, firstMs)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: read log of endpoint %q: %w", q.EndpointID, err)
	}
	return out, nil
}

// logSQL renders the Log query of whole rows, with extra conditions ANDed.
// Values are inlined as escaped literals (the same text runs on 18.16,
// which has no server-side parameters, and in the chdb check of
// audit/testdata).
func (c *Store) logSQL(q audit.Query, extra ...string) string {
	return c.logQuerySQL(selectColumns, q, extra)
}

// logKeysSQL renders Log's first step: the page's (second, attempt ID).
func (c *Store) logKeysSQL(q audit.Query, extra ...string) string {
	return c.logQuerySQL("toUInt32(attempted_at), attempt_id", q, extra)
}

func (c *Store) logQuerySQL(cols string, q audit.Query, extra []string) string {
	var w strings.Builder
	fmt.Fprintf(&w, "SELECT %s\nFROM %s.attempts\nWHERE endpoint_id = %s", cols, c.db, quote(q.EndpointID))
	for _, e := range extra {
		fmt.Fprintf(&w, "\n  AND %s", e)
	}
	if q.Tenant != nil {
		fmt.Fprintf(&w, "\n  AND tenant = %s", quote(*q.Tenant))
	}
	if q.EventID != "" {
		fmt.Fprintf(&w, "\n  AND event_id = %s", quote(q.EventID))
	}
	if q.DeliveryID != "" {
		fmt.Fprintf(&w, "\n  AND delivery_id = %s", quote(q.DeliveryID))
	}
	if q.WebhookID != "" {
		fmt.Fprintf(&w, "\n  AND webhook_id = %s", quote(q.WebhookID))
	}
	if q.EventType != "" {
		fmt.Fprintf(&w, "\n  AND event_type = %s", quote(q.EventType))
	}
	if len(q.Outcomes) > 0 {
		os := make([]string, len(q.Outcomes))
		for i, o := range q.Outcomes {
			os[i] = quote(string(o))
		}
		fmt.Fprintf(&w, "\n  AND outcome IN (%s)", strings.Join(os, ", "))
	}
	if !q.Since.IsZero() {
		w.WriteString("\n  AND " + sinceCond(q.Since))
	}
	if !q.Until.IsZero() {
		w.WriteString("\n  AND " + untilCond(q.Until))
	}
	if !q.Before.IsZero() {
		s, ms := splitMs(q.Before.AttemptedAt.Truncate(time.Millisecond))
		fmt.Fprintf(&w, "\n  AND attempted_at <= %d AND (attempted_at < %d OR attempted_ms < %d OR (attempted_ms = %d AND attempt_id < %s))",
			s, s, ms, ms, quote(q.Before.AttemptID))
	}
	// Of two rows of one attempt not merged yet, a real outcome wins over
	// the sink's Interrupted row (which it replaces; see audit/sink), so the
	// pick does not depend on the order parts are read in.
	fmt.Fprintf(&w, "\nORDER BY attempted_at DESC, attempted_ms DESC, attempt_id DESC, outcome = 'interrupted'\nLIMIT 1 BY attempt_id\nLIMIT %d", q.Limit)
	return w.String()
}

// sinceCond selects attempts at or after t (ms precision). Its first term
// uses the primary key and prunes day partitions.
func sinceCond(t time.Time) string {
	s, ms := splitMs(t.Truncate(time.Millisecond))
	return fmt.Sprintf("attempted_at >= %d AND (attempted_at > %d OR attempted_ms >= %d)", s, s, ms)
}

// untilCond selects attempts strictly before t (ms precision).
func untilCond(t time.Time) string {
	s, ms := splitMs(t.Truncate(time.Millisecond))
	return fmt.Sprintf("attempted_at <= %d AND (attempted_at < %d OR attempted_ms < %d)", s, s, ms)
}

func (c *Store) filterSQL(f audit.Filter) string {
	conds := []string{"1"}
	if f.EndpointID != "" {
		conds = append(conds, "endpoint_id = "+quote(f.EndpointID))
	}
	if f.Tenant != nil {
		conds = append(conds, "tenant = "+quote(*f.Tenant))
	}
	if !f.Since.IsZero() {
		conds = append(conds, sinceCond(f.Since))
	}
	if !f.Until.IsZero() {
		conds = append(conds, untilCond(f.Until))
	}
	if len(conds) > 1 {
		conds = conds[1:]
	}
	return strings.Join(conds, "\n  AND ")
}

// Count implements [Store.Count] (with FINAL: duplicates count once).
func (c *Store) Count(ctx context.Context, f audit.Filter) (int64, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	var n uint64
	if err := c.conn.QueryRow(ctx, c.countSQL(f)).Scan(&n); err != nil {
		return 0, fmt.Errorf("audit: count attempts: %w", err)
	}
	return int64(n), nil
}

func (c *Store) countSQL(f audit.Filter) string {
	return fmt.Sprintf("SELECT count()\nFROM %s.attempts FINAL\nWHERE %s", c.db, c.filterSQL(f))
}

// Summary implements [Store.Summary] in one GROUP BY over FINAL rows.
func (c *Store) Summary(ctx context.Context, f audit.Filter) ([]audit.EndpointSummary, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	rows, err := c.conn.Query(ctx, c.summarySQL(f))
	if err != nil {
		return nil, fmt.Errorf("audit: summarize attempts: %w", err)
	}
	defer rows.Close()
	var out []audit.EndpointSummary
	for rows.Next() {
		var (
			s                    audit.EndpointSummary
			attempts, deliveries uint64
			counts               = make([]uint64, len(audit.Outcomes))
			quantiles            []uint32
		)
		dest := []any{&s.EndpointID, &attempts, &deliveries}
		for i := range counts {
			dest = append(dest, &counts[i])
		}
		dest = append(dest, &quantiles)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("audit: summarize attempts: %w", err)
		}
		s.Attempts, s.Deliveries = int64(attempts), int64(deliveries)
		s.Outcomes = make(map[audit.Outcome]int64)
		for i, o := range audit.Outcomes {
			if counts[i] > 0 {
				s.Outcomes[o] = int64(counts[i])
			}
		}
		if len(quantiles) == 2 {
			s.LatencyP50 = time.Duration(quantiles[0]) * time.Millisecond
			s.LatencyP99 = time.Duration(quantiles[1]) * time.Millisecond
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: summarize attempts: %w", err)
	}
	return out, nil
}

func (c *Store) summarySQL(f audit.Filter) string {
	var w strings.Builder
	w.WriteString("SELECT endpoint_id, count(), uniqExact(delivery_id)")
	for _, o := range audit.Outcomes {
		fmt.Fprintf(&w, ",\n  countIf(outcome = %s)", quote(string(o)))
	}
	var offNet []string
	for _, o := range audit.Outcomes {
		if !o.WentToNetwork() {
			offNet = append(offNet, quote(string(o)))
		}
	}
	fmt.Fprintf(&w, ",\n  quantilesExactIf(%s, %s)(latency_ms, outcome NOT IN (%s))",
		strconv.FormatFloat(p50, 'f', -1, 64), strconv.FormatFloat(p99, 'f', -1, 64), strings.Join(offNet, ", "))
	fmt.Fprintf(&w, "\nFROM %s.attempts FINAL\nWHERE %s\nGROUP BY endpoint_id\nORDER BY endpoint_id", c.db, c.filterSQL(f))
	return w.String()
}

// retainedTables are the tables retention applies to, with the column each
// row's age is measured by; every one is partitioned by UTC day.
var retainedTables = []struct{ name, timeColumn string }{
	{"attempts", "attempted_at"},
	{"attempts_minute", "minute"},
	{"attempts_hour", "hour"},
	{"attempts_by_number", "hour"},
	{"attempt_ids", "attempted_at"},
}

// DropPartitionsBefore deletes every attempt made before the UTC day of
// day, by dropping whole day partitions (cheap: no rewrite) of the attempts
// table and of its views (attempts_minute, attempts_by_number). It returns
// the dropped partition IDs (YYYYMMDD), oldest first, each once. Attempts of
// day itself are kept. This is the retention mechanism of servers without
// TTL (18.16): see ApplyRetention.
func (c *Store) DropPartitionsBefore(ctx context.Context, day time.Time) ([]string, error) {
	cutoff := day.UTC().Format("20060102")
	tables := make([]string, len(retainedTables))
	for i, t := range retainedTables {
		tables[i] = quote(t.name)
	}
	q := fmt.Sprintf("SELECT DISTINCT table, partition_id FROM system.parts WHERE database = %s AND table IN (%s) AND active AND partition_id < %s ORDER BY partition_id, table",
		quote(c.db), strings.Join(tables, ", "), quote(cutoff))
	rows, err := c.conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("audit: list partitions: %w", err)
	}
	type part struct{ table, id string }
	var parts []part
	for rows.Next() {
		var p part
		if err := rows.Scan(&p.table, &p.id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("audit: list partitions: %w", err)
		}
		parts = append(parts, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: list partitions: %w", err)
	}
	var dropped []string
	for _, p := range parts {
		if err := c.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s.%s DROP PARTITION ID %s", c.db, p.table, quote(p.id))); err != nil {
			return dropped, fmt.Errorf("audit: drop partition %s of %s: %w", p.id, p.table, err)
		}
		if len(dropped) == 0 || dropped[len(dropped)-1] != p.id {
			dropped = append(dropped, p.id)
		}
	}
	return slices.Clip(dropped), nil
}

// ServerVersion returns the server's version as numbers, e.g. [18 16 1].
func (c *Store) ServerVersion(ctx context.Context) ([]int, error) {
	var v string
	if err := c.conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		return nil, fmt.Errorf("audit: read server version: %w", err)
	}
	var out []int
	for _, f := range strings.Split(v, ".") {
		n, err := strconv.Atoi(f)
		if err != nil {
			break
		}
		out = append(out, n)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("audit: server version %q: want major.minor…", v)
	}
	return out, nil
}

// SupportsTTL reports whether a server of version v has table TTL
// (ClickHouse 19.6 and later).
func SupportsTTL(v []int) bool { return len(v) >= 2 && (v[0] > 19 || v[0] == 19 && v[1] >= 6) }

// TTLStatements are the ALTER TABLE … MODIFY TTL statements that make a
// server with TTL (see SupportsTTL) delete rows older than retention
// (whole seconds) from the attempts table and its views, in background
// merges.
func (c *Store) TTLStatements(retention time.Duration) []string {
	out := make([]string, len(retainedTables))
	for i, t := range retainedTables {
		out[i] = fmt.Sprintf("ALTER TABLE %s.%s MODIFY TTL %s + INTERVAL %d SECOND", c.db, t.name, t.timeColumn, int64(retention/time.Second))
	}
	return out
}

// engines returns system.tables' engine_full of the retained tables, by
// table name.
func (c *Store) engines(ctx context.Context) (map[string]string, error) {
	names := make([]string, len(retainedTables))
	for i, t := range retainedTables {
		names[i] = quote(t.name)
	}
	rows, err := c.conn.Query(ctx, fmt.Sprintf("SELECT name, engine_full FROM system.tables WHERE database = %s AND name IN (%s)",
		quote(c.db), strings.Join(names, ", ")))
	if err != nil {
		return nil, fmt.Errorf("audit: read table engines: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, engine string
		if err := rows.Scan(&name, &engine); err != nil {
			return nil, fmt.Errorf("audit: read table engines: %w", err)
		}
		out[name] = engine
	}
	return out, rows.Err()
}

// pendingTTLStatements are the TTLStatements of the tables whose engine
// (engines: system.tables' engine_full by table name) does not carry that
// TTL already. A MODIFY TTL on current servers starts a MATERIALIZE TTL
// mutation, a rewrite of every part, even when the TTL is unchanged; the
// audit role applies retention at every start, so it skips those.
func (c *Store) pendingTTLStatements(retention time.Duration, engines map[string]string) []string {
	all := c.TTLStatements(retention)
	var out []string
	for i, t := range retainedTables {
		if !hasTTL(engines[t.name], t.timeColumn, int64(retention/time.Second)) {
			out = append(out, all[i])
		}
	}
	return out
}

// hasTTL reports whether engineFull (system.tables' engine_full) has the
// table TTL "col + INTERVAL secs SECOND", as the server renders it
// ("TTL col + toIntervalSecond(secs)"), and no other TTL clause after it.
func hasTTL(engineFull, col string, secs int64) bool {
	for _, want := range []string{
		fmt.Sprintf(" TTL %s + toIntervalSecond(%d)", col, secs),
		fmt.Sprintf(" TTL %s + INTERVAL %d SECOND", col, secs),
	} {
		i := strings.Index(engineFull, want)
		if i < 0 {
			continue
		}
		rest := engineFull[i+len(want):]
		if rest == "" || strings.HasPrefix(rest, " SETTINGS ") {
			return true
		}
	}
	return false
}

// Retention is what ApplyRetention did.
type Retention struct {
	// TTL is true when the server has TTL and the tables now carry one;
	// later calls need not drop anything.
	TTL bool
	// Dropped are the day partitions dropped (servers without TTL).
	Dropped []string
}

// ApplyRetention deletes, or has the server delete, attempts older than
// retention (at least 24 h) as of now, in the attempts table and its views.
// A server with TTL (19.6+) gets a table TTL (TTLStatements: rows expire in
// background merges, to the second); an older one (18.16) gets its whole
// UTC-day partitions older than now-retention dropped (DropPartitionsBefore
// of that instant's day), so up to a day more than retention is kept. Call
// it periodically: the TTL path changes only tables whose TTL differs
// (system.tables' engine_full; an unchanged TTL starts no mutation), the
// drop path acts on days that aged since.
func (c *Store) ApplyRetention(ctx context.Context, retention time.Duration, now time.Time) (Retention, error) {
	if retention < 24*time.Hour {
		return Retention{}, fmt.Errorf("audit: retention %s: want at least 24h", retention)
	}
	v, err := c.ServerVersion(ctx)
	if err != nil {
		return Retention{}, err
	}
	if SupportsTTL(v) {
		engines, err := c.engines(ctx)
		if err != nil {
			return Retention{}, err
		}
		for _, s := range c.pendingTTLStatements(retention, engines) {
			if err := c.conn.Exec(ctx, s); err != nil {
				return Retention{}, fmt.Errorf("audit: set retention TTL: %w", err)
			}
		}
		return Retention{TTL: true}, nil
	}
	dropped, err := c.DropPartitionsBefore(ctx, now.Add(-retention))
	return Retention{Dropped: dropped}, err
}

var literal = strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\x00", `\0`)

// quote renders s as a ClickHouse string literal.
func quote(s string) string { return "'" + literal.Replace(s) + "'" }

// Quantile levels of audit.EndpointSummary's LatencyP50 and LatencyP99.
const (
	p50 = 0.5
	p99 = 0.99
)
