package objstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path"

	"github.com/deltafs/deltafs/index"
)

// snapshots checks every snapshot: its record, every tree under its root
// and every revision they name, and its reference set against them; then
// the hold rows against the reference sets.
// Trees are shared between snapshots, so each distinct tree is checked
// once and its problems reported under the first snapshot path that
// reaches it; the revisions under it are kept (a small bitmap per tree)
// to check every snapshot's reference set without walking its tree again.
func (v *verifier) snapshots(ctx context.Context) error {
	var snaps []index.Snapshot
	err := v.s.idx.EachSnapshot(ctx, func(id index.SnapshotID, sn index.Snapshot, err error) error {
		if err != nil {
			v.problem(Problem{Kind: ProblemIndex, Path: fmt.Sprintf("snapshot %d", id), Err: err})
			return nil
		}
		snaps = append(snaps, sn)
		return nil
	})
	if err != nil {
		return err
	}
	v.sum.Snapshots = int64(len(snaps))
	tw := &treeWalk{v: v, refs: map[index.TreeHash]*index.Refs{}}
	for i, sn := range snaps {
		if err := ctx.Err(); err != nil {
			return err
		}
		at := "snapshot " + sn.Name
		refs := tw.tree(ctx, at, sn.Root.Tree)
		v.checkRefs(at, sn.ID, refs)
		v.progress(VerifyProgress{Phase: "snapshots", Done: int64(i + 1), Total: int64(len(snaps))})
	}
	v.sum.Trees = int64(len(tw.refs))
	return v.holds(ctx)
}

// holds checks the index's hold rows (which snapshots hold which
// revisions of each file, for history views) against the reference sets.
func (v *verifier) holds(ctx context.Context) error {
	return v.s.idx.CheckHolds(ctx, func(m index.HoldMismatch) {
		at := "snapshot " + m.Snapshot.Name
		err := m.Err
		if err == nil {
			err = fmt.Errorf("hold rows of file %d say revisions %v, the reference set %v", m.File, m.Rows, m.Refs)
		}
		v.problem(Problem{Kind: ProblemIndex, Rev: index.RevID{File: m.File}, Path: at, Err: err})
	})
}

// checkRefs compares snapshot id's stored reference set with want, the
// revisions its tree names.
func (v *verifier) checkRefs(at string, id index.SnapshotID, want *index.Refs) {
	got, err := v.s.idx.SnapshotRefs(id)
	if err != nil {
		v.problem(Problem{Kind: ProblemRefs, Path: at, Err: fmt.Errorf("reference set: %w", err)})
		return
	}
	missing, extra := want.Clone(), got.Clone()
	missing.AndNot(got)
	extra.AndNot(want)
	for _, d := range []struct {
		set  *index.Refs
		what string
	}{{missing, "named by its tree but missing from its reference set"}, {extra, "in its reference set but named by no file of its tree"}} {
		if d.set.IsEmpty() {
			continue
		}
		first := index.RefID(d.set.Minimum())
		v.problem(Problem{Kind: ProblemRefs, Rev: first, Path: at,
			Err: fmt.Errorf("%d revisions %s (the first is %v)", d.set.GetCardinality(), d.what, first)})
	}
}

// treeWalk checks trees, each once; refs holds, per tree checked, the
// revisions its files name (a tree that could not be read names none).
type treeWalk struct {
	v    *verifier
	refs map[index.TreeHash]*index.Refs
}

// tree checks tree h, reached at path at, and returns the revisions
// under it.
func (tw *treeWalk) tree(ctx context.Context, at string, h index.TreeHash) *index.Refs {
	if r, ok := tw.refs[h]; ok {
		return r
	}
	refs := index.NewRefs()
	tw.refs[h] = refs // a cycle (impossible with content hashes) ends here
	if h.IsZero() || ctx.Err() != nil {
		return refs
	}
	t, err := tw.load(h)
	if err != nil {
		tw.v.problem(Problem{Kind: ProblemTree, Path: at, Err: err})
		return refs
	}
	for i := range t.Entries {
		e := &t.Entries[i]
		p := path.Join(at, e.Name)
		switch {
		case e.IsDir():
			refs.Or(tw.tree(ctx, p, e.Tree))
		case e.IsRegular() && !e.Rev.IsNull():
			tw.file(p, e)
			if k, err := index.RefKey(e.Rev); err == nil {
				refs.Add(k)
			}
		}
	}
	return refs
}

// load reads tree h, checking that its bytes hash to h and decode.
func (tw *treeWalk) load(h index.TreeHash) (*index.Tree, error) {
	b, err := tw.v.s.idx.TreeBytes(h)
	if errors.Is(err, index.ErrNotFound) {
		return nil, fmt.Errorf("tree %s is missing", h)
	}
	if err != nil {
		return nil, err
	}
	if sha256.Sum256(b) != h {
		return nil, fmt.Errorf("tree %s: content hashes to %x", h, sha256.Sum256(b))
	}
	var t index.Tree
	if err := t.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("tree %s: %w", h, err)
	}
	return &t, nil
}

// file checks the revision a file entry names: it exists, read back
// (the revisions phase said so) and has the entry's size.
func (tw *treeWalk) file(at string, e *index.TreeEntry) {
	v := tw.v
	if v.isBad(e.Rev) {
		v.problem(Problem{Kind: ProblemTree, Rev: e.Rev, Path: at, Err: errors.New("names a revision that does not read back (reported above)")})
		return
	}
	// A revision committed after the entries were read (through a mount)
	// is not among them, but is there.
	re, err := v.s.idx.Entry(e.Rev)
	switch {
	case errors.Is(err, index.ErrNotFound):
		v.problem(Problem{Kind: ProblemTree, Rev: e.Rev, Path: at, Err: errors.New("names a revision the store does not have")})
	case err != nil:
		v.problem(Problem{Kind: ProblemTree, Rev: e.Rev, Path: at, Err: err})
	case re.Size != e.Size && e.Size != 0: // trees built without sizes (tests) say 0
		v.problem(Problem{Kind: ProblemTree, Rev: e.Rev, Path: at,
			Err: fmt.Errorf("file of %d bytes names a revision of %d", e.Size, re.Size)})
	}
}
