package fs

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/deltafs/deltafs/index"
)

// The directories on the way to a change (the root, and a directory of
// 1,000 subdirectories holding a changed one) are serialised again at
// every snapshot, each from its previous tree. Loading that tree from the
// store decodes it, and the store decoded it again, with the new one, to
// diff the reference sets (objstore.CreateSnapshot): three passes over
// every entry of a wide directory per snapshot, besides its encoding.
// Measured (M4, a tree of 100,000 files with 1,000 directories in one,
// 10 files changed in 10 of them): 2.6 of the snapshot's 7.3 ms of CPU
// went to decoding, sorting and searching those entries. So the builder
// keeps the trees it encoded last, decoded (recent), for the next build
// to read, and hands every tree it holds to the commit (Built.Decoded).

// maxRecentEntries bounds the entries TreeBuilder.recent keeps (some 200
// bytes each with their names: ~3 MiB).
const maxRecentEntries = 1 << 14

// keepRecent adds the trees out encoded to the builder's recent trees,
// within maxRecentEntries: first this build's (a build that serialised
// more, like the first one, which walks the whole tree, keeps none of
// them), then as many of the ones kept before as fit, which a build that
// changed nothing keeps all. A tree whose directory changed since stays
// until it no longer fits: its hash names the same content still.
func (b *TreeBuilder) keepRecent(out *Built) {
	next := make(map[index.TreeHash]*index.Tree, len(out.Trees))
	n := 0
	for h := range out.Trees {
		t := out.Decoded[h]
		next[h] = t
		n += len(t.Entries)
	}
	if n > maxRecentEntries {
		next, n = map[index.TreeHash]*index.Tree{}, 0
	}
	for h, t := range b.recent {
		if next[h] == nil && n+len(t.Entries) <= maxRecentEntries {
			next[h] = t
			n += len(t.Entries)
		}
	}
	b.recent = next
}

// prevCursor finds the entries of a previous tree (sorted by name, nil
// for none) for names asked in increasing order: one merge through the
// tree instead of a binary search per name.
type prevCursor struct {
	t *index.Tree
	i int
}

// find returns the entry called name, nil if there is none. The entry is
// the shared tree's: copy it before changing it.
func (c *prevCursor) find(name string) *index.TreeEntry {
	if c.t == nil {
		return nil
	}
	ents := c.t.Entries
	for c.i < len(ents) && ents[c.i].Name < name {
		c.i++
	}
	if c.i < len(ents) && ents[c.i].Name == name {
		return &ents[c.i]
	}
	return nil
}

// names lists the directory at rel (inode ino, previous tree prev) in
// name order, the tree's: its entries need no sort, and the previous
// tree's are found by a merge (prevCursor). A directory serialised again
// only because a descendant changed (not marked itself) takes the names
// of its previous tree, without a getdents: the dirty tracking says its
// listing did not change, as it says of every directory a build keeps
// whole. So a directory of 1,000 subdirectories above a change costs a
// pass over its previous tree, not a read of the directory.
func (w *walk) names(rel string, ino uint64, prev *index.Tree) ([]dirent, error) {
	if _, marked := w.dirty[ino]; prev != nil && !marked {
		ents := make([]dirent, len(prev.Entries))
		for i := range prev.Entries {
			ents[i] = dirent{name: prev.Entries[i].Name, ino: prev.Entries[i].Ino}
		}
		return ents, nil
	}
	ents, err := readDirents(filepath.Join(w.b.live, rel))
	if err = gone(err); err != nil {
		return nil, fmt.Errorf("snapshot: read directory /%s: %w", rel, err)
	}
	w.out.Stats.Listed++
	slices.SortFunc(ents, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	return ents, nil
}
