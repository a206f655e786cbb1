package mount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// snapshotter takes, lists, deletes and renames snapshots of one store:
// it is the fs.Snapshots of the .snapshots directory and the Controller
// of the control socket, and serves the offline CLI too.
//
// Taking a snapshot: prepare (the mount waits, briefly, for the releases
// of writable handles already closed, since the kernel sends RELEASE
// after close(2) returns; it reports what open writers wrote so far and
// waits until the recorder has recorded everything reported, so that
// every write that returned before the mkdir is in a revision, once),
// then the TreeBuilder re-serialises the directories that changed, and
// the store records the snapshot. The list of snapshots is cached in
// memory (every change to it goes through here while mounted), so that
// listing .snapshots costs no index scan.
type snapshotter struct {
	st   *objstore.Store
	b    *fs.TreeBuilder
	revs fs.Revisions
	log  *slog.Logger
	// prepare returns the files open for writing; nil when offline.
	prepare func(ctx context.Context) ([]fs.Touch, error)
	// verify checks the mounted store; nil when offline (control_verify.go).
	verify verifyFunc

	usage usageCache // per-snapshot usage, dropped by every change to the list

	mu      sync.Mutex // guards the cache and changed
	cached  []index.Snapshot
	byName  map[string]int // index into cached
	valid   bool
	changed time.Time // the last change to the list, or the start
}

var (
	_ fs.Snapshots        = (*snapshotter)(nil)
	_ Controller          = controller{}
	_ fs.SnapshotSizer    = (*snapshotter)(nil)
	_ fs.SnapshotsChanged = (*snapshotter)(nil)
)

func newSnapshotter(st *objstore.Store, b *fs.TreeBuilder, revs fs.Revisions, log *slog.Logger) *snapshotter {
	return &snapshotter{st: st, b: b, revs: revs, log: log, changed: time.Now()}
}

// Changed returns when a snapshot was last created, deleted or renamed
// through s (every change while mounted is), or when s was made.
func (s *snapshotter) Changed() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Create takes a snapshot of the whole tree called name, a name a user
// may give (CheckSnapshotName).
func (s *snapshotter) Create(ctx context.Context, name string) (index.Snapshot, error) {
	if err := CheckSnapshotName(name); err != nil {
		return index.Snapshot{}, err
	}
	return s.create(ctx, name)
}

// create is Create for any valid name, automatic ones included.
func (s *snapshotter) create(ctx context.Context, name string) (index.Snapshot, error) {
	if err := index.CheckSnapshotName(name); err != nil {
		return index.Snapshot{}, err
	}
	if s.b == nil {
		return index.Snapshot{}, fmt.Errorf("snapshot %q: %w", name, alsoIs{objstore.ErrReadOnly, fs.ErrReadOnly})
	}
	if _, err := s.Get(ctx, name); err == nil {
		return index.Snapshot{}, fmt.Errorf("snapshot %q: %w", name, index.ErrExists)
	}
	var writers []fs.Touch
	if s.prepare != nil {
		var err error
		if writers, err = s.prepare(ctx); err != nil {
			return index.Snapshot{}, fmt.Errorf("snapshot %q: record pending changes: %w", name, err)
		}
	}
	var snap index.Snapshot
	err := s.b.Build(ctx, s.revs, writers, func(bt *fs.Built) error {
		res, err := s.st.CreateSnapshot(ctx, objstore.SnapshotRequest{Name: name, Time: time.Now(), Root: bt.Root, Trees: bt.Trees, Decoded: bt.Decoded})
		snap = res.Snapshot
		if err == nil {
			s.log.Debug("snapshot taken", "name", name, "serialised", bt.Stats.Serialised, "reused", bt.Stats.Reused, "recent", bt.Stats.Recent)
		}
		return err
	})
	if err != nil {
		return index.Snapshot{}, wrapCorrupt(err)
	}
	s.added(snap)
	return snap, nil
}

// added adds a snapshot just created to the cached list, unless a listing
// that ran since the store recorded it has it already.
func (s *snapshotter) added(snap index.Snapshot) {
	s.edit(func(l []index.Snapshot) []index.Snapshot {
		if slices.ContainsFunc(l, func(sn index.Snapshot) bool { return sn.ID == snap.ID }) {
			return l
		}
		return append(l, snap)
	})
}

// warm lists the snapshots into the cache, so that the first "ls
// .snapshots" of a mount (and the name check of its first mkdir) does
// not scan the index: a mount starts it in the background. It takes the
// cached list itself, not a copy: with 5,000 snapshots a copy is 1 MB
// of garbage at every mount's start (seen in H1's window).
func (s *snapshotter) warm(ctx context.Context) {
	if _, err := s.shared(ctx); err != nil {
		s.log.Debug("list snapshots", "err", err)
	}
}

// List returns every snapshot in creation order.
func (s *snapshotter) List(ctx context.Context) ([]index.Snapshot, error) {
	l, err := s.shared(ctx)
	return slices.Clone(l), err
}

// shared is List without the copy: the cached list itself, which the
// caller must not modify. The cache is copied on write (Delete and
// Rename edit a copy; Create appends past every reader's length), so a
// list handed out stays as it was.
func (s *snapshotter) shared(ctx context.Context) ([]index.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.valid {
		l, err := s.st.SnapshotList(ctx)
		if err != nil {
			return nil, wrapCorrupt(err)
		}
		s.setCache(l)
	}
	return s.cached[:len(s.cached):len(s.cached)], nil
}

// Get returns the snapshot called name.
func (s *snapshotter) Get(ctx context.Context, name string) (index.Snapshot, error) {
	s.mu.Lock()
	if s.valid {
		defer s.mu.Unlock()
		if i, ok := s.byName[name]; ok {
			return s.cached[i], nil
		}
		return index.Snapshot{}, fmt.Errorf("snapshot %q: %w", name, index.ErrNotFound)
	}
	s.mu.Unlock()
	sn, err := s.st.Snapshot(name)
	return sn, wrapCorrupt(err)
}

// Delete deletes the snapshot called name.
func (s *snapshotter) Delete(ctx context.Context, name string) error {
	if err := s.st.DeleteSnapshot(name); err != nil {
		return wrapCorrupt(err)
	}
	s.edit(func(l []index.Snapshot) []index.Snapshot {
		return slices.DeleteFunc(slices.Clone(l), func(sn index.Snapshot) bool { return sn.Name == name })
	})
	return nil
}

// Rename renames snapshot from to to, a name a user may give.
func (s *snapshotter) Rename(ctx context.Context, from, to string) error {
	if err := CheckSnapshotName(to); err != nil {
		return err
	}
	if err := s.st.RenameSnapshot(from, to); err != nil {
		return wrapCorrupt(err)
	}
	s.edit(func(l []index.Snapshot) []index.Snapshot {
		l = slices.Clone(l)
		for i := range l {
			if l[i].Name == from {
				l[i].Name = to
			}
		}
		return l
	})
	return nil
}

// edit applies fn to the cached list, if there is one.
func (s *snapshotter) edit(fn func([]index.Snapshot) []index.Snapshot) {
	s.usage.invalidate()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changed = time.Now()
	if s.valid {
		s.setCache(fn(s.cached))
	}
}

// setCache caches l, with s.mu held.
func (s *snapshotter) setCache(l []index.Snapshot) {
	s.cached, s.valid = l, true
	s.byName = make(map[string]int, len(l))
	for i, sn := range l {
		s.byName[sn.Name] = i
	}
}

// Tree returns a directory tree of a snapshot.
func (s *snapshotter) Tree(ctx context.Context, h index.TreeHash) (*index.Tree, error) {
	t, err := s.st.Tree(h)
	return t, wrapCorrupt(err)
}

// Read returns the content of a revision.
func (s *snapshotter) Read(ctx context.Context, id index.RevID) ([]byte, error) {
	b, err := s.st.Get(ctx, id)
	return b, wrapCorrupt(err)
}

// The Controller of the control socket.

func (s *snapshotter) CreateSnapshot(ctx context.Context, name string) (index.Snapshot, error) {
	return s.Create(ctx, name)
}
func (s *snapshotter) ListSnapshots(ctx context.Context) ([]index.Snapshot, error) {
	return s.List(ctx)
}
func (s *snapshotter) DeleteSnapshot(ctx context.Context, name string) error {
	return s.Delete(ctx, name)
}
func (s *snapshotter) RenameSnapshot(ctx context.Context, from, to string) error {
	return s.Rename(ctx, from, to)
}
func (s *snapshotter) Stats(ctx context.Context) (Stats, error) {
	st, err := StoreStats(ctx, s.st)
	st.Mounted = s.prepare != nil
	return st, err
}

// wrapCorrupt makes the store's corruption and read-only errors match
// fs.ErrCorrupt and fs.ErrReadOnly, so that the live tree turns them into
// EIO (with a log line) and EROFS.
func wrapCorrupt(err error) error {
	switch {
	case errors.Is(err, objstore.ErrCorrupt) && !errors.Is(err, fs.ErrCorrupt):
		return alsoIs{err, fs.ErrCorrupt}
	case errors.Is(err, objstore.ErrReadOnly) && !errors.Is(err, fs.ErrReadOnly):
		return alsoIs{err, fs.ErrReadOnly}
	}
	return err
}

// alsoIs is err, matching target too, with err's message alone: a
// user reads "store is read-only", not "read-only: store is read-only".
type alsoIs struct{ err, target error }

func (e alsoIs) Error() string   { return e.err.Error() }
func (e alsoIs) Unwrap() []error { return []error{e.err, e.target} }
