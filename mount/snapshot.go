package mount

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// after close(2) returns, and until the recorder has recorded everything
// reported, so that every change closed before the mkdir is in a
// revision, once); then the snapshot takes the sink's lock (it waits for
// the window the recorder is storing, while the writers go on) and
// freezes the live tree (fs.FS.Freeze: the operations that change it
// finish and the next ones wait), takes the files open for writing, and
// the TreeBuilder re-serialises the directories that changed, recording
// the content no revision holds; then it thaws the live tree and lets
// the sink go, and the store records the snapshot. So a snapshot is of
// one instant (see fs/freeze.go for the exception, passthrough writers).
// The list of snapshots is cached in memory (every change to it goes
// through here while mounted), so that listing .snapshots costs no index
// scan.
type snapshotter struct {
	st   *objstore.Store
	b    *fs.TreeBuilder
	revs fs.Revisions
	log  *slog.Logger
	// sink is held from before the freeze until the build is done:
	// liveRevs.Revision records with it held (nil when read-only).
	sink *lockedSink
	// prepare waits for the releases and the recorder; nil when offline.
	prepare func(ctx context.Context) error
	// freeze holds the live tree's changes, and writers returns the
	// files open for writing (taken under the freeze); nil when offline.
	freeze  func() (thaw func())
	writers func() []fs.Touch
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
	if s.prepare != nil {
		if err := s.prepare(ctx); err != nil {
			return index.Snapshot{}, fmt.Errorf("snapshot %q: record pending changes: %w", name, err)
		}
	}
	done := s.hold()
	defer done() // a failed build: its error is the one to tell
	var writers []fs.Touch
	if s.writers != nil {
		writers = s.writers()
	}
	var snap index.Snapshot
	err := s.b.Build(ctx, s.revs, writers, func(bt *fs.Built) error {
		// The build read all it needs: writers go on while the store
		// commits the revisions it recorded, and the snapshot.
		if err := done(); err != nil {
			return fmt.Errorf("record the content of live files: %w", err)
		}
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

// hold takes the sink's lock and then freezes the live tree, for a
// build (see snapshotter); done thaws the live tree, commits the
// revisions the build recorded (lockedSink.deferring) and lets the sink
// go, once, and returns the commits' error.
//
// The order matters: the freeze waits only for operations in flight,
// which wait for nothing under their hold (fs/freeze.go), so taking the
// sink first costs the writers nothing, and once frozen, the build's
// recordings never wait for a window the recorder is storing.
func (s *snapshotter) hold() (done func() error) {
	if s.sink != nil {
		s.sink.mu.Lock()
		s.sink.deferring = true
	}
	thaw := func() {}
	if s.freeze != nil {
		thaw = s.freeze()
	}
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			thaw()
			if s.sink != nil {
				err = s.sink.commitDeferred()
				s.sink.mu.Unlock()
			}
		})
		return err
	}
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

var _ fs.TextWriter = (*snapshotter)(nil)

// WriteText implements fs.TextWriter.
func (s *snapshotter) WriteText(ctx context.Context, id index.RevID, w io.WriterAt) (bool, error) {
	ok, err := s.st.WriteText(ctx, id, w)
	return ok, wrapCorrupt(err)
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
