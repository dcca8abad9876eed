package pipeline

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// committable is commitInfo with the metadata decoded to a list.
func (t *offsetTracker) committable() (int64, []int64) {
	c, meta := t.commitInfo()
	rs, err := decodeDoneAbove(c, meta)
	if err != nil {
		panic(err)
	}
	var above []int64
	for _, r := range rs {
		for o := r.from; o < r.to; o++ {
			above = append(above, o)
		}
	}
	return c, above
}

func TestOffsetTrackerCommitsLowestUnfinished(t *testing.T) {
	tr := newOffsetTracker(10)
	if c, above := tr.committable(); c != 10 || above != nil {
		t.Fatalf("empty: committable = %d, %v; want 10, none", c, above)
	}
	for _, o := range []int64{10, 11, 12, 15, 16} { // 13, 14: a gap (aborted txn records)
		if !tr.add(o) {
			t.Fatalf("add(%d) refused", o)
		}
	}
	tr.done(11)
	tr.done(15)
	// 13 and 14 were never added (transaction markers): they count as
	// finished, which lengthens the run.
	if c, above := tr.committable(); c != 10 || !reflect.DeepEqual(above, []int64{11, 13, 14, 15}) {
		t.Fatalf("committable = %d, %v; want 10, [11 13 14 15]", c, above)
	}
	tr.done(10)
	if c, above := tr.committable(); c != 12 || !reflect.DeepEqual(above, []int64{13, 14, 15}) {
		t.Fatalf("committable = %d, %v; want 12, [13 14 15]", c, above)
	}
	if tr.done(15) {
		t.Fatal("done(15) twice reported pending")
	}
	tr.done(12)
	tr.done(16)
	if c, above := tr.committable(); c != 17 || above != nil {
		t.Fatalf("all done: committable = %d, %v; want 17, none", c, above)
	}
	if tr.add(16) {
		t.Fatal("add(16) after 16 accepted a re-fetched offset")
	}
	if tr.pending() != 0 {
		t.Fatalf("pending = %d", tr.pending())
	}
}

func TestOffsetTrackerCompacts(t *testing.T) {
	tr := newOffsetTracker(0)
	for o := int64(0); o < 5000; o++ {
		tr.add(o)
		tr.done(o)
		if o%100 == 0 {
			tr.committable()
		}
	}
	tr.add(5000)
	if c, _ := tr.committable(); c != 5000 {
		t.Fatalf("committable = %d; want 5000", c)
	}
	if len(tr.words) > 1 {
		t.Fatalf("window not compacted: %d words", len(tr.words))
	}
}

func TestDoneAboveRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		commit int64
		above  []int64
	}{
		{100, nil},
		{100, []int64{101}},
		{100, []int64{101, 102, 103, 200, 201}},
		{0, []int64{5, 7, 9, 11}},
	} {
		// Every offset is added; the listed ones finish.
		tr := newOffsetTracker(tc.commit)
		last := tc.commit
		if len(tc.above) > 0 {
			last = tc.above[len(tc.above)-1]
		}
		for o := tc.commit; o <= last && o < tc.commit+1<<20; o++ {
			tr.add(o)
		}
		if last >= tc.commit+1<<20 {
			tr.add(last)
		}
		for _, o := range tc.above {
			tr.done(o)
		}
		c, got := tr.committable()
		if c != tc.commit || !reflect.DeepEqual(got, tc.above) {
			t.Fatalf("round trip of %v = %d, %v", tc.above, c, got)
		}
	}
}

func TestDoneAboveBounded(t *testing.T) {
	tr := newOffsetTracker(0)
	for o := int64(0); o < 100000; o++ {
		tr.add(o)
		if o%2 == 1 { // worst case: no runs
			tr.done(o)
		}
	}
	c, meta := tr.commitInfo()
	if c != 0 || len(meta) > maxCommitMetadata {
		t.Fatalf("commit %d, metadata %d bytes; want 0 and at most %d", c, len(meta), maxCommitMetadata)
	}
	if !tr.retired(1) || tr.retired(99999) {
		t.Fatalf("retired(1) = %v, retired(99999) = %v; want the lowest runs listed, not the highest", tr.retired(1), tr.retired(99999))
	}
	got, err := decodeDoneAbove(0, meta)
	if err != nil || len(got) == 0 || got[0].from != 1 {
		t.Fatalf("decode = %v, %v; want the lowest runs kept", got, err)
	}
	// Remembered until the next done; recomputed after it.
	if _, again := tr.commitInfo(); again != meta {
		t.Fatal("unchanged tracker gave different metadata")
	}
	tr.done(0)
	if c, _ := tr.commitInfo(); c != 2 {
		t.Fatalf("after done(0): commit %d; want 2", c)
	}
}

func TestDecodeForeignMetadata(t *testing.T) {
	if r, err := decodeDoneAbove(5, "member-abc"); r != nil || err != nil {
		t.Fatalf("foreign metadata = %v, %v; want ignored", r, err)
	}
	if _, err := decodeDoneAbove(5, "hr1:!!!"); err == nil {
		t.Fatal("bad base64 accepted")
	}
	if _, err := decodeDoneAbove(5, "hr1:"+strings.Repeat("_", 3)); err == nil {
		t.Fatal("truncated varints accepted")
	}
}

func TestSkipSet(t *testing.T) {
	s := skipSet{ranges: []offsetRange{{3, 5}, {9, 10}}}
	var got []int64
	for o := int64(0); o < 12; o++ {
		if s.has(o) {
			got = append(got, o)
		}
	}
	if !reflect.DeepEqual(got, []int64{3, 4, 9}) {
		t.Fatalf("skipped %v; want [3 4 9]", got)
	}
}

// TestRetiredOffsetsStayRetired: once a commit retires a finished offset
// (its follow-up records commit with it), every later commit must retire it
// too, until the commit offset passes it. Offsets finishing below ones the
// full metadata already lists take its room; the listed ones must not be
// pushed out, or the next owner redoes a delivery whose follow-up is
// already live (a fork). Layout of the review test: a hung delivery below
// every failing one, and the lowest failing ones finish last.
func TestRetiredOffsetsStayRetired(t *testing.T) {
	const pairs = 1400
	tr := newOffsetTracker(0)
	for o := int64(0); o < 2*pairs; o++ {
		tr.add(o)
	}
	finished := map[int64]bool{}
	released := map[int64]bool{} // follow-ups sent: retired by some commit
	check := func(step string) {
		t.Helper()
		c, meta := tr.commitInfo()
		if len(meta) > maxCommitMetadata {
			t.Fatalf("%s: metadata %d bytes", step, len(meta))
		}
		rs, err := decodeDoneAbove(c, meta)
		if err != nil {
			t.Fatal(err)
		}
		listed := map[int64]bool{}
		for _, r := range rs {
			for o := r.from; o < r.to; o++ {
				listed[o] = true
			}
		}
		for o := range listed {
			if o%2 == 1 && !finished[o] {
				t.Fatalf("%s: unfinished offset %d listed (its delivery would be lost)", step, o)
			}
		}
		for o := range finished {
			if tr.retired(o) {
				if o >= c && !listed[o] {
					t.Fatalf("%s: offset %d retired but neither below the commit (%d) nor listed (its delivery would be lost)", step, o, c)
				}
				released[o] = true
			}
		}
		n := 0
		for o := range released {
			if o >= c && !listed[o] {
				n++
			}
		}
		if n > 0 {
			t.Fatalf("%s: %d offsets retired by an earlier commit are neither below the commit (%d) nor listed (forks)", step, n, c)
		}
	}
	for i := int64(40); i < pairs; i++ { // the failing deliveries but the lowest 40
		tr.done(2*i + 1)
		finished[2*i+1] = true
	}
	check("first commit")
	for i := int64(0); i < 40; i++ { // the lowest 40 finish late
		tr.done(2*i + 1)
		finished[2*i+1] = true
		check(fmt.Sprint("late finish ", i))
	}
	if len(released) < 1000 || len(released) >= pairs {
		t.Fatalf("%d of %d finished offsets retired; want the ~1150 the metadata can list", len(released), pairs)
	}
	for i := int64(0); i < pairs; i++ { // the hung ones finish: the commit passes everything
		tr.done(2 * i)
		finished[2*i] = true
	}
	check("all finished")
	if c, meta := tr.commitInfo(); c != 2*pairs || meta != "" {
		t.Fatalf("all finished: commit %d, metadata %q; want %d, none", c, meta, 2*pairs)
	}
}

// TestInheritedListingSurvivesEarlyCommit: a new owner commits after its
// first fetch, long before it has fetched every offset the previous owner
// listed. Its metadata must still list them all (their follow-ups are
// live): a third owner reading it would redo them (a fork). A rebalance
// soon after another (a rolling deploy) is enough.
func TestInheritedListingSurvivesEarlyCommit(t *testing.T) {
	const pairs = 1400
	a := newOffsetTracker(0)
	for o := int64(0); o < 2*pairs; o++ {
		a.add(o)
		if o%2 == 1 {
			a.done(o)
		}
	}
	c, meta := a.commitInfo()
	inherited, err := decodeDoneAbove(c, meta)
	if err != nil || len(inherited) < 1000 {
		t.Fatalf("previous owner's metadata: %d ranges, %v", len(inherited), err)
	}
	b := newOffsetTracker(c)
	b.inherit(inherited)
	skip := skipSet{ranges: inherited}
	for o := c; o < 100; o++ { // the first fetch; the hung ones stay pending
		b.add(o)
		if skip.has(o) {
			b.done(o)
		}
	}
	bc, bmeta := b.commitInfo()
	got, err := decodeDoneAbove(bc, bmeta)
	if err != nil {
		t.Fatal(err)
	}
	if bc != c || !reflect.DeepEqual(got, inherited) {
		t.Fatalf("new owner's first commit %d lists %d ranges; want %d and the previous owner's %d", bc, len(got), c, len(inherited))
	}
	// It fetches the rest and finishes its own: the inherited stay listed.
	for o := int64(100); o < 2*pairs; o++ {
		b.add(o)
		if skip.has(o) || o%2 == 1 {
			b.done(o)
		}
	}
	bc, bmeta = b.commitInfo()
	got, _ = decodeDoneAbove(bc, bmeta)
	for _, r := range inherited {
		for o := r.from; o < r.to; o++ {
			if !b.retired(o) {
				t.Fatalf("inherited offset %d not retired after the full fetch", o)
			}
		}
	}
	if !reflect.DeepEqual(got, inherited) {
		t.Fatalf("after the full fetch: %d ranges listed; want the %d inherited (no room for more)", len(got), len(inherited))
	}
}
