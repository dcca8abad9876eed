package pipeline

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"sort"
	"strings"
)

// offsetTracker follows one partition's records from fetch to commit when
// they finish out of order (deliveries to many endpoints of one partition run
// concurrently).
//
// The committable offset is the lowest unfinished offset: nothing at or above
// an unfinished delivery is ever committed, so a crash re-reads it. Finished
// offsets above it travel in the commit's metadata (the technique of
// confluentinc/parallel-consumer), so after a crash or rebalance the next
// owner skips them instead of sending them again.
//
// Offsets must be added in ascending order (the order a partition is
// fetched). Not safe for concurrent use: the dispatcher's poll loop owns it.
type offsetTracker struct {
	entries []trackedOffset // ascending; entries[head:] are live
	head    int
	next    int64 // one past the highest offset added; the commit when nothing is pending

	// The last commitInfo result while entries[head] is pending; valid
	// until the next done (adding offsets above a pending one changes
	// nothing). Saves rescanning a large backlog every flush.
	fresh       bool
	lastCommit  int64
	lastMeta    string
	lastCovered int64
	buf         []byte
}

type trackedOffset struct {
	off  int64
	done bool
}

func newOffsetTracker(committed int64) *offsetTracker {
	return &offsetTracker{next: committed}
}

// add records that off was fetched and is being worked on. It reports false,
// recording nothing, when off is below the highest offset seen (a re-fetch
// after an aborted transaction rewound the client).
func (t *offsetTracker) add(off int64) bool {
	if off < t.next {
		return false
	}
	t.entries = append(t.entries, trackedOffset{off: off})
	t.next = off + 1
	return true
}

// done marks off finished. It reports whether off was pending.
func (t *offsetTracker) done(off int64) bool {
	live := t.entries[t.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].off >= off })
	if i == len(live) || live[i].off != off || live[i].done {
		return false
	}
	live[i].done = true
	t.fresh = false
	return true
}

// pending returns how many added offsets are not done.
func (t *offsetTracker) pending() int {
	n := 0
	for _, e := range t.entries[t.head:] {
		if !e.done {
			n++
		}
	}
	return n
}

// commitInfo advances past finished offsets and returns the offset to
// commit (the lowest unfinished one, else one past the highest added), the
// commit metadata listing the finished offsets above it, and covered: every
// finished offset at or below covered is retired by this commit (below the
// commit, or listed in the metadata). When the metadata is full, finished
// offsets above covered are not retired yet, and their follow-up records
// must wait (producing them would fork the delivery after a crash). It is
// computed in one scan that stops when the metadata is full, and remembered
// until the next done.
func (t *offsetTracker) commitInfo() (commit int64, meta string, covered int64) {
	for t.head < len(t.entries) && t.entries[t.head].done {
		t.head++
	}
	if t.head > 1024 && t.head > len(t.entries)/2 {
		t.entries = append(t.entries[:0], t.entries[t.head:]...)
		t.head = 0
	}
	if t.head == len(t.entries) {
		return t.next, "", math.MaxInt64
	}
	if t.fresh {
		return t.lastCommit, t.lastMeta, t.lastCovered
	}
	commit = t.entries[t.head].off
	covered = math.MaxInt64
	maxRaw := base64.RawURLEncoding.DecodedLen(maxCommitMetadata - len(commitMetadataPrefix))
	buf := t.buf[:0]
	prevEnd := commit
	live := t.entries[t.head+1:]
	for i := 0; i < len(live); {
		if !live[i].done {
			i++
			continue
		}
		j := i + 1
		for j < len(live) && live[j].done && live[j].off == live[j-1].off+1 {
			j++
		}
		var tmp [2 * binary.MaxVarintLen64]byte
		n := binary.PutUvarint(tmp[:], uint64(live[i].off-prevEnd))
		n += binary.PutUvarint(tmp[n:], uint64(j-i))
		if len(buf)+n > maxRaw {
			covered = live[i].off - 1
			break
		}
		buf = append(buf, tmp[:n]...)
		prevEnd = live[j-1].off + 1
		i = j
	}
	t.buf = buf
	if len(buf) > 0 {
		meta = commitMetadataPrefix + base64.RawURLEncoding.EncodeToString(buf)
	}
	t.fresh, t.lastCommit, t.lastMeta, t.lastCovered = true, commit, meta, covered
	return commit, meta, covered
}

// Commit metadata: "hr1:" then base64url (no padding) of uvarint pairs
// (gap, run): the first run of consecutive finished offsets starts gap
// offsets after the commit offset, each next one gap offsets after the
// previous run's end. Finished offsets that would take the text past
// maxCommitMetadata are left out, highest first; their follow-up records
// are held back until a later commit retires them (see commitInfo), so a
// crash can only make them be sent again (duplicates, never loss or forks).
// Kafka's default offset.metadata.max.bytes is 4096.
const (
	commitMetadataPrefix = "hr1:"
	maxCommitMetadata    = 3072
)

// offsetRange is [from, to).
type offsetRange struct{ from, to int64 }

var errBadCommitMetadata = errors.New("pipeline: malformed commit metadata")

// decodeDoneAbove parses metadata written by commitInfo for a commit at
// commit. Metadata hookrelay did not write (e.g. a member ID) yields no
// ranges and no error.
func decodeDoneAbove(commit int64, meta string) ([]offsetRange, error) {
	rest, ok := strings.CutPrefix(meta, commitMetadataPrefix)
	if !ok {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return nil, errBadCommitMetadata
	}
	var out []offsetRange
	prevEnd := commit
	for len(raw) > 0 {
		gap, n := binary.Uvarint(raw)
		if n <= 0 {
			return nil, errBadCommitMetadata
		}
		raw = raw[n:]
		run, m := binary.Uvarint(raw)
		if m <= 0 || run == 0 {
			return nil, errBadCommitMetadata
		}
		raw = raw[m:]
		from := prevEnd + int64(gap)
		out = append(out, offsetRange{from, from + int64(run)})
		prevEnd = from + int64(run)
	}
	return out, nil
}

// skipSet answers "was this offset already finished by a previous owner?"
// for offsets asked in ascending order.
type skipSet struct{ ranges []offsetRange }

func (s *skipSet) has(off int64) bool {
	for len(s.ranges) > 0 && s.ranges[0].to <= off {
		s.ranges = s.ranges[1:]
	}
	return len(s.ranges) > 0 && s.ranges[0].from <= off
}
