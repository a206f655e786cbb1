package workload

import "fmt"

// MergeSpec describes a merge-heavy history of one file (the S2
// workload): two lines of development, "a" and "b", edit the file and
// merge each other.
type MergeSpec struct {
	Name      string
	Seed      uint64
	Size      int     // bytes of the first revision
	Revisions int     // total, merges included
	MergeFrac float64 // chance that a revision is a merge (when either line has edits to merge)
	// BShare is the share of ordinary commits made on line b; the rest go
	// to line a. Unequal lines make merges pull in unequal amounts.
	BShare float64
	Edits  EditSpec
}

// StoreS2 is the S2 workload: a 200 KiB text, 600 revisions, about a
// quarter of them merges.
func StoreS2() MergeSpec {
	return MergeSpec{Name: "S2", Seed: 32, Size: 200 << 10, Revisions: 600,
		MergeFrac: 0.3, BShare: 0.7, Edits: EditSpec{Count: 3, MinLen: 10, MaxLen: 300}}
}

// MergeRev is one revision of a merge history. P1 and P2 index earlier
// revisions of the same history; -1 means none.
type MergeRev struct {
	Line   byte // 'a' or 'b': the line it was committed on
	P1, P2 int
	Data   []byte
}

// mergeLine is one line of development. The file is two halves; line a
// edits only the first, line b only the second, so a merge is exact: the
// merged text is a's first half followed by b's second half. pending
// counts the edits a line made that the other has not merged yet.
type mergeLine struct {
	head          int
	first, second []byte
	pending       int
}

// Walk generates the history in commit order and calls fn for each
// revision. The first revision is on line a; line b starts from it.
//
// A merge goes into the line with fewer pending edits, taking the other
// line's head as p2. The merged text then differs from p2 by the fewer
// edits, so it is closer to p2 than to p1: the case where a store that
// deltas only against p1 pays for every change merged in.
func (s MergeSpec) Walk(fn func(n int, r MergeRev) error) error {
	t := NewText(s.Seed)
	r := t.Rand()
	base := t.Fill(s.Size)
	half := len(base) / 2
	a := &mergeLine{head: 0, first: base[:half:half], second: base[half:]}
	b := &mergeLine{head: 0, first: a.first, second: a.second}
	if err := fn(0, MergeRev{Line: 'a', P1: -1, P2: -1, Data: base}); err != nil {
		return fmt.Errorf("%s rev 0: %w", s.Name, err)
	}
	for n := 1; n < s.Revisions; n++ {
		var rev MergeRev
		switch {
		case n > 1 && r.Float64() < s.MergeFrac && (a.pending > 0 || b.pending > 0):
			rev = s.merge(a, b)
		case r.Float64() < s.BShare:
			b.second = ApplyEdits(b.second, t.Edits(len(b.second), s.Edits))
			b.pending++
			rev = MergeRev{Line: 'b', P1: b.head, P2: -1, Data: concat(b.first, b.second)}
		default:
			a.first = ApplyEdits(a.first, t.Edits(len(a.first), s.Edits))
			a.pending++
			rev = MergeRev{Line: 'a', P1: a.head, P2: -1, Data: concat(a.first, a.second)}
		}
		if rev.Line == 'a' {
			a.head = n
		} else {
			b.head = n
		}
		if err := fn(n, rev); err != nil {
			return fmt.Errorf("%s rev %d: %w", s.Name, n, err)
		}
	}
	return nil
}

// merge merges the line with more pending edits into the other one.
func (s MergeSpec) merge(a, b *mergeLine) MergeRev {
	into, from, line := a, b, byte('a')
	if b.pending < a.pending {
		into, from, line = b, a, 'b'
	}
	rev := MergeRev{Line: line, P1: into.head, P2: from.head}
	// into now holds both lines' edits; from's stay unchanged until it
	// merges back.
	if line == 'a' {
		a.second = b.second
	} else {
		b.first = a.first
	}
	from.pending = 0
	rev.Data = concat(a.first, b.second)
	return rev
}

func concat(x, y []byte) []byte {
	out := make([]byte, 0, len(x)+len(y))
	return append(append(out, x...), y...)
}
