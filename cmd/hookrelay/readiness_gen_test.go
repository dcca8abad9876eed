package main

import (
	"strings"
	"testing"
)

// TestReadinessGenerations: the pipeline is ready while every live
// generation's dispatcher is in its group, whichever started first; a
// retired generation leaves the report, a failed one does not make it
// ready; each generation is its own stage.
func TestReadinessGenerations(t *testing.T) {
	r := newReadiness()
	r.setKafka(nil)
	r.stage("dispatch")
	r.stage("dispatch.g2")
	steps := []struct {
		do   func() bool
		want bool
	}{
		{func() bool { return r.setJoined(2, false) }, false},
		{func() bool { return r.setJoined(1, true) }, false}, // generation 2 not joined yet
		{func() bool { return r.setJoined(2, true) }, true},
		{func() bool { return r.setJoined(1, false) }, false}, // generation 1's dispatcher left (a fault)
		{func() bool { return r.retired(1) }, true},           // retired: generation 2 alone
		{func() bool { return r.setJoined(2, false) }, false},
	}
	for i, s := range steps {
		s.do()
		if got := r.pipeline.Load(); got != s.want {
			t.Fatalf("step %d: pipeline ready %v, want %v", i, got, s.want)
		}
	}
	r.dropStage("dispatch")
	if _, body := r.check(); strings.Contains(body, "dispatch stage") || !strings.Contains(body, "dispatch.g2 stage") {
		t.Fatalf("report after retiring generation 1:\n%s", body)
	}
}
