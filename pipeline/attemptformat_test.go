package pipeline

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

// TestAttemptFormatEncode: the default (zero) format writes JSON that a
// plain encoding/json reader (the audit sink of the release before the
// binary form) decodes; binary starts with the version byte; both read back
// through audit.Attempt.Unmarshal; an unknown format is an error.
func TestAttemptFormatEncode(t *testing.T) {
	a := audit.Attempt{AttemptID: "a1", DeliveryID: "d1", EventID: "e1", EndpointID: "ep1", Tenant: "t1",
		AttemptNumber: 2, AttemptedAt: time.UnixMilli(1_700_000_000_123).UTC(), Outcome: audit.Sending}
	for _, f := range []AttemptFormat{"", AttemptJSON, AttemptBinary} {
		b, err := f.Encode(&a)
		if err != nil {
			t.Fatalf("%q: %v", f, err)
		}
		if f == AttemptBinary {
			if b[0] != 0x01 {
				t.Errorf("binary: first byte %#x, want 0x01", b[0])
			}
		} else {
			var old audit.Attempt
			if err := json.Unmarshal(b, &old); err != nil || old.AttemptID != a.AttemptID || !old.AttemptedAt.Equal(a.AttemptedAt) {
				t.Errorf("%q: a JSON reader got %+v, %v", f, old, err)
			}
		}
		var got audit.Attempt
		if err := got.Unmarshal(b); err != nil || got.AttemptID != a.AttemptID || got.AttemptNumber != 2 || got.Outcome != audit.Sending {
			t.Errorf("%q: Unmarshal got %+v, %v", f, got, err)
		}
	}
	if _, err := AttemptFormat("xml").Encode(&a); err == nil {
		t.Error("unknown format encoded")
	}
	for in, want := range map[string]AttemptFormat{"": AttemptJSON, "json": AttemptJSON, "binary": AttemptBinary} {
		if got, err := ParseAttemptFormat(in); err != nil || got != want {
			t.Errorf("ParseAttemptFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseAttemptFormat("Binary"); err == nil {
		t.Error(`ParseAttemptFormat("Binary") accepted`)
	}
}
