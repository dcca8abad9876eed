package pipeline

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
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
// It keeps one bit per offset from the lowest unfinished one to the highest
// added (set: pending), so the window a slow delivery holds open costs an
// eighth of a byte per record. Offsets never added below the highest one
// (transaction markers, aborted records a read_committed fetch skips) count
// as finished: no delivery has them.
//
// Offsets must be added in ascending order (the order a partition is
// fetched). Not safe for concurrent use: the dispatcher's poll loop owns it.
type offsetTracker struct {
	base     int64    // offset of bit 0 of words[0]
	words    []uint64 // bit i of words[w]: offset base+64w+i is pending
	next     int64    // one past the highest offset added; the commit when nothing is pending
	npending int

	// The last commitInfo result while some offset is pending; valid until
	// the next done (adding offsets above a pending one changes nothing the
	// metadata must say). Saves rescanning a large window every flush.
	fresh       bool
	lastCommit  int64
	lastMeta    string
	lastCovered int64
	buf         []byte
}

func newOffsetTracker(committed int64) *offsetTracker {
	return &offsetTracker{next: committed, base: committed}
}

// add records that off was fetched and is being worked on. It reports false,
// recording nothing, when off is below the highest offset seen (a re-fetch
// after an aborted transaction rewound the client).
func (t *offsetTracker) add(off int64) bool {
	if off < t.next {
		return false
	}
	if t.npending == 0 {
		t.base, t.words = off, t.words[:0] // nothing pending: start the window here
	}
	i := off - t.base
	for int64(len(t.words))*64 <= i {
		t.words = append(t.words, 0)
	}
	t.words[i/64] |= 1 << (i % 64)
	t.npending++
	t.next = off + 1
	return true
}

// done marks off finished. It reports whether off was pending.
func (t *offsetTracker) done(off int64) bool {
	i := off - t.base
	if i < 0 || off >= t.next || t.words[i/64]&(1<<(i%64)) == 0 {
		return false
	}
	t.words[i/64] &^= 1 << (i % 64)
	t.npending--
	t.fresh = false
	return true
}

// pending returns how many added offsets are not done.
func (t *offsetTracker) pending() int { return t.npending }

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
	if t.npending == 0 {
		t.base, t.words = t.next, t.words[:0]
		return t.next, "", math.MaxInt64
	}
	// Drop whole words of finished offsets below the lowest pending one.
	w := 0
	for t.words[w] == 0 {
		w++
	}
	if w > 0 {
		t.words = append(t.words[:0], t.words[w:]...)
		t.base += int64(w) * 64
	}
	if t.fresh {
		return t.lastCommit, t.lastMeta, t.lastCovered
	}
	commit = t.base + int64(bits.TrailingZeros64(t.words[0]))
	covered = math.MaxInt64
	maxRaw := base64.RawURLEncoding.DecodedLen(maxCommitMetadata - len(commitMetadataPrefix))
	buf := t.buf[:0]
	prevEnd := commit // the decoder counts the first gap from the commit
	for o := commit + 1; o < t.next; {
		// Skip pending offsets, then take the run of finished ones.
		if o = t.nextFinished(o); o >= t.next {
			break
		}
		end := min(t.nextPending(o), t.next)
		var tmp [2 * binary.MaxVarintLen64]byte
		n := binary.PutUvarint(tmp[:], uint64(o-prevEnd))
		n += binary.PutUvarint(tmp[n:], uint64(end-o))
		if len(buf)+n > maxRaw {
			covered = o - 1
			break
		}
		buf = append(buf, tmp[:n]...)
		prevEnd, o = end, end
	}
	t.buf = buf
	if len(buf) > 0 {
		meta = commitMetadataPrefix + base64.RawURLEncoding.EncodeToString(buf)
	}
	t.fresh, t.lastCommit, t.lastMeta, t.lastCovered = true, commit, meta, covered
	return commit, meta, covered
}

// nextPending returns the lowest pending offset at or above o, or the end of
// the window.
func (t *offsetTracker) nextPending(o int64) int64 {
	i := o - t.base
	for w := i / 64; w < int64(len(t.words)); w++ {
		word := t.words[w]
		if w == i/64 {
			word &^= (1 << (i % 64)) - 1
		}
		if word != 0 {
			return t.base + w*64 + int64(bits.TrailingZeros64(word))
		}
	}
	return t.base + int64(len(t.words))*64
}

// nextFinished returns the lowest finished (or never added) offset at or
// above o, or the end of the window.
func (t *offsetTracker) nextFinished(o int64) int64 {
	i := o - t.base
	for w := i / 64; w < int64(len(t.words)); w++ {
		word := ^t.words[w]
		if w == i/64 {
			word &^= (1 << (i % 64)) - 1
		}
		if word != 0 {
			return t.base + w*64 + int64(bits.TrailingZeros64(word))
		}
	}
	return t.base + int64(len(t.words))*64
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
