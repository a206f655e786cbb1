package workload

import (
	"fmt"
	"slices"
)

// MergeSpec describes a merge-heavy history of one file (the S2
// workload): two long-lived lines of development, "a" and "b", that edit
// the file independently and merge each other.
//
// The model. The file is a run of blocks of about BlockSize bytes. Each
// ordinary commit goes to line b with chance BShare, else to line a, and
// makes 1-Edits.Count small edits (Edits.MinLen-MaxLen bytes), each inside
// a block drawn uniformly from the whole file, so the two lines touch the
// same regions now and then, as branches of one file do. With chance
// MergeFrac a revision is a merge instead, but only a true merge: both
// lines must have commits the other lacks (a merge where one side has
// nothing new would be a fast-forward, which neither git nor Mercurial
// records as a merge revision). The merge goes into the line that has
// diverged less (fewer bytes edited since the other line last merged it)
// as p1 and takes the other line's head as p2, as a main line merges in a
// feature branch that did more; so the merged text is closer to p2. Since
// a merge waits until both lines have new commits, MergeFrac 0.7 gives
// about 30% merges.
//
// Merges are three-way, per block: a block changed on one side only since
// the two lines' common ancestor takes that side's text; a block both sides
// changed (a conflict) is resolved to p2's text. Which side changed a block
// is decided by its version history (every edit makes a new version of the
// block; a conflict resolution is a version with both sides as parents),
// so repeated criss-cross merges find the right common ancestor.
type MergeSpec struct {
	Name      string
	Seed      uint64
	Size      int     // bytes of the first revision
	Revisions int     // total, merges included
	MergeFrac float64 // chance that a revision is a merge, when a true merge is possible
	// BShare is the share of ordinary commits made on line b; the rest go
	// to line a. Unequal lines make merges pull in unequal amounts.
	BShare    float64
	BlockSize int // the three-way merge's unit
	Edits     EditSpec
}

// StoreS2 is the S2 workload: a 200 KiB text, 600 revisions on two lines
// of development that merge each other about 30% of the time.
func StoreS2() MergeSpec {
	return MergeSpec{Name: "S2", Seed: 32, Size: 200 << 10, Revisions: 600,
		MergeFrac: 0.7, BShare: 0.7, BlockSize: 512,
		Edits: EditSpec{Count: 3, MinLen: 10, MaxLen: 300}}
}

// MergeRev is one revision of a merge history. P1 and P2 index earlier
// revisions of the same history; -1 means none.
type MergeRev struct {
	Line   byte // 'a' or 'b': the line it was committed on
	P1, P2 int
	Data   []byte
}

// mergeLine is one line of development: its head revision, its text as
// blocks with the version of each, and how far it has diverged: the bytes
// its edits touched since the other line last merged it (ahead).
type mergeLine struct {
	name   byte
	head   int
	blocks [][]byte
	vers   []int
	ahead  int
}

// versions records each block version's parents (one for an edit, two for
// a conflict resolution, none for the first text).
type versions struct{ parents [][]int }

func (v *versions) add(parents ...int) int {
	v.parents = append(v.parents, parents)
	return len(v.parents) - 1
}

// isAncestor reports whether version a is b or one of its ancestors.
func (v *versions) isAncestor(a, b int) bool {
	seen := map[int]bool{}
	stack := []int{b}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x == a {
			return true
		}
		if x < a || seen[x] { // versions only have older parents
			continue
		}
		seen[x] = true
		stack = append(stack, v.parents[x]...)
	}
	return false
}

// Walk generates the history in commit order and calls fn for each
// revision. The first revision is on line a; line b starts from it.
func (s MergeSpec) Walk(fn func(n int, r MergeRev) error) error {
	t := NewText(s.Seed)
	r := t.Rand()
	base := t.Fill(s.Size)
	var vs versions
	a, b := &mergeLine{name: 'a'}, &mergeLine{name: 'b'}
	for off := 0; off < len(base); off += s.BlockSize {
		blk := base[off:min(off+s.BlockSize, len(base))]
		v := vs.add()
		a.blocks, a.vers = append(a.blocks, blk), append(a.vers, v)
	}
	b.blocks, b.vers = slices.Clone(a.blocks), slices.Clone(a.vers)
	if err := fn(0, MergeRev{Line: 'a', P1: -1, P2: -1, Data: base}); err != nil {
		return fmt.Errorf("%s rev 0: %w", s.Name, err)
	}
	for n := 1; n < s.Revisions; n++ {
		var rev MergeRev
		if a.ahead > 0 && b.ahead > 0 && r.Float64() < s.MergeFrac {
			rev = s.merge(&vs, a, b)
		} else {
			l := a
			if r.Float64() < s.BShare {
				l = b
			}
			s.commit(t, &vs, l)
			rev = MergeRev{Line: l.name, P1: l.head, P2: -1, Data: slices.Concat(l.blocks...)}
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

// commit makes 1..Edits.Count edits on line l, each in a random block.
func (s MergeSpec) commit(t *Text, vs *versions, l *mergeLine) {
	r := t.Rand()
	one := s.Edits
	one.Count = 1
	for range 1 + r.IntN(s.Edits.Count) {
		i := r.IntN(len(l.blocks))
		edits := t.Edits(len(l.blocks[i]), one)
		l.blocks[i] = ApplyEdits(l.blocks[i], edits)
		l.vers[i] = vs.add(l.vers[i])
		l.ahead += max(len(edits[0].Ins), edits[0].Del)
	}
}

// merge merges the line that has diverged more into the other, three-way
// per block (see MergeSpec).
func (s MergeSpec) merge(vs *versions, a, b *mergeLine) MergeRev {
	into, from := a, b
	if b.ahead < a.ahead {
		into, from = b, a
	}
	rev := MergeRev{Line: into.name, P1: into.head, P2: from.head}
	for i := range into.blocks {
		mine, theirs := into.vers[i], from.vers[i]
		switch {
		case vs.isAncestor(theirs, mine): // unchanged there, or already merged
		case vs.isAncestor(mine, theirs): // changed there only
			into.blocks[i], into.vers[i] = from.blocks[i], theirs
		default: // changed on both sides: resolved to p2's text
			into.blocks[i], into.vers[i] = from.blocks[i], vs.add(mine, theirs)
		}
	}
	// into now has all of from's commits; from still lacks into's own.
	from.ahead = 0
	rev.Data = slices.Concat(into.blocks...)
	return rev
}
