package fs_test

import (
	"context"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// snapEnv is a live directory, a real store and a TreeBuilder, wired the
// way a mount wires them, so that the snapshot view and the builder are
// tested without the live tree's FUSE nodes.
type snapEnv struct {
	t    testing.TB
	live string
	st   *objstore.Store
	b    *fs.TreeBuilder
	revs *storeRevs
	last fs.BuildStats
}

func newSnapEnv(t testing.TB) *snapEnv {
	t.Helper()
	st, err := objstore.Open(t.TempDir(), objstore.Config{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	live := t.TempDir()
	return &snapEnv{t: t, live: live, st: st, b: fs.NewTreeBuilder(live), revs: &storeRevs{st: st, known: map[uint64]knownRev{}}}
}

// storeRevs records a live file's content when its size or times changed
// since it was last recorded (the mount's recorder does this on close;
// here the live files are written behind its back).
type storeRevs struct {
	st    *objstore.Store
	mu    sync.Mutex
	known map[uint64]knownRev // by live inode
	puts  int
}

type knownRev struct {
	rev          index.RevID
	size         int64
	mtime, ctime syscall.Timespec
}

// Tree lets builds keep unchanged entries, as the mount's does.
func (r *storeRevs) Tree(ctx context.Context, h index.TreeHash) (*index.Tree, error) {
	return r.st.Tree(h)
}

func (r *storeRevs) Revision(ctx context.Context, id fs.FileID, path string, size int64) (index.RevID, int64, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return index.RevID{}, 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.known[st.Ino]
	if ok && k.size == st.Size && k.mtime == st.Mtim && k.ctime == st.Ctim {
		return k.rev, k.size, nil
	}
	if size == 0 && !ok {
		return index.RevID{}, 0, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return index.RevID{}, 0, err
	}
	fid := k.rev.File
	if !ok {
		if fid, err = r.st.NewFile(path); err != nil {
			return index.RevID{}, 0, err
		}
	}
	e, err := r.st.Put(ctx, objstore.PutRequest{File: fid, Data: data, P1: k.rev})
	if err != nil {
		return index.RevID{}, 0, err
	}
	r.puts++
	r.known[st.Ino] = knownRev{rev: e.ID(), size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
	return e.ID(), int64(len(data)), nil
}

// The fs.Snapshots of the test.

func (e *snapEnv) List(ctx context.Context) ([]index.Snapshot, error) { return e.st.SnapshotList(ctx) }
func (e *snapEnv) Get(ctx context.Context, name string) (index.Snapshot, error) {
	return e.st.Snapshot(name)
}
func (e *snapEnv) Delete(ctx context.Context, name string) error { return e.st.DeleteSnapshot(name) }
func (e *snapEnv) Rename(ctx context.Context, from, to string) error {
	return e.st.RenameSnapshot(from, to)
}
func (e *snapEnv) Tree(ctx context.Context, h index.TreeHash) (*index.Tree, error) {
	return e.st.Tree(h)
}
func (e *snapEnv) Read(ctx context.Context, id index.RevID) ([]byte, error) { return e.st.Get(ctx, id) }

func (e *snapEnv) Create(ctx context.Context, name string) (index.Snapshot, error) {
	var snap index.Snapshot
	err := e.b.Build(ctx, e.revs, nil, func(bt *fs.Built) error {
		res, err := e.st.CreateSnapshot(ctx, objstore.SnapshotRequest{Name: name, Time: time.Now(), Root: bt.Root, Trees: bt.Trees})
		snap, e.last = res.Snapshot, bt.Stats
		return err
	})
	return snap, err
}

func (e *snapEnv) mustCreate(name string) fs.BuildStats {
	e.t.Helper()
	if _, err := e.Create(context.Background(), name); err != nil {
		e.t.Fatalf("snapshot %s: %v", name, err)
	}
	return e.last
}

// touchPath marks the directory holding rel (and rel itself) dirty, as
// the live tree's hooks will.
func (e *snapEnv) touchPath(rel string) {
	e.t.Helper()
	dir, node := inoOf(e.t, e.live+"/"+parentOf(rel)), inoOf(e.t, e.live+"/"+rel)
	e.b.Touch(fs.Touch{Dir: dir, Node: node})
}

// touchAll touches every node under the live directory.
func (e *snapEnv) touchAll() {
	e.t.Helper()
	filepath.WalkDir(e.live, func(p string, _ iofs.DirEntry, err error) error {
		if err == nil && p != e.live {
			e.touchPath(p[len(e.live)+1:])
		}
		return nil
	})
}

func parentOf(rel string) string {
	for i := len(rel) - 1; i >= 0; i-- {
		if rel[i] == '/' {
			return rel[:i]
		}
	}
	return ""
}

func inoOf(t testing.TB, path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		if os.IsNotExist(err) {
			return 0
		}
		t.Fatal(err)
	}
	return st.Ino
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func fmtNode(format string, a ...any) string { return fmt.Sprintf(format, a...) }
