package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/pipeline/events"
)

func TestMatches(t *testing.T) {
	tests := []struct {
		filter []string
		typ    string
		want   bool
	}{
		{[]string{"*"}, "push", true},
		{[]string{"*"}, "issues.opened", true},
		{[]string{"push"}, "push", true},
		{[]string{"push"}, "push.x", false},
		{[]string{"push"}, "pushed", false},
		{[]string{"issues.*"}, "issues.opened", true},
		{[]string{"issues.*"}, "issues", false},
		{[]string{"issues.*"}, "issues_comment.created", false},
		{[]string{"issues.*", "push"}, "push", true},
		{[]string{"pull_request.*", "release.*"}, "pull_request_review.submitted", false},
		{[]string{"pull_request.*", "release.*"}, "release.published", true},
		{nil, "push", false},
	}
	for _, tt := range tests {
		if got := matches(tt.filter, tt.typ); got != tt.want {
			t.Errorf("matches(%q, %q) = %v, want %v", tt.filter, tt.typ, got, tt.want)
		}
	}
}

// writeIndex writes a package layout with one index file at dir.
func writeIndex(t *testing.T, dir, index, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, index), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, index, "index.json"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadExamples(t *testing.T) {
	dir := t.TempDir()
	writeIndex(t, dir, "api.github.com", `[
  {"name": "issues", "actions": ["opened"], "examples": [
    {"action": "opened", "repository": {"full_name": "octo/cat"}, "issue": {"number": 1}},
    {"action": "closed", "issue": {"number": 2}}
  ]},
  {"name": "push", "actions": [], "examples": [
    {"ref": "refs/heads/main",  "repository": {"full_name": "octo/dog"}}
  ]}
]`)
	// A GHES index repeating one payload (formatted differently) and adding one.
	writeIndex(t, dir, "ghes-35", `[
  {"name": "push", "examples": [{"ref":"refs/heads/main","repository":{"full_name":"octo/dog"}}, {"ref": "refs/tags/v1"}]}
]`)
	evs, dups, err := loadExamples(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []demoEvent{
		{ID: "api.github.com/issues/0", Source: "https://github.com/octo/cat", Type: "issues.opened",
			Data: json.RawMessage(`{"action":"opened","repository":{"full_name":"octo/cat"},"issue":{"number":1}}`)},
		{ID: "api.github.com/issues/1", Source: fallbackSource, Type: "issues.closed", Binary: true,
			Data: json.RawMessage(`{"action":"closed","issue":{"number":2}}`)},
		{ID: "api.github.com/push/0", Source: "https://github.com/octo/dog", Type: "push",
			Data: json.RawMessage(`{"ref":"refs/heads/main","repository":{"full_name":"octo/dog"}}`)},
		{ID: "ghes-35/push/1", Source: fallbackSource, Type: "push", Binary: true,
			Data: json.RawMessage(`{"ref":"refs/tags/v1"}`)},
	}
	if dups != 1 {
		t.Errorf("dups = %d, want 1", dups)
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events, want %d: %+v", len(evs), len(want), evs)
	}
	for i := range want {
		g, w := evs[i], want[i]
		if g.ID != w.ID || g.Source != w.Source || g.Type != w.Type || g.Binary != w.Binary || string(g.Data) != string(w.Data) {
			t.Errorf("event %d:\n got %+v (data %s)\nwant %+v (data %s)", i, g, g.Data, w, w.Data)
		}
	}
}

func TestLoadExamplesErrors(t *testing.T) {
	if _, _, err := loadExamples(t.TempDir(), 0); err == nil {
		t.Error("no api.github.com index: want an error")
	}
	dir := t.TempDir()
	writeIndex(t, dir, "api.github.com", `[{"name": "push", "examples": ["not an object"]}]`)
	if _, _, err := loadExamples(dir, 0); err == nil {
		t.Error("a payload that is not an object: want an error")
	}
}

// TestRecordDecodes checks both content modes against hookrelay's own
// decoder: same attributes, data delivered as the payload.
func TestRecordDecodes(t *testing.T) {
	now := time.Date(2024, 5, 6, 7, 8, 9, 123_000_000, time.UTC)
	data := json.RawMessage(`{"action":"opened","n":[1,2,3]}`)
	for _, binary := range []bool{false, true} {
		ev := demoEvent{ID: "api.github.com/issues/3", Source: "https://github.com/octo/cat", Type: "issues.opened", Data: data, Binary: binary}
		r, err := record("demo.events", ev, now)
		if err != nil {
			t.Fatal(err)
		}
		got, err := events.Decode(r, events.DefaultMaxBytes)
		if err != nil {
			t.Fatalf("binary=%v: Decode: %v", binary, err)
		}
		if got.ID() != ev.ID || got.Source() != ev.Source || got.Type() != ev.Type || !got.Time().Equal(now) || got.DataContentType() != "application/json" {
			t.Errorf("binary=%v: decoded %s", binary, got)
		}
		body, err := events.DataJSON(got)
		if err != nil {
			t.Fatal(err)
		}
		if string(body) != string(data) {
			t.Errorf("binary=%v: data %s, want %s", binary, body, data)
		}
	}
}

func TestExpectedPairs(t *testing.T) {
	evs := []demoEvent{{ID: "a", Type: "push"}, {ID: "b", Type: "issues.opened"}, {ID: "c", Type: "release.published"}, {ID: "d", Type: "star.created"}}
	got := expectedPairs(evs, demoEndpoints)
	want := map[pair]bool{
		{"a", "fast"}: true, {"b", "fast"}: true, {"c", "fast"}: true, {"d", "fast"}: true,
		{"a", "slow"}: true, {"b", "slow"}: true,
		{"c", "fail-first"}: true,
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for p := range want {
		if !got[p] {
			t.Errorf("missing %v", p)
		}
	}
}

func TestDatabaseDSN(t *testing.T) {
	got, err := databaseDSN("clickhouse://u:p@127.0.0.1:9000/hookrelay?dial_timeout=5s", "demo_1")
	if err != nil {
		t.Fatal(err)
	}
	if want := "clickhouse://u:p@127.0.0.1:9000/demo_1?dial_timeout=5s"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if _, err := databaseDSN("http://127.0.0.1:8123/x", "d"); err == nil {
		t.Error("http DSN: want an error")
	}
}

// TestLoadRealExamples reads the installed npm package (skipped before
// `make deps`): hundreds of payloads, unique IDs, every type with a name.
func TestLoadRealExamples(t *testing.T) {
	dir := filepath.Join("..", "..", "e2e", "receiver", examplesPackage)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s not installed (make deps): %v", dir, err)
	}
	evs, _, err := loadExamples(dir, 25)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < 300 {
		t.Errorf("only %d payloads", len(evs))
	}
	ids := map[string]bool{}
	for _, ev := range evs {
		if ids[ev.ID] {
			t.Errorf("duplicate id %s", ev.ID)
		}
		ids[ev.ID] = true
		if _, err := record("x.events", ev, time.Now()); err != nil {
			t.Error(err)
		}
	}
}
