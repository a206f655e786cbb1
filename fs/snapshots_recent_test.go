package fs

import (
	"fmt"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// recentTree makes a tree of n entries called by its hash h.
func recentTree(out *Built, h byte, n int) index.TreeHash {
	t := &index.Tree{Entries: make([]index.TreeEntry, n)}
	for i := range t.Entries {
		t.Entries[i].Name = fmt.Sprintf("e%06d", i)
	}
	k := index.TreeHash{h}
	out.Trees[k], out.Decoded[k] = nil, t
	return k
}

func newBuilt() *Built {
	return &Built{Trees: map[index.TreeHash][]byte{}, Decoded: map[index.TreeHash]*index.Tree{}}
}

// TestKeepRecent: the recent trees stay within maxRecentEntries, this
// build's first; a build too large keeps only older ones that fit; a
// build that encoded nothing keeps them all.
func TestKeepRecent(t *testing.T) {
	b := NewTreeBuilder(t.TempDir())
	first := newBuilt()
	a := recentTree(first, 1, maxRecentEntries/2)
	b.keepRecent(first)
	second := newBuilt()
	c := recentTree(second, 2, maxRecentEntries/2)
	d := recentTree(second, 3, 10)
	b.keepRecent(second)
	if b.recent[c] == nil || b.recent[d] == nil || b.recent[a] != nil {
		t.Fatalf("second build: recent %d trees, want its own two only (the first no longer fits)", len(b.recent))
	}
	b.keepRecent(newBuilt())
	if len(b.recent) != 2 {
		t.Fatalf("a build that encoded nothing left %d recent trees, want 2", len(b.recent))
	}
	huge := newBuilt()
	recentTree(huge, 4, maxRecentEntries+1)
	b.keepRecent(huge)
	if len(b.recent) != 2 || b.recent[c] == nil {
		t.Fatalf("a build over the bound: recent %d trees, want the 2 kept before", len(b.recent))
	}
}

// TestPrevCursor: names asked in order find their entries, or nil.
func TestPrevCursor(t *testing.T) {
	tr := &index.Tree{Entries: []index.TreeEntry{{Name: "b"}, {Name: "d"}, {Name: "f"}}}
	c := prevCursor{t: tr}
	for _, q := range []struct {
		name string
		ok   bool
	}{{"a", false}, {"b", true}, {"c", false}, {"d", true}, {"e", false}, {"f", true}, {"g", false}} {
		if e := c.find(q.name); (e != nil) != q.ok || e != nil && e.Name != q.name {
			t.Fatalf("find(%q) = %v, want found %v", q.name, e, q.ok)
		}
	}
	if (&prevCursor{}).find("a") != nil {
		t.Fatal("find in no tree found an entry")
	}
}
