package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline"
)

// followLog is `hookrelay log --follow`: it streams the attempts of one
// endpoint (and, when event is set, one event) as hookrelay writes them to
// the attempts topic, until ctx ends (Ctrl-C), like `stripe listen` or
// `svix listen`. It reads from the end of every partition as of its start
// (the current end offsets, listed first), read_committed, without a
// consumer group, and prints one line per attempt in the columns of
// `hookrelay log` (audit.WriteLog), with fixed widths so lines align as
// they arrive. ClickHouse is not needed. Once it is reading, it writes
// "following …" to status; a record that is not an attempt is reported
// there and skipped.
func followLog(ctx context.Context, cfg *config, endpoint, event string, out, status io.Writer) error {
	kopts, err := cfg.clientOpts() // with the seed brokers
	if err != nil {
		return err
	}
	topic := pipeline.NewTopics(cfg.TopicPrefix).Attempts
	admin, err := kgo.NewClient(kopts...)
	if err != nil {
		return err
	}
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
	admin.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("list end offsets of %s (--brokers, HOOKRELAY_BROKERS; --topic-prefix): %w", topic, err)
	}
	if len(ends[topic]) == 0 {
		return fmt.Errorf("topic %s does not exist: check --topic-prefix (HOOKRELAY_TOPIC_PREFIX), or start hookrelay once", topic)
	}
	start := map[int32]kgo.Offset{}
	for p, o := range ends[topic] {
		start[p] = kgo.NewOffset().At(o.Offset)
	}
	cl, err := kgo.NewClient(append(kopts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return err
	}
	defer cl.Close()

	fmt.Fprintln(out, followRow("TIME", "EVENT ID", "TYPE", "ATTEMPT", "STATUS", "OUTCOME", "LATENCY MS", "ERROR"))
	fmt.Fprintf(status, "following %s for endpoint %s from now (%d partitions); Ctrl-C to stop\n", topic, endpoint, len(start))
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if fs.IsClientClosed() {
			return errors.New("kafka client closed")
		}
		fs.EachError(func(t string, p int32, err error) {
			fmt.Fprintf(status, "fetch %s[%d]: %v\n", t, p, err)
		})
		var werr error
		fs.EachRecord(func(r *kgo.Record) {
			if werr != nil || string(r.Key) != endpoint {
				return // attempts are keyed by endpoint ID
			}
			var a audit.Attempt
			if err := a.Unmarshal(r.Value); err != nil {
				fmt.Fprintf(status, "skipping %s[%d]@%d: not an attempt: %v\n", r.Topic, r.Partition, r.Offset, err)
				return
			}
			if a.EndpointID != endpoint || (event != "" && a.EventID != event) {
				return
			}
			if a.Outcome == audit.Sending {
				// The durable note written before a request; its outcome
				// follows on the same partition. An attempt is shown once,
				// when its outcome commits (an interrupted one, resolved
				// by the audit sink, shows in `hookrelay log`).
				return
			}
			_, werr = fmt.Fprintln(out, followLine(a))
		})
		if werr != nil {
			return werr // stdout closed (a pipe into head): stop
		}
	}
}

// followWidths are the widths of the columns but the last: a timestamp, an
// event ID of the usual evt_ length, a dotted type, then short numbers.
var followWidths = []int{24, 28, 24, 7, 6, 15, 10}

func followRow(cells ...string) string {
	var b strings.Builder
	for i, c := range cells {
		if i < len(followWidths) {
			c = fit(c, followWidths[i])
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", followWidths[i]-utf8.RuneCountInString(c)+2))
		} else {
			b.WriteString(c)
		}
	}
	return strings.TrimRight(b.String(), " ")
}

// followLine is one attempt in the columns of audit.WriteLog.
func followLine(a audit.Attempt) string { return followRow(audit.LogCells(a)...) }

// fit cuts s to n characters, marking a cut with "…".
func fit(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
