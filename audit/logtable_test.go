package audit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

func TestWriteLogCells(t *testing.T) {
	long := strings.Repeat("é", 150)
	var b strings.Builder
	err := audit.WriteLog(&b, []audit.Attempt{{
		EventID: "evt\n1", EventType: "a\tb", AttemptedAt: time.Unix(0, 0), Outcome: audit.Failed,
		ErrorMessage: long,
	}})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("WriteLog wrote %d lines, want header + 1:\n%s", len(lines), b.String())
	}
	if !strings.Contains(lines[1], "evt 1") || !strings.Contains(lines[1], "a b") {
		t.Errorf("control characters not replaced: %q", lines[1])
	}
	if want := strings.Repeat("é", audit.MaxErrorWidth-1) + "…"; !strings.HasSuffix(lines[1], want) {
		t.Errorf("error cell not cut to %d characters: %q", audit.MaxErrorWidth, lines[1])
	}
	if err := audit.WriteLog(failingWriter{}, nil); err == nil {
		t.Error("WriteLog to a failing writer = nil, want its error")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
