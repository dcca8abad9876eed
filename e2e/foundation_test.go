package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/e2e/stack"
)

// Timing for group members in tests: the local broker allows sessions down
// to 500 ms (deploy/local/server.properties), and a 100 ms heartbeat makes a
// rebalance take ~0.2 s instead of seconds (issue 2 notes).
var fastGroup = []kgo.Opt{
	kgo.HeartbeatInterval(100 * time.Millisecond),
	kgo.SessionTimeout(1500 * time.Millisecond),
	kgo.RebalanceTimeout(5 * time.Second),
	kgo.FetchMaxWait(100 * time.Millisecond),
	kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
}

// waitTimeout bounds every wait for records in this file.
const waitTimeout = 30 * time.Second

// TestBrokerIsTheLocalStack proves the harness talks to the real broker it
// was given, not a stand-in: the cluster ID in the broker's metadata is the
// one the stack formatted its storage with.
func TestBrokerIsTheLocalStack(t *testing.T) {
	ownsStack(t, "checks the local stack's cluster ID")
	got, want := stack.ClusterID(t), stack.ExpectedClusterID(t)
	if got == "" || got != want {
		t.Fatalf("broker reports cluster ID %q, want the stack's %q", got, want)
	}
}

// TestKafkaGroupCommitPauseResume creates topics with kadm, produces keyed
// records, consumes them in a group with manual commits, and pauses and
// resumes a partition, all on the real broker.
func TestKafkaGroupCommitPauseResume(t *testing.T) {
	ownsStack(t, "creates topics of its own")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	prefix := stack.TopicPrefix(t)
	topic := prefix + "in"
	group := prefix + "group"
	const partitions = 4
	createTopic(ctx, t, topic, partitions, nil)

	// Keyed records: every record of a key lands on one partition.
	prod := stack.Client(t, kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%10), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	keyPartition := map[string]int32{}
	usedPartitions := map[int32]bool{}
	for _, r := range recs {
		if p, ok := keyPartition[string(r.Key)]; ok && p != r.Partition {
			t.Fatalf("key %s went to partitions %d and %d", r.Key, p, r.Partition)
		}
		keyPartition[string(r.Key)] = r.Partition
		usedPartitions[r.Partition] = true
	}
	if len(usedPartitions) < 2 {
		t.Fatalf("10 keys landed on %d partition(s) of %d; want a spread", len(usedPartitions), partitions)
	}

	// Consume in a group, committing by hand.
	cons := stack.Client(t, append(slices.Clone(fastGroup),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())...)
	got := pollUntil(ctx, t, cons, func(all []*kgo.Record) bool { return len(all) >= len(recs) })
	if len(got) != len(recs) {
		t.Fatalf("consumed %d records, want %d", len(got), len(recs))
	}
	if err := cons.CommitRecords(ctx, got...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	committed, err := stack.Admin(t).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch committed offsets: %v", err)
	}
	var sum int64
	committed.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != int64(len(recs)) {
		t.Fatalf("committed offsets sum to %d, want %d", sum, len(recs))
	}

	// Pause one partition: a record produced to it first is held back while
	// a later one on another partition arrives; after resume it arrives too.
	pausedP, otherP := recs[0].Partition, recs[1].Partition
	for _, r := range recs {
		if r.Partition != pausedP {
			otherP = r.Partition
			break
		}
	}
	if paused := cons.PauseFetchPartitions(map[string][]int32{topic: {pausedP}}); !slices.Contains(paused[topic], pausedP) {
		t.Fatalf("PauseFetchPartitions returned %v, want %s/%d among them", paused, topic, pausedP)
	}
	manual := stack.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	held := &kgo.Record{Partition: pausedP, Key: []byte("held"), Value: []byte("while paused")}
	passing := &kgo.Record{Partition: otherP, Key: []byte("passing"), Value: []byte("not paused")}
	if err := manual.ProduceSync(ctx, held, passing).FirstErr(); err != nil {
		t.Fatalf("produce to chosen partitions: %v", err)
	}
	during := pollUntil(ctx, t, cons, func(all []*kgo.Record) bool { return containsKey(all, "passing") })
	if containsKey(during, "held") {
		t.Fatalf("record on paused partition %d was fetched while paused", pausedP)
	}
	cons.ResumeFetchPartitions(map[string][]int32{topic: {pausedP}})
	after := pollUntil(ctx, t, cons, func(all []*kgo.Record) bool { return containsKey(all, "held") })
	if after[len(after)-1].Partition != pausedP {
		t.Fatalf("held record came from partition %d, want %d", after[len(after)-1].Partition, pausedP)
	}
}

// TestKafkaTransactionConsumeTransformProduce runs two consume-transform-
// produce transactions in a group transact session: the first commits, the
// second aborts. A read_committed reader sees only the first output; a
// read_uncommitted reader sees both (so the aborted write did happen), and
// the group's committed offset covers only the first input.
func TestKafkaTransactionConsumeTransformProduce(t *testing.T) {
	ownsStack(t, "creates topics of its own")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	prefix := stack.TopicPrefix(t)
	in, out, group := prefix+"tx-in", prefix+"tx-out", prefix+"tx-group"
	createTopic(ctx, t, in, 1, nil)
	createTopic(ctx, t, out, 2, nil)

	plain := stack.Client(t)
	produce := func(topic, key, value string) {
		t.Helper()
		if err := plain.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatalf("produce %s to %s: %v", key, topic, err)
		}
	}

	sess, err := kgo.NewGroupTransactSession(append(slices.Clone(fastGroup),
		kgo.SeedBrokers(stack.Brokers(t)...),
		kgo.TransactionalID(prefix+"tx"),
		kgo.TransactionTimeout(10*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		t.Fatalf("NewGroupTransactSession: %v", err)
	}
	defer sess.Close()

	// transform consumes the next input record and produces its upper-cased
	// value to out, inside one transaction ended with end.
	transform := func(end kgo.TransactionEndTry) (committed bool) {
		t.Helper()
		if err := sess.Begin(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		var got []*kgo.Record
		for len(got) == 0 {
			fs := sess.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("poll in transaction: %v", err)
			}
			got = fs.Records()
		}
		if len(got) != 1 {
			t.Fatalf("transaction consumed %d records, want 1", len(got))
		}
		r := got[0]
		res := sess.ProduceSync(ctx, &kgo.Record{Topic: out, Key: r.Key, Value: []byte(strings.ToUpper(string(r.Value)))})
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce in transaction: %v", err)
		}
		committed, err := sess.End(ctx, end)
		if err != nil {
			t.Fatalf("end transaction (%v): %v", end, err)
		}
		return committed
	}

	produce(in, "a", "first")
	if !transform(kgo.TryCommit) {
		t.Fatal("first transaction did not commit")
	}
	produce(in, "b", "second")
	if transform(kgo.TryAbort) {
		t.Fatal("second transaction committed, want aborted")
	}
	// A plain record after the abort: once a reader sees it, it has read
	// past everything the transactions wrote.
	produce(out, "sentinel", "END")

	read := func(level kgo.IsolationLevel) []string {
		t.Helper()
		cl := stack.Client(t, kgo.ConsumeTopics(out), kgo.FetchIsolationLevel(level),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
		var values []string
		for _, r := range pollUntil(ctx, t, cl, func(all []*kgo.Record) bool { return containsKey(all, "sentinel") }) {
			values = append(values, string(r.Value))
		}
		slices.Sort(values)
		return values
	}
	if got, want := read(kgo.ReadCommitted()), []string{"END", "FIRST"}; !slices.Equal(got, want) {
		t.Errorf("read_committed sees %q, want %q", got, want)
	}
	if got, want := read(kgo.ReadUncommitted()), []string{"END", "FIRST", "SECOND"}; !slices.Equal(got, want) {
		t.Errorf("read_uncommitted sees %q, want %q", got, want)
	}

	offsets, err := stack.Admin(t).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch committed offsets: %v", err)
	}
	o, ok := offsets.Lookup(in, 0)
	if !ok || o.Err != nil || o.At != 1 {
		t.Fatalf("group committed offset of %s/0 is %+v (found %v), want 1: only the committed transaction's input", in, o, ok)
	}
}

// TestClickHouseNativeRoundTrip writes rows with a batch insert (explicit
// column list) over the native protocol into the test's own database and
// reads them back.
func TestClickHouseNativeRoundTrip(t *testing.T) {
	ownsStack(t, "creates a database of its own")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := stack.ClickHouse(t)

	var current string
	if err := conn.QueryRow(ctx, "SELECT currentDatabase()").Scan(&current); err != nil {
		t.Fatalf("currentDatabase: %v", err)
	}
	if want := stack.Database(t); current != want {
		t.Fatalf("connected to database %q, want the test's own %q", current, want)
	}

	if err := conn.Exec(ctx, `CREATE TABLE probe (
		id UInt64, endpoint String, at DateTime, status UInt16, ok UInt8
	) ENGINE = MergeTree() ORDER BY id`); err != nil {
		t.Fatalf("create table: %v", err)
	}
	type row struct {
		id       uint64
		endpoint string
		at       time.Time
		status   uint16
		ok       uint8
	}
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rows := []row{
		{1, "ep_a", base, 200, 1},
		{2, "ep_b", base.Add(time.Second), 503, 0},
		{3, "ep_a", base.Add(2 * time.Second), 410, 0},
	}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO probe (id, endpoint, at, status, ok)")
	if err != nil {
		t.Fatalf("prepare batch: %v", err)
	}
	for _, r := range rows {
		if err := batch.Append(r.id, r.endpoint, r.at, r.status, r.ok); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatalf("send batch: %v", err)
	}

	res, err := conn.Query(ctx, "SELECT id, endpoint, at, status, ok FROM probe ORDER BY id")
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	defer res.Close()
	var got []row
	for res.Next() {
		var r row
		if err := res.Scan(&r.id, &r.endpoint, &r.at, &r.status, &r.ok); err != nil {
			t.Fatalf("scan: %v", err)
		}
		got = append(got, r)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("rows: %v", err)
	}
	if len(got) != len(rows) {
		t.Fatalf("read %d rows, want %d", len(got), len(rows))
	}
	for i := range rows {
		g, w := got[i], rows[i]
		if g.id != w.id || g.endpoint != w.endpoint || !g.at.Equal(w.at) || g.status != w.status || g.ok != w.ok {
			t.Errorf("row %d = %+v, want %+v", i, g, w)
		}
	}

	var failed uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM probe WHERE ok = 0 AND endpoint = ?", "ep_a").Scan(&failed); err != nil {
		t.Fatalf("count: %v", err)
	}
	if failed != 1 {
		t.Errorf("failed attempts of ep_a = %d, want 1", failed)
	}
}

// createTopic creates topic with the given partitions (replication factor
// 1, the local stack's only broker) and optional configs, failing the test
// on any error.
func createTopic(ctx context.Context, t *testing.T, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := stack.Admin(t).CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// pollUntil polls cl until done holds for everything polled so far (or
// waitTimeout passes, which fails the test) and returns what it polled.
func pollUntil(ctx context.Context, t *testing.T, cl *kgo.Client, done func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	var all []*kgo.Record
	for !done(all) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("after %s: polled %d records, condition still unmet", waitTimeout, len(all))
		}
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		all = append(all, fs.Records()...)
	}
	return all
}

func containsKey(rs []*kgo.Record, key string) bool {
	return slices.ContainsFunc(rs, func(r *kgo.Record) bool { return string(r.Key) == key })
}
