//go:build faultinject

package pipeline

// Fault injection for the e2e tests of the attempt log (e2e/attemptlog_test.go),
// compiled only with -tags faultinject: a normal build has faultinject_off.go.
//
// HOOKRELAY_FAULT=point[:N][,point[:N]…] makes the process kill itself with
// SIGKILL the Nth time (default 1st) it reaches point, one of:
//
//	crash-before-started  an attempt is about to write its "sending" row
//	crash-after-started   the "sending" row is written; the request is not made yet
//	crash-after-response  the request has its response; nothing else is done
//	crash-before-commit   the transaction holding an attempt's outcome row is
//	                      produced and flushed; End (the commit) is not called
//
// This file reads the environment itself (an exception to "only cmd/ reads
// the environment") because it exists only in test builds.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var faults = func() map[string]*faultCounter {
	m := map[string]*faultCounter{}
	spec := os.Getenv("HOOKRELAY_FAULT")
	if spec == "" {
		return m
	}
	for _, f := range strings.Split(spec, ",") {
		point, nth, ok := strings.Cut(strings.TrimSpace(f), ":")
		n := 1
		if ok {
			v, err := strconv.Atoi(nth)
			if err != nil || v < 1 {
				panic(fmt.Sprintf("HOOKRELAY_FAULT: bad count in %q", f))
			}
			n = v
		}
		switch point {
		case "crash-before-started", "crash-after-started", "crash-after-response", "crash-before-commit":
		default:
			panic(fmt.Sprintf("HOOKRELAY_FAULT: unknown point %q", point))
		}
		m[point] = &faultCounter{at: n}
	}
	return m
}()

type faultCounter struct {
	mu   sync.Mutex
	hits int
	at   int
}

func faultPoint(point string) {
	c := faults[point]
	if c == nil {
		return
	}
	c.mu.Lock()
	c.hits++
	hit := c.hits == c.at
	c.mu.Unlock()
	if hit {
		fmt.Fprintf(os.Stderr, "faultinject: %s (hit %d): SIGKILL\n", point, c.at)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never returns: the signal is on its way
	}
}
