package objstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deltafs/deltafs/index"
)

// Snapshots of the whole tree. The store keeps what a snapshot is made
// of (directory trees, content-addressed and shared between snapshots;
// the revisions the file entries name; a record per snapshot) but never
// builds one: walking the live tree is the mount's business. What it adds
// is the reference set of each snapshot, built incrementally from the
// previous one (see CreateSnapshot).

// ErrExists matches a snapshot name that is taken.
var ErrExists = index.ErrExists

// ErrBadName matches an invalid snapshot name.
var ErrBadName = index.ErrBadName

// SnapshotRequest is a snapshot built by the caller.
type SnapshotRequest struct {
	Name string
	Time time.Time
	// Root is the root directory's entry; Root.Tree its tree.
	Root index.TreeEntry
	// Trees holds the encoded trees new in this snapshot, by hash; a
	// tree already stored may be left out (the unchanged subtrees).
	Trees map[index.TreeHash][]byte
	// Decoded optionally holds trees by hash, decoded (those of Trees,
	// those of the latest snapshot that the caller read): the reference
	// diff reads them here rather than decoding them again. They must be
	// the trees their hashes name; the store does not modify them.
	Decoded map[index.TreeHash]*index.Tree
}

// SnapshotResult says what creating a snapshot cost.
type SnapshotResult struct {
	Snapshot  index.Snapshot
	TreesRead int // trees the reference diff loaded
	// TreesDecoded is how many of them it decoded itself (from
	// req.Trees or the index) rather than taking them from req.Decoded.
	TreesDecoded int
	Refs         uint64
}

// writable returns an error if the store takes no writes.
func (s *Store) writable() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.cfg.ReadOnly:
		return ErrReadOnly
	}
	return nil
}

// CreateSnapshot stores req's new trees, then records the snapshot with
// its reference set: the latest snapshot's set plus and minus the file
// revisions that differ between its tree and this one (index.DiffRefs),
// so the cost follows what changed, not the size of the tree. Snapshot
// changes take turns (Store.smu): the index's hold rows of a new snapshot
// are relative to the latest one.
func (s *Store) CreateSnapshot(ctx context.Context, req SnapshotRequest) (SnapshotResult, error) {
	if err := s.writable(); err != nil {
		return SnapshotResult{}, err
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	if err := index.CheckSnapshotName(req.Name); err != nil {
		return SnapshotResult{}, err
	}
	if !req.Root.IsDir() || req.Root.Tree.IsZero() {
		return SnapshotResult{}, fmt.Errorf("snapshot %q: root is not a directory tree", req.Name)
	}
	if _, err := s.idx.Snapshot(req.Name); err == nil {
		return SnapshotResult{}, fmt.Errorf("snapshot %q: %w", req.Name, ErrExists)
	}
	inTxn := req.Trees
	if treeBytes(req.Trees) > index.MaxTxnTrees {
		if err := s.idx.PutTrees(req.Trees); err != nil {
			return SnapshotResult{}, fmt.Errorf("snapshot %q: %w", req.Name, err)
		}
		inTxn = nil
	}
	res := SnapshotResult{}
	refs, prev, err := s.nextRefs(req, &res)
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("snapshot %q: %w", req.Name, err)
	}
	snap := index.Snapshot{Name: req.Name, Time: req.Time.UnixNano(), Root: req.Root, Prev: prev}
	if _, err := s.idx.CreateSnapshot(&snap, refs, inTxn); err != nil {
		return SnapshotResult{}, err
	}
	res.Snapshot, res.Refs = snap, refs.GetCardinality()
	return res, nil
}

// nextRefs builds req's reference set from the latest snapshot's, and
// counts the trees it loaded in res.
func (s *Store) nextRefs(req SnapshotRequest, res *SnapshotResult) (*index.Refs, index.SnapshotID, error) {
	prev, ok, err := s.idx.LatestSnapshot()
	if err != nil {
		return nil, 0, err
	}
	base, from := index.NewRefs(), index.TreeHash{}
	if ok {
		if base, err = s.idx.SnapshotRefs(prev.ID); err != nil {
			return nil, 0, err
		}
		from = prev.Root.Tree
	}
	load := func(h index.TreeHash) (*index.Tree, error) {
		if t := req.Decoded[h]; t != nil {
			return t, nil
		}
		res.TreesDecoded++
		if b, ok := req.Trees[h]; ok {
			var t index.Tree
			return &t, t.UnmarshalBinary(b)
		}
		return s.idx.Tree(h)
	}
	d, err := index.DiffRefs(load, from, req.Root.Tree)
	if err != nil {
		return nil, 0, err
	}
	res.TreesRead = d.Trees
	return d.Apply(base), prev.ID, nil
}

// Snapshot returns the snapshot called name.
func (s *Store) Snapshot(name string) (index.Snapshot, error) { return s.idx.Snapshot(name) }

// Snapshots calls fn with every snapshot, in creation order.
func (s *Store) Snapshots(ctx context.Context, fn func(index.Snapshot) error) error {
	return s.idx.Snapshots(ctx, fn)
}

// SnapshotList returns every snapshot, in creation order.
func (s *Store) SnapshotList(ctx context.Context) ([]index.Snapshot, error) {
	var out []index.Snapshot
	err := s.idx.Snapshots(ctx, func(sn index.Snapshot) error { out = append(out, sn); return nil })
	return out, err
}

// DeleteSnapshot deletes the snapshot called name. Its trees and
// revisions stay in the store (a later garbage collection frees what no
// snapshot and no live file references).
func (s *Store) DeleteSnapshot(name string) error {
	if err := s.writable(); err != nil {
		return err
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.idx.DeleteSnapshot(name)
}

// RenameSnapshot renames a snapshot.
func (s *Store) RenameSnapshot(from, to string) error {
	if err := s.writable(); err != nil {
		return err
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.idx.RenameSnapshot(from, to)
}

// Tree returns the directory tree called h.
func (s *Store) Tree(h index.TreeHash) (*index.Tree, error) {
	t, err := s.idx.Tree(h)
	if errors.Is(err, index.ErrDecode) {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return t, err
}

// SnapshotRefs returns the set of revisions snapshot id references
// (index.RefKey maps a RevID into it).
func (s *Store) SnapshotRefs(id index.SnapshotID) (*index.Refs, error) {
	r, err := s.idx.SnapshotRefs(id)
	if errors.Is(err, index.ErrDecode) {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return r, err
}

func treeBytes(trees map[index.TreeHash][]byte) int {
	n := 0
	for _, b := range trees {
		n += len(b)
	}
	return n
}
