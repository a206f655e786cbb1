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
// directory's previous tree (kept in memory from a recent build, see
// snapshots_recent.go, or from the store, through the Revisions when it
// is also a TreeSource), reads the directory's names in name order
// (names: from getdents, or from that tree for a directory that is only
// above a change), finds each in that tree by a merge, and keeps an
// entry, without even a stat, when its node was not touched since the
// last build and its name still holds the same inode (unstatted): the dirty
// tracking says it did not change, as it says of whole directories. The
// directories on the way to a change are statted (their times moved)
// and keep their description when their stat is the same as then (inode,
// type and mode, owner, links, size, mtime and ctime). So a snapshot
// costs a stat and more per entry changed, and per directory serialised
// again a merge and an encoding of its entries (and a getdents if it
// changed itself): in memory, in proportion to its size, with no system
// call or store lookup per entry.

// TreeSource gives the stored trees of earlier snapshots. A Revisions
// that implements it lets a build keep the unchanged entries of the
// directories it serialises again.
type TreeSource interface {
	Tree(ctx context.Context, h index.TreeHash) (*index.Tree, error)
}

// prevTree returns the tree called h: one the last build encoded, or
// from the TreeSource; nil if there is none or it fails (the directory is
// then described entry by entry, as on a first build). The build's
// Decoded gets it.
func (w *walk) prevTree(h index.TreeHash) *index.Tree {
	t := w.b.recent[h]
	if t != nil {
		w.out.Stats.Recent++
	} else {
		src, ok := w.revs.(TreeSource)
		if !ok {
			return nil
		}
		var err error
		if t, err = src.Tree(w.ctx, h); err != nil {
			return nil
		}
	}
	w.out.Decoded[h] = t
	return t
}

// keep reports whether e, just statted, may take the rest of its
// description from o, its entry in the previous tree (nil if none), and
// if so copies it.
func (w *walk) keep(o *index.TreeEntry, e *index.TreeEntry) bool {
	if o == nil {
		return false
	}
	if _, touched := w.marked[e.Ino]; touched {
		return false
	}
	if o.Ino != e.Ino || o.Mode != e.Mode || o.UID != e.UID || o.GID != e.GID || o.Nlink != e.Nlink ||
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

// unstatted keeps the entry d of a directory serialised again without
// even a stat, when the dirty tracking says it did not change: its node
// was not touched since the last build, the name still holds the same
// inode (getdents says so), and, for a directory, it need not be
// serialised again (its cached tree is kept). Its atime stays as the
// previous snapshot saw it, as for every entry of an unchanged directory.
func (w *walk) unstatted(prev *index.TreeEntry, d dirent, dirIno uint64) (index.TreeEntry, bool) {
	if prev == nil || d.ino == 0 || prev.Ino != d.ino {
		return index.TreeEntry{}, false
	}
	if _, touched := w.marked[d.ino]; touched {
		return index.TreeEntry{}, false
	}
	o := *prev // the previous tree is shared (TreeBuilder.recent)
	switch {
	case o.IsDir():
		c, ok := w.b.cache[d.ino]
		if !ok || w.needs[d.ino] {
			return index.TreeEntry{}, false
		}
		o.Tree = c.hash
		if c.parent != dirIno {
			c.parent = dirIno
			w.cache[d.ino] = c
		}
		w.out.Stats.Reused++
	case o.IsRegular() && o.Nlink > 1:
		w.links[d.ino] = append(w.links[d.ino], dirIno)
	}
	w.out.Stats.Kept++
	return o, true
}
