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
	base     int64    // offset of bit 0 of words[0] and listed[0]
	words    []uint64 // bit i of words[w]: offset base+64w+i is pending
	listed   []uint64 // bit i of listed[w]: offset base+64w+i is finished and retired by the metadata
	next     int64    // one past the highest offset added; the commit when nothing is pending
	npending int
	// The previous owner's listed ranges at or above next (not fetched
	// yet): their follow-up records are live, so every metadata lists
	// them, and add lists them when they are fetched.
	inherited []offsetRange
	commit    int64 // the commit of the last commitInfo

	// The last commitInfo result while some offset is pending; valid until
	// the next done (adding offsets above a pending one changes nothing the
	// metadata must say). Saves rescanning a large window every flush.
	fresh      bool
	lastCommit int64
	lastMeta   string
	buf        []byte
}

func newOffsetTracker(committed int64) *offsetTracker {
	return &offsetTracker{next: committed, base: committed}
}

// inherit takes the finished offsets the previous owner listed above the
// committed offset (decodeDoneAbove), ascending. Call it before the first
// add.
func (t *offsetTracker) inherit(rs []offsetRange) {
	for _, r := range rs {
		if r.to > t.next {
			t.inherited = append(t.inherited, offsetRange{max(r.from, t.next), r.to})
		}
	}
	t.fresh = false
}

// add records that off was fetched and is being worked on. It reports false,
// recording nothing, when off is below the highest offset seen (a re-fetch
// after an aborted transaction rewound the client).
func (t *offsetTracker) add(off int64) bool {
	if off < t.next {
		return false
	}
	if t.npending == 0 {
		// Nothing pending: everything below off is retired by the commit;
		// start the window here.
		t.base, t.words, t.listed = off, t.words[:0], t.listed[:0]
	}
	i := off - t.base
	for int64(len(t.words))*64 <= i {
		t.words = append(t.words, 0)
		t.listed = append(t.listed, 0)
	}
	t.words[i/64] |= 1 << (i % 64)
	// Inherited offsets up to off are in the window now: listed (off
	// itself once done; offsets skipped over are never-added ones).
	for len(t.inherited) > 0 && t.inherited[0].from <= off {
		r := &t.inherited[0]
		for o := max(r.from, t.base); o < min(r.to, off+1); o++ {
			t.listed[(o-t.base)/64] |= 1 << ((o - t.base) % 64)
		}
		if r.to > off+1 {
			r.from = off + 1
			break
		}
		t.inherited = t.inherited[1:]
	}
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
// commit (the lowest unfinished one, else one past the highest added) and the
// commit metadata listing finished offsets above it. Afterwards retired
// tells which finished offsets this commit retires (below the commit, or
// listed): only their follow-up records may go out with it.
//
// A finished offset, once listed, stays listed until the commit passes it:
// its follow-up records may already be committed, and dropping it from a
// later metadata would make the next owner redo the delivery (a fork).
// Offsets finished since the last call are added lowest first while the
// metadata fits in maxCommitMetadata; the rest wait (their follow-ups are
// held back) for a commit with room. The listed offsets alone always fit:
// they fitted when listed, and a higher commit only shortens the encoding.
// The result is remembered until the next done.
func (t *offsetTracker) commitInfo() (commit int64, meta string) {
	if t.npending == 0 {
		t.base, t.words, t.listed = t.next, t.words[:0], t.listed[:0]
		t.commit = t.next
		if len(t.inherited) == 0 {
			return t.next, ""
		}
		buf, _, _ := t.encode(t.buf[:0], t.next, t.next) // inherited alone fit
		t.buf = buf
		return t.next, commitMetadataPrefix + base64.RawURLEncoding.EncodeToString(buf)
	}
	// Drop whole words of finished offsets below the lowest pending one.
	w := 0
	for t.words[w] == 0 {
		w++
	}
	if w > 0 {
		t.words = append(t.words[:0], t.words[w:]...)
		t.listed = append(t.listed[:0], t.listed[w:]...)
		t.base += int64(w) * 64
	}
	if t.fresh {
		return t.lastCommit, t.lastMeta
	}
	commit = t.base + int64(bits.TrailingZeros64(t.words[0]))
	// Newly finished offsets up to upTo join the listed ones; all of them
	// if they fit, else the most a binary search finds room for.
	upTo := t.next - 1
	buf, ok, _ := t.encode(t.buf[:0], commit, upTo)
	if !ok {
		lo, hi := commit, upTo // encode(commit): only the listed ones
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if buf, ok, _ = t.encode(buf[:0], commit, mid); ok {
				lo = mid
			} else {
				hi = mid
			}
		}
		upTo = lo
		var fit int64
		if buf, ok, fit = t.encode(buf[:0], commit, upTo); !ok {
			// Cannot happen (see above). Never claim more than the
			// metadata says: that would lose deliveries.
			upTo = commit
			for w := range t.listed {
				t.listed[w] &= t.below(w, fit)
			}
		}
	}
	for w := range t.listed {
		t.listed[w] = t.inc(w, upTo)
	}
	t.buf = buf
	if len(buf) > 0 {
		meta = commitMetadataPrefix + base64.RawURLEncoding.EncodeToString(buf)
	}
	t.commit = commit
	t.fresh, t.lastCommit, t.lastMeta = true, commit, meta
	return commit, meta
}

// retired reports whether the commit of the last commitInfo retires the
// delivery at off: off is below the commit or listed in its metadata.
func (t *offsetTracker) retired(off int64) bool {
	if off < t.commit || off < t.base {
		return true
	}
	i := off - t.base
	return off < t.next && i/64 < int64(len(t.listed)) && t.listed[i/64]&(1<<(i%64)) != 0
}

// inc returns word w of the offsets the metadata lists when the finished
// offsets up to upTo join the listed ones.
func (t *offsetTracker) inc(w int, upTo int64) uint64 {
	finished := ^t.words[w] & t.below(w, t.next)
	return finished & (t.listed[w] | t.below(w, upTo+1))
}

// below returns the bits of word w for offsets below limit.
func (t *offsetTracker) below(w int, limit int64) uint64 {
	k := limit - (t.base + int64(w)*64)
	switch {
	case k <= 0:
		return 0
	case k >= 64:
		return math.MaxUint64
	}
	return 1<<k - 1
}

// encode appends to buf the metadata runs of inc(·, upTo) above commit,
// then the inherited ranges. It reports false when they do not fit in
// maxCommitMetadata, with the runs that fit, all below fit.
func (t *offsetTracker) encode(buf []byte, commit, upTo int64) (_ []byte, ok bool, fit int64) {
	maxRaw := base64.RawURLEncoding.DecodedLen(maxCommitMetadata - len(commitMetadataPrefix))
	prevEnd := commit // the decoder counts the first gap from the commit
	curFrom, curTo := int64(-1), int64(-1)
	// emit adds run [from, to), merged with the previous one when they
	// touch (a listed run that continues past next into an inherited one).
	emit := func(from, to int64) bool {
		if from == curTo {
			curTo = to
			return true
		}
		if curFrom >= 0 {
			var tmp [2 * binary.MaxVarintLen64]byte
			n := binary.PutUvarint(tmp[:], uint64(curFrom-prevEnd))
			n += binary.PutUvarint(tmp[n:], uint64(curTo-curFrom))
			if len(buf)+n > maxRaw {
				return false
			}
			buf = append(buf, tmp[:n]...)
			prevEnd = curTo
		}
		curFrom, curTo = from, to
		return true
	}
	end := t.base + int64(len(t.words))*64
	// nextBit returns the lowest offset at or above o whose listed bit is
	// set (or clear), or end.
	nextBit := func(o int64, set bool) int64 {
		for w := int((o - t.base) / 64); w < len(t.words); w++ {
			word := t.inc(w, upTo)
			if !set {
				word = ^word
			}
			if first := t.base + int64(w)*64; o > first {
				word &^= 1<<(o-first) - 1
			}
			if word != 0 {
				return t.base + int64(w)*64 + int64(bits.TrailingZeros64(word))
			}
		}
		return end
	}
	for o := commit + 1; o < t.next; {
		if o = nextBit(o, true); o >= t.next {
			break
		}
		runEnd := min(nextBit(o, false), t.next)
		if !emit(o, runEnd) {
			return buf, false, prevEnd
		}
		o = runEnd
	}
	for _, r := range t.inherited {
		if !emit(r.from, r.to) {
			return buf, false, prevEnd
		}
	}
	if !emit(-2, -2) { // write the last run
		return buf, false, prevEnd
	}
	return buf, true, prevEnd
}

// Commit metadata: "hr1:" then base64url (no padding) of uvarint pairs
// (gap, run): the first run of consecutive finished offsets starts gap
// offsets after the commit offset, each next one gap offsets after the
// previous run's end. A listed offset stays listed until the commit passes
// it; newly finished offsets that would take the text past
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
