package pipeline

import "maps"

// gather is the first step of a flush: it takes the completions the attempt
// goroutines reported since the last flush (and the attempt rows of revoked
// partitions), marks their offsets finished in their partition's tracker
// and queues their follow-ups there, and returns a snapshot of the owned
// partitions and of what their last commit stored. A completion of a
// partition no longer owned (revoked since) only keeps its attempt rows:
// the next owner redoes the delivery. Poll loop only.
func (d *Dispatcher) gather() (parts map[int32]*partState, last map[int32]commitInfo) {
	d.doneMu.Lock()
	done := d.done
	d.done = nil
	d.orphans = append(d.orphans, d.loose...)
	d.loose = nil
	d.doneMu.Unlock()

	d.mu.Lock()
	parts = maps.Clone(d.parts)
	last = maps.Clone(d.lastCommit)
	d.mu.Unlock()

	for _, c := range done {
		if parts[c.p.id] != c.p {
			// Revoked: the next owner redoes the delivery, but the
			// attempt happened, so its row is still written.
			d.orphans = append(d.orphans, d.attemptRows(c.out)...)
			continue
		}
		c.p.tracker.done(c.off)
		for _, r := range c.out {
			c.p.out = append(c.p.out, outRecord{c.off, r})
		}
	}
	return parts, last
}
