package fs

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/deltafs/deltafs/index"
	"golang.org/x/sys/unix"
)

// Keeping unchanged entries. A directory serialised again because one
// entry changed (or a descendant did: every ancestor of a change is
// serialised again) has its other entries as they were. Describing each
// afresh costs a listxattr, a getxattr and a store lookup per file, which
// made a snapshot of a tree with a directory of 1,000 subdirectories cost
// in proportion to that directory's size. So the walk loads the
// directory's previous tree (from the store, through the Revisions when
// it is also a TreeSource) and keeps an entry's xattrs, symlink target
// and revision when the node was not touched since the last build and
// its stat is the same as then (inode, type and mode, owner, links, size,
// mtime and ctime: ctime moves with every change of content, attributes
// or xattrs). Each entry is still statted (its atime is taken fresh, as
// before), and a directory entry is still walked (it keeps its tree
// unless it changed).

// TreeSource gives the stored trees of earlier snapshots. A Revisions
// that implements it lets a build keep the unchanged entries of the
// directories it serialises again.
type TreeSource interface {
	Tree(ctx context.Context, h index.TreeHash) (*index.Tree, error)
}

// prevTree returns the tree called h, or nil if there is no TreeSource or
// it fails (the directory is then described entry by entry, as on a first
// build).
func (w *walk) prevTree(h index.TreeHash) *index.Tree {
	src, ok := w.revs.(TreeSource)
	if !ok {
		return nil
	}
	t, err := src.Tree(w.ctx, h)
	if err != nil {
		return nil
	}
	return t
}

// keep reports whether e, just statted, may take the rest of its
// description from prev's entry of the same name, and if so copies it.
func (w *walk) keep(prev *index.Tree, e *index.TreeEntry) bool {
	if prev == nil {
		return false
	}
	if _, touched := w.marked[e.Ino]; touched {
		return false
	}
	o, ok := prev.Lookup(e.Name)
	if !ok || o.Ino != e.Ino || o.Mode != e.Mode || o.UID != e.UID || o.GID != e.GID || o.Nlink != e.Nlink ||
		o.Rdev != e.Rdev || o.Size != e.Size || o.Mtime != e.Mtime || o.Ctime != e.Ctime {
		return false
	}
	e.Xattrs, e.Target, e.Rev = o.Xattrs, o.Target, o.Rev
	return true
}

// kept finishes an entry that keep took from the previous tree: a
// directory is walked (its tree may still have changed below), a file
// with several links is noted for the next build's dirty tracking.
func (w *walk) kept(rel string, dirIno uint64, x *unix.Statx_t, e index.TreeEntry) (index.TreeEntry, bool, error) {
	w.out.Stats.Kept++
	switch {
	case e.IsDir():
		var err error
		if e.Tree, err = w.dir(filepath.Join(rel, e.Name), x.Ino, dirIno, birth(x)); err != nil {
			return e, false, fmt.Errorf("snapshot: /%s: %w", filepath.Join(rel, e.Name), err)
		}
	case e.IsRegular() && x.Nlink > 1:
		w.links[x.Ino] = append(w.links[x.Ino], dirIno)
	}
	return e, true, nil
}
