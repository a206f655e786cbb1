package index

import (
	"fmt"
	"strings"
)

// TreeLoader returns the tree called h.
type TreeLoader func(h TreeHash) (*Tree, error)

// RefDiff is how the revisions referenced under one tree differ from those
// under another.
type RefDiff struct {
	Added   *Refs // referenced by a file entry of the new tree that the old lacked
	Removed *Refs // referenced by a file entry of the old tree that the new lacks
	Kept    *Refs // referenced by the same name in both
	Trees   int   // trees loaded: the cost of the diff
}

// DiffRefs compares the file revisions under trees old and new (either
// may be zero: no tree). Equal subtrees are skipped without being loaded,
// so the cost follows the directories that differ, not the tree's size.
func DiffRefs(load TreeLoader, old, new TreeHash) (RefDiff, error) {
	d := RefDiff{Added: NewRefs(), Removed: NewRefs(), Kept: NewRefs()}
	return d, d.diff(load, old, new)
}

// Apply returns prev with d applied: a revision leaves the set only if it
// was removed somewhere and neither added nor kept anywhere else (a hard
// link may hold it under another name).
func (d RefDiff) Apply(prev *Refs) *Refs {
	gone := d.Removed.Clone()
	gone.AndNot(d.Added)
	gone.AndNot(d.Kept)
	out := prev.Clone()
	out.AndNot(gone)
	out.Or(d.Added)
	return out
}

func (d *RefDiff) diff(load TreeLoader, old, new TreeHash) error {
	if old == new {
		return nil
	}
	to, err := d.load(load, old)
	if err != nil {
		return err
	}
	tn, err := d.load(load, new)
	if err != nil {
		return err
	}
	i, j := 0, 0
	for i < len(to.Entries) || j < len(tn.Entries) {
		var eo, en *TreeEntry
		switch {
		case j >= len(tn.Entries) || (i < len(to.Entries) && to.Entries[i].Name < tn.Entries[j].Name):
			eo, i = &to.Entries[i], i+1
		case i >= len(to.Entries) || strings.Compare(to.Entries[i].Name, tn.Entries[j].Name) > 0:
			en, j = &tn.Entries[j], j+1
		default:
			eo, en, i, j = &to.Entries[i], &tn.Entries[j], i+1, j+1
		}
		if err := d.pair(load, eo, en); err != nil {
			return err
		}
	}
	return nil
}

func (d *RefDiff) load(load TreeLoader, h TreeHash) (*Tree, error) {
	if h.IsZero() {
		return &Tree{}, nil
	}
	d.Trees++
	t, err := load(h)
	if err != nil {
		return nil, fmt.Errorf("diff trees: %w", err)
	}
	return t, nil
}

// pair compares one name's entries (either may be nil).
func (d *RefDiff) pair(load TreeLoader, eo, en *TreeEntry) error {
	oldRev, newRev := fileRev(eo), fileRev(en)
	if !oldRev.IsNull() && oldRev == newRev {
		return add(d.Kept, oldRev)
	}
	if err := add(d.Removed, oldRev); err != nil {
		return err
	}
	if err := add(d.Added, newRev); err != nil {
		return err
	}
	return d.diff(load, dirTree(eo), dirTree(en))
}

func fileRev(e *TreeEntry) RevID {
	if e == nil || !e.IsRegular() {
		return NullRev
	}
	return e.Rev
}

func dirTree(e *TreeEntry) TreeHash {
	if e == nil || !e.IsDir() {
		return TreeHash{}
	}
	return e.Tree
}

func add(r *Refs, id RevID) error {
	if id.IsNull() {
		return nil
	}
	k, err := RefKey(id)
	if err != nil {
		return err
	}
	r.Add(k)
	return nil
}
