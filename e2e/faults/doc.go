// Package faults is hookrelay's fault suite (issue 10): the real hookrelay
// binary under a steady load, with receivers of its own that verify every
// signature, while the suite kills it, restarts its brokers, cuts its
// ClickHouse, degrades its network and feeds it malformed input.
//
// Every scenario asserts the same four things (see docs/RELIABILITY.md):
// no expected (event, endpoint) delivery is lost; a duplicate carries the
// same webhook-id and an identical body; every request a receiver saw has
// exactly one attempt row in ClickHouse (read with FINAL, polled until
// stable); and the longest time an endpoint went without a delivery while
// the load ran (the delivery gap) stays under a generous hang-guard bound.
//
// Sizes: HOOKRELAY_FAULTS=full (make faults) runs the full sizes; anything
// else runs the reduced sizes that `go test ./...` (make test) runs.
//
// Broker faults never touch the shared stack: the suite starts a private
// Kafka with deploy/local/up.sh on other ports and a temporary state folder
// (see kafka_test.go). Everything else runs against the stack of package
// e2e/stack, each test in its own topic prefix and ClickHouse database.
//
// When deliveries stall (a wait for them to resume times out) or the drain
// at the end misses some, the suite saves, next to the kept hookrelay logs
// in $TMPDIR/hookrelay-faults-logs/<test>-<time>/, every running
// instance's goroutines and metrics and the brokers' view of the
// scenario's topics (leader, ISR, high watermark, last stable offset),
// groups (members, committed offsets) and transactions (stall_test.go).
// HOOKRELAY_FAULTS_BROKER_SIGNALS=kill (or term) replays only those broker
// signals.
//
// The package has no non-test code.
package faults
