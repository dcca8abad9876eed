package pipeline

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
)

// commitPlan is what one transaction of the dispatcher commits: per
// included partition the offset and metadata, the follow-up records of
// exactly the deliveries those commits retire (and the orphaned attempt
// rows), and per partition the follow-ups that must wait for a later
// commit.
type commitPlan struct {
	commits  map[int32]commitInfo
	out      []*kgo.Record
	held     map[int32][]outRecord // follow-ups not retired by this commit, per included partition
	included []int32
	lost     []int32 // partitions franz-go no longer owns although no revoke reached us
	waiting  []int32 // partitions left out until franz-go proposes them again (rewound, not yet re-fetched)
}

// due reports whether the plan is worth a transaction: it has records, or
// some partition's commit differs from what its last commit stored.
func (c *commitPlan) due(last map[int32]commitInfo) bool {
	if len(c.out) > 0 {
		return true
	}
	for id, ci := range c.commits {
		if last[id] != ci {
			return true
		}
	}
	return false
}

// planCommit decides, per owned partition, what the next transaction
// commits: the lowest unfinished offset with the finished ones above it as
// metadata (offsetTracker.commitInfo), and which follow-ups go out with it.
// Only follow-ups of deliveries the commit retires go out (below the commit,
// or listed in the metadata); the rest wait for a commit that covers them
// (producing them now would fork the delivery after a crash).
//
// proposed is what franz-go will propose to commit for the deliveries topic
// (everything polled), owned the partitions it has commits for. A partition
// franz-go proposes nothing for, while ours differs from its last commit,
// is left out with all its follow-ups: either the client rewound after an
// abort and has not re-fetched yet (wait), or the partition was lost
// without a revoke reaching us (a committed partition it no longer lists:
// reported in lost). Either way its follow-ups must not commit without its
// offsets. orphans (attempt rows tied to no owned offset) always go out.
// Pure but for the trackers' caches; poll loop only.
func planCommit(parts map[int32]*partState, last map[int32]commitInfo, proposed, owned map[int32]kgo.EpochOffset, orphans []*kgo.Record) commitPlan {
	plan := commitPlan{
		commits: make(map[int32]commitInfo, len(parts)),
		out:     slices.Clip(orphans),
		held:    make(map[int32][]outRecord, len(parts)),
	}
	for id, p := range parts {
		if p.tracker.next < 0 {
			continue // nothing fetched yet
		}
		c, meta := p.tracker.commitInfo()
		ci := commitInfo{commit: c, meta: meta}
		if _, ok := proposed[id]; !ok && ci != last[id] {
			if _, ok := owned[id]; !ok {
				if _, had := last[id]; had {
					plan.lost = append(plan.lost, id)
					continue
				}
			}
			plan.waiting = append(plan.waiting, id)
			continue
		}
		plan.commits[id] = ci
		plan.included = append(plan.included, id)
		for _, o := range p.out {
			if p.tracker.retired(o.off) {
				plan.out = append(plan.out, o.rec)
			} else {
				plan.held[id] = append(plan.held[id], o)
			}
		}
	}
	return plan
}
