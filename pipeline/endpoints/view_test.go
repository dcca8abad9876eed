package endpoints

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The View and Store tests run twice: against kfake (this file) and against
// the real broker (view_kafka_test.go), through env.

const waitTimeout = 30 * time.Second

// env is a Kafka (fake or real) with the two compacted topics created.
type env struct {
	seeds            []string
	endpoints, state string
	raw              *kgo.Client // a plain producer, as another writer would be
}

func newKfakeEnv(t *testing.T, partitions int32) (*env, *kfake.Cluster) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &env{seeds: c.ListenAddrs(), endpoints: "hookrelay.endpoints", state: "hookrelay.endpoint-status"}
	for _, topic := range []string{e.endpoints, e.state} {
		if err := c.CreateTopic(topic, partitions, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
	}
	e.raw = newRawClient(t, e.seeds)
	return e, c
}

func newRawClient(t *testing.T, seeds []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes one record (nil value: tombstone) and returns its offset.
func (e *env) produce(t *testing.T, topic, key string, value []byte) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: value}
	if err := e.raw.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("produce %s/%s: %v", topic, key, err)
	}
	return r.Offset
}

// changeLog records OnChange calls.
type changeLog struct {
	mu      sync.Mutex
	changes []Change
}

func (l *changeLog) add(c Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = append(l.changes, c)
}

func (l *changeLog) of(id string) []Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Change
	for _, c := range l.changes {
		if c.ID == id {
			out = append(out, c)
		}
	}
	return out
}

// start runs a View over e and returns it with a Store; the view is stopped
// (and Run's result checked) when the test ends.
func (e *env) start(t *testing.T, extra ...kgo.Opt) (*View, *Store, *changeLog) {
	t.Helper()
	log := &changeLog{}
	v, err := NewView(Config{
		Brokers:        e.seeds,
		KafkaOptions:   extra,
		EndpointsTopic: e.endpoints,
		StatusTopic:    e.state,
		Logger:         slog.New(slog.DiscardHandler),
		OnChange:       log.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- v.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("View.Run: %v", err)
		}
	})
	return v, NewStore(v), log
}

func waitReady(t *testing.T, v *View) {
	t.Helper()
	select {
	case <-v.Ready():
	case <-time.After(waitTimeout):
		t.Fatalf("view not ready after %s", waitTimeout)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func endpointJSONFor(t *testing.T, id, url string, types ...string) []byte {
	t.Helper()
	e := Endpoint{ID: id, URL: url, Secrets: []Secret{{Value: secretA}}, EventTypes: types}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testReadyAfterCatchUp: history written before the view starts (rewrites,
// tombstones, status records over several partitions) is entirely visible
// the moment Ready closes.
func testReadyAfterCatchUp(t *testing.T, e *env) {
	const n = 300
	offsets := map[string]int64{}
	for i := range n {
		id := fmt.Sprintf("ep-%03d", i)
		offsets[id] = e.produce(t, e.endpoints, id, endpointJSONFor(t, id, "https://old.example/"+id, "*"))
	}
	for i := 0; i < n; i += 3 { // rewrite every third
		id := fmt.Sprintf("ep-%03d", i)
		offsets[id] = e.produce(t, e.endpoints, id, endpointJSONFor(t, id, "https://new.example/"+id, "order.*"))
	}
	for i := 1; i < n; i += 10 { // delete every tenth
		id := fmt.Sprintf("ep-%03d", i)
		e.produce(t, e.endpoints, id, nil)
		delete(offsets, id)
	}
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i := 2; i < n; i += 10 { // the pipeline disabled every tenth (current version)
		id := fmt.Sprintf("ep-%03d", i)
		b, _ := json.Marshal(Status{State: Disabled, Reason: ReasonGone, At: at, ConfigVersion: offsets[id] + 1})
		e.produce(t, e.state, id, b)
	}

	v, _, changes := e.start(t)
	waitReady(t, v)
	if got := v.Len(); got != len(offsets) {
		t.Fatalf("at Ready the view holds %d endpoints, want %d", got, len(offsets))
	}
	for i := range n {
		id := fmt.Sprintf("ep-%03d", i)
		ep, ok := v.Get(id)
		switch {
		case i%10 == 1:
			if ok {
				t.Errorf("%s: deleted but present", id)
			}
			continue
		case !ok:
			t.Errorf("%s: missing", id)
			continue
		case ep.Version != offsets[id]+1:
			t.Errorf("%s: version %d, want %d", id, ep.Version, offsets[id]+1)
		}
		wantURL := "https://old.example/" + id
		if i%3 == 0 {
			wantURL = "https://new.example/" + id
		}
		if ep.URL != wantURL {
			t.Errorf("%s: url %s, want %s", id, ep.URL, wantURL)
		}
		if wantActive := i%10 != 2; ep.Active() != wantActive {
			t.Errorf("%s: active %v, want %v (status %+v)", id, ep.Active(), wantActive, ep.PipelineStatus)
		}
	}
	// Match sees only active endpoints without tenant whose filter matches.
	var want []string
	for id := range offsets {
		var i int
		fmt.Sscanf(id, "ep-%03d", &i)
		if i%10 != 2 {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	var got []string
	for _, ep := range v.Match("order.created", "") {
		got = append(got, ep.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Match(order.created) = %d endpoints, want %d", len(got), len(want))
	}
	if len(changes.of("ep-000")) == 0 {
		t.Error("OnChange was not called while catching up")
	}
}

// testStoreLifecycle: writes through the Store are visible on return; the
// pipeline's status and the operator's config combine by the effective
// status rule.
func testStoreLifecycle(t *testing.T, e *env) {
	v, s, changes := e.start(t)
	ctx := ctxT(t)
	waitReady(t, v)

	created, err := s.Create(ctx, Endpoint{ID: "ep-a", URL: "https://a.example/hook", Secrets: []Secret{{Value: secretA}}, EventTypes: []string{"invoice.*"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if created.Version == 0 || created.RatePerSec != DefaultRatePerSec || created.CreatedAt.IsZero() || !created.CreatedAt.Equal(created.UpdatedAt) {
		t.Errorf("created = %+v", created)
	}
	if got, ok := v.Get("ep-a"); !ok || got.Version != created.Version {
		t.Fatalf("Get after Create = %+v, %v", got, ok)
	}
	if _, err := s.Create(ctx, Endpoint{ID: "ep-a", URL: "https://a.example/", Secrets: []Secret{{Value: secretA}}, EventTypes: []string{"*"}}); !errors.Is(err, ErrExists) {
		t.Errorf("second Create: %v, want ErrExists", err)
	}
	if _, err := s.Put(ctx, Endpoint{ID: "ep-b", URL: "ftp://b.example/", Secrets: []Secret{{Value: secretA}}, EventTypes: []string{"*"}}); err == nil {
		t.Error("Put of an ftp URL succeeded")
	}
	past := time.Now().Add(-time.Hour)
	if _, err := s.Put(ctx, Endpoint{ID: "ep-b", URL: "https://b.example/", Secrets: []Secret{{Value: secretA, ExpiresAt: &past}}, EventTypes: []string{"*"}}); err == nil {
		t.Error("Put with only expired secrets succeeded")
	}
	if got := v.Match("invoice.paid", ""); len(got) != 1 || got[0].ID != "ep-a" {
		t.Errorf("Match = %v", got)
	}

	// Versioned update: the first writer wins, the stale one conflicts.
	upd := created.Clone()
	upd.RatePerSec = 25
	updated, err := s.Put(ctx, *upd)
	if err != nil {
		t.Fatalf("Put with version: %v", err)
	}
	if updated.Version <= created.Version || updated.RatePerSec != 25 || !updated.CreatedAt.Equal(created.CreatedAt) {
		t.Errorf("updated = %+v", updated)
	}
	stale := created.Clone()
	stale.MaxInFlight = 9
	if _, err := s.Put(ctx, *stale); !errors.Is(err, ErrConflict) {
		t.Errorf("stale Put: %v, want ErrConflict", err)
	}

	// The pipeline disables it on a 410: status topic only.
	at := time.Now()
	if err := s.SetStatus(ctx, "ep-a", Status{State: Disabled, Reason: ReasonGone, Detail: "410 from a.example", At: at, ConfigVersion: updated.Version}); err != nil {
		t.Fatalf("SetStatus: %v", err)
	}
	got, _ := v.Get("ep-a")
	if st, reason := got.EffectiveStatus(); st != Disabled || reason != ReasonGone || got.Status != Active {
		t.Errorf("after the pipeline's 410: %s/%s (config %s)", st, reason, got.Status)
	}
	if m := v.Match("invoice.paid", ""); len(m) != 0 {
		t.Errorf("a disabled endpoint matched: %v", m)
	}
	cs := changes.of("ep-a")
	if last := cs[len(cs)-1]; last.Old == nil || !last.Old.Active() || last.New == nil || last.New.Active() {
		t.Errorf("last change = %+v, want active -> disabled", last)
	}

	// A verdict on an older config version does not disable a newer one.
	if err := s.SetStatus(ctx, "ep-a", Status{State: Disabled, Reason: ReasonGone, At: at, ConfigVersion: created.Version}); err != nil {
		t.Fatal(err)
	}
	got, _ = v.Get("ep-a")
	if got.PipelineStatus == nil || got.PipelineStatus.ConfigVersion != created.Version {
		t.Errorf("status record not replaced: %+v", got.PipelineStatus)
	}
	if !got.Active() {
		t.Errorf("a verdict on version %d disabled version %d", created.Version, got.Version)
	}

	// Pipeline disables again on the current version, the operator re-enables.
	if err := s.SetStatus(ctx, "ep-a", Status{State: Disabled, Reason: ReasonGone, At: at, ConfigVersion: got.Version}); err != nil {
		t.Fatal(err)
	}
	if got, _ = v.Get("ep-a"); got.Active() {
		t.Fatal("not disabled by the pipeline")
	}
	enabled, err := s.Enable(ctx, "ep-a")
	if err != nil {
		t.Fatalf("Enable: %v", err)
	}
	if !enabled.Active() || enabled.PipelineStatus == nil {
		t.Errorf("after Enable: active %v, status %+v", enabled.Active(), enabled.PipelineStatus)
	}
	disabled, err := s.Disable(ctx, "ep-a", "customer request")
	if err != nil {
		t.Fatal(err)
	}
	if st, reason := disabled.EffectiveStatus(); st != Disabled || reason != "customer request" {
		t.Errorf("after Disable: %s/%s", st, reason)
	}

	// Delete: tombstones for both; the ID is free again and starts clean.
	if err := s.Delete(ctx, "ep-a"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, ok := v.Get("ep-a"); ok {
		t.Error("deleted endpoint still present")
	}
	if last := changes.of("ep-a"); last[len(last)-1].New != nil {
		t.Error("no deletion change")
	}
	if err := s.Delete(ctx, "ep-a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	if _, err := s.Enable(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Enable of an unknown endpoint: %v", err)
	}
	again, err := s.Create(ctx, Endpoint{ID: "ep-a", URL: "https://a2.example/", Secrets: []Secret{{Value: secretB}}, EventTypes: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	if again.PipelineStatus != nil || !again.Active() {
		t.Errorf("recreated endpoint = %+v", again)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Masked().Secrets[0].Value != "whsec_C2FV…" {
		t.Errorf("List = %v, %v", list, err)
	}
}

// testLiveAndMalformed: records from another writer are applied live (Sync
// waits for them); unusable endpoint records are kept as invalid, with the
// field and the reason, visible but never active (issue 8, item 8); records
// with a bad key and invalid status records are skipped.
func testLiveAndMalformed(t *testing.T, e *env) {
	v, s, _ := e.start(t)
	ctx := ctxT(t)
	waitReady(t, v)
	if _, err := s.Put(ctx, Endpoint{ID: "keep", URL: "https://keep.example/", Secrets: []Secret{{Value: secretA}}, EventTypes: []string{"a.*"}}); err != nil {
		t.Fatal(err)
	}

	e.produce(t, e.endpoints, "live", endpointJSONFor(t, "live", "https://live.example/", "a.b"))
	e.produce(t, e.endpoints, "keep", []byte(`{"id":"keep","url":`))                                                                                           // bad JSON
	e.produce(t, e.endpoints, "keep", endpointJSONFor(t, "keep", "ftp://keep.example/", "*"))                                                                  // invalid
	e.produce(t, e.endpoints, "other", endpointJSONFor(t, "mismatch", "https://m.example/", "*"))                                                              // key != id
	e.produce(t, e.endpoints, "bad/key", endpointJSONFor(t, "bad/key", "https://m.example/", "*"))                                                             // bad key
	e.produce(t, e.state, "keep", []byte(`{"state":"paused","at":"2026-05-01T00:00:00Z"}`))                                                                    // invalid status
	e.produce(t, e.endpoints, "nokey", []byte(`{"url":"https://nokey.example/","secrets":[{"value":"`+secretA+`"}],"event_types":["*"]}`))                     // id from key
	e.produce(t, e.endpoints, "typed", []byte(`{"url":"https://t.example/","secrets":[{"value":"`+secretA+`"}],"event_types":["a.*"],"rate_per_sec":"fast"}`)) // a member of the wrong type
	if err := v.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got := v.Skipped(); got != 2 {
		t.Errorf("Skipped = %d, want 2 (the bad key and the invalid status)", got)
	}
	if ep, ok := v.Get("live"); !ok || ep.URL != "https://live.example/" || !ep.Active() {
		t.Errorf("live = %+v, %v", ep, ok)
	}
	invalid := map[string]string{"keep": "url: ", "other": "id: ", "typed": "rate_per_sec: "}
	for id, field := range invalid {
		ep, ok := v.Get(id)
		if !ok {
			t.Errorf("%s: absent, want it kept as invalid", id)
			continue
		}
		st, reason := ep.EffectiveStatus()
		if st != Invalid || !strings.Contains(reason, field) || ep.Active() {
			t.Errorf("%s: effective status %s %q (active %v), want invalid naming %q", id, st, reason, ep.Active(), field)
		}
	}
	if ep, ok := v.Get("nokey"); !ok || ep.ID != "nokey" {
		t.Errorf("nokey = %+v, %v", ep, ok)
	}
	for _, id := range []string{"mismatch", "bad/key"} {
		if _, ok := v.Get(id); ok {
			t.Errorf("%s present", id)
		}
	}
	ids := func(eps []*Endpoint) []string {
		var out []string
		for _, ep := range eps {
			out = append(out, ep.ID)
		}
		return out
	}
	if got, want := ids(v.Match("a.b", "")), []string{"live", "nokey"}; !slices.Equal(got, want) {
		t.Errorf("Match(a.b) = %v, want %v", got, want)
	}
	if got, want := ids(v.Subscribed("a.b", "")), []string{"keep", "live", "nokey", "other", "typed"}; !slices.Equal(got, want) {
		t.Errorf("Subscribed(a.b) = %v, want %v", got, want)
	}

	// A second view started now sees the same table at Ready.
	v2, _, _ := e.start(t)
	waitReady(t, v2)
	if v2.Len() != v.Len() || v2.Skipped() != 2 {
		t.Errorf("second view: %d endpoints, %d skipped; want %d, 2", v2.Len(), v2.Skipped(), v.Len())
	}
}

func TestViewKfakeReadyAfterCatchUp(t *testing.T) {
	e, _ := newKfakeEnv(t, 3)
	testReadyAfterCatchUp(t, e)
}

func TestViewKfakeStoreLifecycle(t *testing.T) {
	e, _ := newKfakeEnv(t, 3)
	testStoreLifecycle(t, e)
}

func TestViewKfakeLiveAndMalformed(t *testing.T) {
	e, _ := newKfakeEnv(t, 3)
	testLiveAndMalformed(t, e)
}

// Ready is not closed while the fetch that carries the history is held back
// by the broker, and is closed once it is answered.
func TestViewKfakeReadyWaitsForFetch(t *testing.T) {
	e, c := newKfakeEnv(t, 2)
	for i := range 20 {
		id := fmt.Sprintf("ep-%d", i)
		e.produce(t, e.endpoints, id, endpointJSONFor(t, id, "https://x.example/", "*"))
	}
	gate := make(chan struct{})
	held := make(chan struct{}, 1)
	var released atomic.Bool
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !released.Load() {
			select {
			case held <- struct{}{}:
			default:
			}
			c.SleepControl(func() { <-gate })
		}
		return nil, nil, false
	})
	v, _, _ := e.start(t)
	select {
	case <-held:
	case <-time.After(waitTimeout):
		t.Fatal("the view never fetched")
	}
	select {
	case <-v.Ready():
		t.Fatal("Ready closed before any record was fetched")
	default:
	}
	if v.Len() != 0 {
		t.Fatalf("view holds %d endpoints before the fetch was answered", v.Len())
	}
	released.Store(true)
	close(gate)
	waitReady(t, v)
	if v.Len() != 20 {
		t.Errorf("at Ready: %d endpoints, want 20", v.Len())
	}
}

// Empty topics: Ready at once. Missing topics: Ready waits for them.
func TestViewKfakeEmptyAndMissingTopics(t *testing.T) {
	e, c := newKfakeEnv(t, 1)
	v, _, _ := e.start(t)
	waitReady(t, v)

	e2 := &env{seeds: e.seeds, endpoints: "later.endpoints", state: "later.endpoint-status", raw: e.raw}
	v2, _, _ := e2.start(t)
	select {
	case <-v2.Ready():
		t.Fatal("Ready with topics that do not exist")
	case <-time.After(300 * time.Millisecond):
	}
	for _, topic := range []string{e2.endpoints, e2.state} {
		if err := c.CreateTopic(topic, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
	}
	e2.produce(t, e2.endpoints, "x", endpointJSONFor(t, "x", "https://x.example/", "*"))
	waitReady(t, v2)
	if err := v2.Sync(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok := v2.Get("x"); !ok {
		t.Error("endpoint written after the topics appeared is missing")
	}
}

// After compaction (older versions and tombstones gone), a new view still
// becomes ready and shows the latest state.
func TestViewKfakeAfterCompaction(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &env{seeds: c.ListenAddrs(), endpoints: "c.endpoints", state: "c.endpoint-status"}
	for _, topic := range []string{e.endpoints, e.state} {
		if err := c.CreateTopic(topic, 1, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "0", "segment.ms": "1"}); err != nil {
			t.Fatal(err)
		}
	}
	e.raw = newRawClient(t, e.seeds)
	for round := range 3 {
		for i := range 10 {
			id := fmt.Sprintf("ep-%d", i)
			e.produce(t, e.endpoints, id, endpointJSONFor(t, id, fmt.Sprintf("https://r%d.example/", round), "*"))
		}
	}
	e.produce(t, e.endpoints, "ep-9", nil)
	c.Compact()

	v, _, _ := e.start(t)
	waitReady(t, v)
	if v.Len() != 9 {
		t.Errorf("%d endpoints after compaction, want 9", v.Len())
	}
	if ep, ok := v.Get("ep-3"); !ok || ep.URL != "https://r2.example/" {
		t.Errorf("ep-3 = %+v", ep)
	}
}

func TestNewViewConfig(t *testing.T) {
	seeds := []string{"127.0.0.1:1"}
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{EndpointsTopic: "e", StatusTopic: "s"}, "Brokers"},
		{Config{Brokers: seeds, StatusTopic: "s"}, "EndpointsTopic"},
		{Config{Brokers: seeds, EndpointsTopic: "e"}, "StatusTopic"},
		{Config{Brokers: seeds, EndpointsTopic: "e", StatusTopic: "e"}, "StatusTopic"},
	} {
		_, err := NewView(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewView(%+v) = %v, want an error naming %s", tt.cfg, err, tt.want)
		}
	}
}

// A stopped view fails the Store's writes instead of hanging.
func TestStoreAfterStop(t *testing.T) {
	e, _ := newKfakeEnv(t, 1)
	v, err := NewView(Config{Brokers: e.seeds, EndpointsTopic: e.endpoints, StatusTopic: e.state, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	waitReady(t, v)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := v.Run(context.Background()); err == nil {
		t.Error("second Run succeeded")
	}
	s := NewStore(v)
	_, err = s.Put(ctxT(t), validEndpoint())
	if !errors.Is(err, ErrViewStopped) {
		t.Errorf("Put on a stopped view: %v, want ErrViewStopped", err)
	}
	if err := v.Sync(ctxT(t)); !errors.Is(err, ErrViewStopped) {
		t.Errorf("Sync on a stopped view: %v", err)
	}
}

// Readers on other goroutines see consistent snapshots while the table
// changes (run with -race); OnChange reports each rate change with the old
// and new endpoint.
func TestViewKfakeConcurrentReads(t *testing.T) {
	e, _ := newKfakeEnv(t, 2)
	v, s, changes := e.start(t)
	ctx := ctxT(t)
	waitReady(t, v)
	for i := range 20 {
		if _, err := s.Put(ctx, Endpoint{ID: fmt.Sprintf("ep-%02d", i), URL: "https://x.example/", Secrets: []Secret{{Value: secretA}}, EventTypes: []string{"invoice.*", "invoice.paid"}}); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				m := v.Match("invoice.paid", "")
				if !slices.IsSortedFunc(m, func(a, b *Endpoint) int { return strings.Compare(a.ID, b.ID) }) {
					t.Error("Match result not sorted")
				}
				for i, ep := range m {
					if !ep.Active() || (i > 0 && m[i-1] == ep) {
						t.Errorf("Match returned %s inactive or twice", ep.ID)
					}
				}
				if ep, ok := v.Get("ep-00"); ok && ep.RatePerSec <= 0 {
					t.Error("Get returned a half-built endpoint")
				}
				reads.Add(1)
				runtime.Gosched()
			}
		})
	}
	for i := range 20 {
		ep, _ := v.Get("ep-00")
		c := ep.Clone()
		c.RatePerSec = float64(i + 1)
		if _, err := s.Put(ctx, *c); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			if err := s.Delete(ctx, fmt.Sprintf("ep-%02d", 10+i/5)); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("no reads happened")
	}
	if got := len(v.Match("invoice.paid", "")); got != 16 {
		t.Errorf("Match = %d endpoints, want 16", got)
	}
	cs := changes.of("ep-00")
	last := cs[len(cs)-1]
	if last.Old == nil || last.New == nil || last.Old.RatePerSec != 19 || last.New.RatePerSec != 20 {
		t.Errorf("last change of ep-00: %+v -> %+v", last.Old, last.New)
	}
}
