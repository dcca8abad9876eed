package pipeline

import (
	"encoding/json"
	"fmt"

	"github.com/hookrelay/hookrelay/audit"
)

// AttemptFormat is the encoding of the attempts-topic records this process
// writes (the dispatcher's sending and outcome rows, fan-out's not-sent
// rows). Readers ([audit.Attempt.Unmarshal]) read both forms whatever the
// setting; only writers choose.
//
// The rollout is two-phase (an audit sink of the release before the binary
// form skips binary records as undecodable and commits past them, so
// writing binary while any such sink runs loses attempts for good): this
// release writes [AttemptJSON] by default and reads both; the next release
// flips the default to [AttemptBinary] once every audit sink reads both.
type AttemptFormat string

const (
	// AttemptJSON is the JSON form of [audit.Attempt] (encoding/json), the
	// form every earlier release reads. The default, and the zero value.
	AttemptJSON AttemptFormat = "json"
	// AttemptBinary is the binary form ([audit.Attempt.Marshal], version
	// byte 0x01): cheaper to write and to read (issue 14), read only by this
	// release and later.
	AttemptBinary AttemptFormat = "binary"
)

// ParseAttemptFormat parses "json" or "binary" ("" is json).
func ParseAttemptFormat(s string) (AttemptFormat, error) {
	switch f := AttemptFormat(s); f {
	case "", AttemptJSON:
		return AttemptJSON, nil
	case AttemptBinary:
		return f, nil
	}
	return "", fmt.Errorf("unknown attempt format %q: want json or binary", s)
}

// Encode returns a as an attempts-topic record value in format f (the zero
// value is [AttemptJSON]). It fails only on an unknown format.
func (f AttemptFormat) Encode(a *audit.Attempt) ([]byte, error) {
	switch f {
	case "", AttemptJSON:
		return json.Marshal(a)
	case AttemptBinary:
		return a.Marshal()
	}
	return nil, fmt.Errorf("pipeline: unknown attempt format %q", string(f))
}
