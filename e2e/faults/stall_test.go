package faults

// What the suite saves when deliveries stall (waitFlow timed out), so that
// a stall seen once on a busy machine can be read afterwards: every
// instance's goroutines (dumpGoroutines) and the brokers' view of the
// scenario's topics, groups and transactions (dumpBrokerState).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// dumpStall saves what dumpGoroutines and dumpBrokerState see.
func (r *rig) dumpStall() {
	r.stalls++
	r.dumpGoroutines()
	path := filepath.Join(r.logDir, fmt.Sprintf("stall-%d-brokers.txt", r.stalls))
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dumpBrokerState(ctx, kadm.NewClient(r.cl), r.prefix, &b)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		r.t.Logf("faults: broker state: %v", err)
		return
	}
	r.t.Logf("faults: the brokers' view of the stall saved in %s", path)
}

// dumpBrokerState writes, for the topics and groups named with prefix:
// each partition's leader, ISR, high watermark and last stable offset
// (an LSO behind the high watermark is a transaction left open, which
// read_committed consumers wait on), each group's state, members and
// committed offsets, and every transaction whose ID has the prefix, with
// its state, age and partitions. Errors are written in place; it never
// fails.
func dumpBrokerState(ctx context.Context, adm *kadm.Client, prefix string, b *strings.Builder) {
	fmt.Fprintf(b, "at %s\n\n", time.Now().Format(time.RFC3339Nano))
	md, err := adm.Metadata(ctx)
	if err != nil {
		fmt.Fprintf(b, "metadata: %v\n", err)
	}
	fmt.Fprintf(b, "brokers: %v, controller %d\n", md.Brokers.NodeIDs(), md.Controller)
	var topics []string
	for t := range md.Topics {
		if strings.HasPrefix(t, prefix) {
			topics = append(topics, t)
		}
	}
	sort.Strings(topics)
	hwm, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		fmt.Fprintf(b, "end offsets: %v\n", err)
	}
	lso, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		fmt.Fprintf(b, "stable offsets: %v\n", err)
	}
	fmt.Fprintf(b, "\npartitions (leader isr hwm lso; * = lso behind hwm):\n")
	for _, t := range topics {
		td := md.Topics[t]
		for _, p := range td.Partitions.Sorted() {
			h, _ := hwm.Lookup(t, p.Partition)
			l, _ := lso.Lookup(t, p.Partition)
			mark := ""
			if l.Offset < h.Offset {
				mark = " *"
			}
			errs := ""
			if p.Err != nil || h.Err != nil || l.Err != nil {
				errs = fmt.Sprintf(" errs: %v %v %v", p.Err, h.Err, l.Err)
			}
			fmt.Fprintf(b, "  %s[%d] leader %d isr %v hwm %d lso %d%s%s\n", t, p.Partition, p.Leader, p.ISR, h.Offset, l.Offset, mark, errs)
		}
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		fmt.Fprintf(b, "groups: %v\n", err)
	}
	var names []string
	for _, g := range groups.Groups() {
		if strings.HasPrefix(g, prefix) {
			names = append(names, g)
		}
	}
	sort.Strings(names)
	described, err := adm.DescribeGroups(ctx, names...)
	if err != nil {
		fmt.Fprintf(b, "describe groups: %v\n", err)
	}
	fmt.Fprintf(b, "\ngroups:\n")
	for _, g := range names {
		d := described[g]
		fmt.Fprintf(b, "  %s: state %s, coordinator %d, %d members, err %v\n", g, d.State, d.Coordinator.NodeID, len(d.Members), d.Err)
		for _, m := range d.Members {
			inst := ""
			if m.InstanceID != nil {
				inst = *m.InstanceID
			}
			fmt.Fprintf(b, "    member %s instance %q client %s\n", m.MemberID, inst, m.ClientID)
		}
		offs, err := adm.FetchOffsets(ctx, g)
		if err != nil {
			fmt.Fprintf(b, "    offsets: %v\n", err)
			continue
		}
		for _, o := range offs.Sorted() {
			h, _ := hwm.Lookup(o.Topic, o.Partition)
			fmt.Fprintf(b, "    %s[%d] committed %d (hwm %d) err %v\n", o.Topic, o.Partition, o.At, h.Offset, o.Err)
		}
	}
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		fmt.Fprintf(b, "list transactions: %v\n", err)
	}
	var ids []string
	for id := range listed {
		if strings.HasPrefix(id, prefix) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	txns, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		fmt.Fprintf(b, "describe transactions: %v\n", err)
	}
	fmt.Fprintf(b, "\ntransactions:\n")
	for _, t := range txns.Sorted() {
		age := "-"
		if t.StartTimestamp > 0 {
			age = time.Since(time.UnixMilli(t.StartTimestamp)).Round(time.Millisecond).String()
		}
		fmt.Fprintf(b, "  %s: state %s, coordinator %d, producer %d epoch %d, timeout %d ms, open for %s, partitions %v, err %v\n",
			t.TxnID, t.State, t.Coordinator, t.ProducerID, t.ProducerEpoch, t.TimeoutMillis, age, t.Topics.Sorted(), t.Err)
	}
}
