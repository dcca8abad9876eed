package pipeline

// resumeDrained resumes fetching of each partition paused for its backlog
// (past 1.5× PartitionBacklog, see accept) once the backlog has halved.
// Poll loop only.
func (d *Dispatcher) resumeDrained(parts map[int32]*partState) {
	for id, p := range parts {
		if !p.paused {
			continue
		}
		p.mu.Lock()
		low := p.backlog <= d.o.PartitionBacklog/2
		p.mu.Unlock()
		if low {
			p.paused = false
			d.sess.Client().ResumeFetchPartitions(map[string][]int32{d.o.Topics.Deliveries: {id}})
		}
	}
}

// afterAbort is the bookkeeping after an aborted transaction. Everything
// produced was aborted and the client rewound every partition to its last
// commit. Owned partitions keep their state (re-fetched records are dropped
// by the tracker) and their follow-up records (p.out, d.orphans: untouched
// here) go out again, as fresh records, in the next transaction, after the
// transactor's back-off (nextFlushAt). Paused partitions are resumed, or
// they would never be re-fetched and so never proposed for commit again.
// Poll loop only.
func (d *Dispatcher) afterAbort(parts map[int32]*partState) {
	d.nextFlushAt = d.now().Add(d.txn.backoff())
	for id, p := range parts {
		if p.paused {
			p.paused = false
			d.sess.Client().ResumeFetchPartitions(map[string][]int32{d.o.Topics.Deliveries: {id}})
		}
	}
}

// afterCommit is the bookkeeping after a committed transaction: the orphaned
// attempt rows are written; each included partition keeps only the
// follow-ups the commit did not retire (held); and what the commit stored
// is remembered per partition still owned, so an unchanged partition is not
// committed again. Poll loop only.
func (d *Dispatcher) afterCommit(parts map[int32]*partState, plan *commitPlan) {
	d.orphans = nil
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lastCommit == nil {
		d.lastCommit = make(map[int32]commitInfo)
	}
	for _, id := range plan.included {
		parts[id].out = plan.held[id]
		if d.parts[id] == parts[id] {
			d.lastCommit[id] = plan.commits[id]
		}
	}
}
