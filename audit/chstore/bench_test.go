package chstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/audit/chstore"
	"github.com/hookrelay/hookrelay/audit/sink"
	"github.com/hookrelay/hookrelay/e2e/stack"
)

// benchAttempt is a realistic attempt: ~100-byte response body, an error on
// one in five.
func benchAttempt(i int, at time.Time) audit.Attempt {
	a := audit.Attempt{
		AttemptID:     fmt.Sprintf("%032x", i),
		DeliveryID:    fmt.Sprintf("dlv_%024x", i/2),
		EventID:       fmt.Sprintf("evt-%d", i/2),
		WebhookID:     fmt.Sprintf("msg_%024x", i/2),
		EventType:     "invoice.paid",
		Tenant:        "tenant-" + strconv.Itoa(i%7),
		EndpointID:    "ep-" + strconv.Itoa(i%100),
		URLHost:       "hooks.example.com",
		AttemptNumber: 1 + i%3,
		AttemptedAt:   at,
		LatencyMs:     int64(20 + i%300),
		HTTPStatus:    200,
		Outcome:       audit.Delivered,
		ResponseBody:  `{"ok":true,"received":"` + strings.Repeat("x", 64) + `"}`,
	}
	if i%5 == 0 {
		a.HTTPStatus, a.Outcome, a.ErrorClass, a.ErrorMessage = 503, audit.RetryScheduled, "http_503", "Service Unavailable"
		a.NextAttemptAt = at.Add(30 * time.Second)
	}
	return a
}

// BenchmarkClickHouseInsert measures Store.Insert into ClickHouse, one batch
// per op, and reports attempts/s. Building the batch is not timed.
func BenchmarkClickHouseInsert(b *testing.B) {
	for _, size := range []int{10, 1000, 5000, 20000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s := newClickHouse(b)
			ctx := context.Background()
			at := time.Now().UTC()
			batch := make([]audit.Attempt, size)
			n := 0
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				for j := range batch {
					batch[j] = benchAttempt(n, at.Add(time.Duration(n)*time.Millisecond))
					n++
				}
				b.StartTimer()
				if err := s.Insert(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "attempts/s")
		})
	}
}

// BenchmarkClickHouseLog measures the delivery-log query (one endpoint's
// newest 100 attempts, FINAL) on a large table generated server-side:
// HOOKRELAY_AUDIT_BENCH_ROWS rows (default 10,000,000) over 7 days, 10 % of
// them on one hot endpoint ("ep-hot") and the rest spread over 1,000
// endpoints. Generation is not timed (about a minute for 10 M rows on two
// cores); set HOOKRELAY_AUDIT_BENCH_DB to a database name to keep the table
// between runs (it is reused when it holds the requested row count).
func BenchmarkClickHouseLog(b *testing.B) {
	rows := 10_000_000
	if v := os.Getenv("HOOKRELAY_AUDIT_BENCH_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil {
			b.Fatalf("HOOKRELAY_AUDIT_BENCH_ROWS: %v", err)
		}
	}
	var s *chstore.Store
	if db := os.Getenv("HOOKRELAY_AUDIT_BENCH_DB"); db != "" {
		s = openClickHouse(b, db)
	} else {
		s = openClickHouse(b, stack.Database(b))
	}
	ctx := context.Background()
	if _, err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	have, err := s.RawRowCount(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if have != int64(rows) {
		start := time.Now()
		if err := generateAttempts(ctx, s, rows); err != nil {
			b.Fatal(err)
		}
		b.Logf("generated %d rows in %s", rows, time.Since(start).Round(time.Millisecond))
	}
	// Query as if the table were live: its newest attempts are just now.
	s.SetNow(func() time.Time { return benchEnd })
	for _, q := range []struct {
		name string
		q    audit.Query
	}{
		{"endpoint=10k_rows", audit.Query{EndpointID: "ep-7"}},
		{"endpoint=hot_1M_rows", audit.Query{EndpointID: "ep-hot"}},
		{"endpoint=hot_1M_rows/since=1h", audit.Query{EndpointID: "ep-hot", Since: benchEnd.Add(-time.Hour)}},
		{"endpoint=hot_1M_rows/event", audit.Query{EndpointID: "ep-hot", EventID: "evt-4242420"}},
		{"endpoint=hot_1M_rows/page_2_days_back", audit.Query{EndpointID: "ep-hot", Before: audit.Cursor{AttemptedAt: benchEnd.Add(-48 * time.Hour)}}},
		{"endpoint=absent", audit.Query{EndpointID: "ep-none"}},
	} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				got, err := s.Log(ctx, q.q)
				if err != nil {
					b.Fatal(err)
				}
				if len(got) == 0 && q.q.EndpointID != "ep-none" {
					b.Fatal("no attempts")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/query")
		})
	}
}

// benchEnd is the newest attempt time of the generated table.
var benchEnd = time.Date(2025, 3, 8, 0, 0, 0, 0, time.UTC)

// generateAttempts fills s's attempts table with n synthetic rows spread
// evenly over the 7 days before benchEnd, in INSERT … SELECT chunks of 1 M
// (so the table has several parts per partition, as a live one does).
func generateAttempts(ctx context.Context, s *chstore.Store, n int) error {
	if err := s.Exec(ctx, "TRUNCATE TABLE "+s.Database()+".attempts"); err != nil {
		return err
	}
	const chunk = 1_000_000
	span := int64(7 * 24 * 3600 * 1000) // ms
	startMs := benchEnd.UnixMilli() - span
	for off := 0; off < n; off += chunk {
		m := min(chunk, n-off)
		q := fmt.Sprintf(`INSERT INTO %[1]s.attempts (%[2]s)
SELECT
    concat('a', toString(k)),
    concat('dlv_', toString(intDiv(k, 2))),
    concat('evt-', toString(k)),
    concat('msg_', toString(intDiv(k, 2))),
    'invoice.paid',
    '',
    if(k %% 10 = 0, 'ep-hot', concat('ep-', toString(k %% 1000))),
    'hooks.example.com',
    toUInt16(1 + k %% 3),
    toDateTime(intDiv(ms, 1000)),
    toUInt16(ms %% 1000),
    toUInt32(20 + k %% 300),
    toUInt16(if(k %% 5 = 0, 503, 200)),
    if(k %% 5 = 0, 'retry_scheduled', 'delivered'),
    if(k %% 5 = 0, 'http_503', ''),
    if(k %% 5 = 0, 'Service Unavailable', ''),
    '{"ok":true}',
    toDateTime(0),
    toUInt16(0)
FROM (SELECT number + %[3]d AS k, %[4]d + intDiv(k * %[5]d, %[6]d) AS ms FROM system.numbers LIMIT %[7]d)`,
			s.Database(), strings.ReplaceAll(chstore.Columns, "\n", " "), off, startMs, span, n, m)
		if err := s.Exec(ctx, q); err != nil {
			return fmt.Errorf("generate rows %d..%d: %w", off, off+m, err)
		}
	}
	return nil
}

// BenchmarkSinkThroughput measures the whole audit path on the real stack:
// records produced beforehand to an attempts topic (3 partitions), then timed
// from the sink's start until ClickHouse holds them all (JSON decode, batch
// insert, offset commit). One op is 100,000 attempts.
func BenchmarkSinkThroughput(b *testing.B) {
	const perOp = 100_000
	ctx := context.Background()
	iter := 0
	for b.Loop() {
		b.StopTimer()
		iter++
		prefix := stack.TopicPrefix(b) + strconv.Itoa(iter) + "."
		topic := prefix + "attempts"
		if _, err := stack.Admin(b).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
			b.Fatal(err)
		}
		store := openClickHouse(b, stack.Database(b))
		if _, err := store.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		store.Exec(ctx, "TRUNCATE TABLE "+store.Database()+".attempts")
		producer := stack.Client(b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
		at := time.Now().UTC()
		recs := make([]*kgo.Record, 0, perOp)
		for i := range perOp {
			a := benchAttempt(i, at.Add(time.Duration(i)*time.Millisecond))
			v, _ := a.Marshal()
			recs = append(recs, &kgo.Record{Key: []byte(a.EndpointID), Value: v})
		}
		if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		sink, err := sink.New(sink.Options{Brokers: stack.Brokers(b), Topic: topic, Group: prefix + "audit", Store: store})
		if err != nil {
			b.Fatal(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- sink.Run(sctx) }()
		for {
			n, err := store.Count(ctx, audit.Filter{})
			if err != nil {
				b.Fatal(err)
			}
			if n == perOp {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(perOp*b.N)/b.Elapsed().Seconds(), "attempts/s")
}
