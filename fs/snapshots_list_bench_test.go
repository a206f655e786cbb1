package fs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
)

// listedSnaps serves a fixed list of snapshots from memory, as the
// mount's snapshotter does from its cache once it has listed the store
// (the store's own listing is objstore's BenchmarkSnapshotList).
type listedSnaps struct {
	list   []index.Snapshot
	byName map[string]index.Snapshot
}

var errNotHere = errors.New("not served by this benchmark")

func (l *listedSnaps) List(context.Context) ([]index.Snapshot, error) { return l.list, nil }
func (l *listedSnaps) Get(_ context.Context, name string) (index.Snapshot, error) {
	if s, ok := l.byName[name]; ok {
		return s, nil
	}
	return index.Snapshot{}, index.ErrNotFound
}
func (l *listedSnaps) Create(context.Context, string) (index.Snapshot, error) {
	return index.Snapshot{}, errNotHere
}
func (l *listedSnaps) Delete(context.Context, string) error         { return errNotHere }
func (l *listedSnaps) Rename(context.Context, string, string) error { return errNotHere }
func (l *listedSnaps) Tree(context.Context, index.TreeHash) (*index.Tree, error) {
	return &index.Tree{}, nil
}
func (l *listedSnaps) Read(context.Context, index.RevID) ([]byte, error) { return nil, errNotHere }

// BenchmarkListSnapshots is M4's "ls .snapshots" with 10,000 snapshots:
// a readdir of the mounted .snapshots directory (ls without -l), and one
// that stats every entry as well (ls -l).
func BenchmarkListSnapshots(b *testing.B) {
	testutil.RequireFUSE(b)
	l := &listedSnaps{byName: map[string]index.Snapshot{}}
	for i := range 10000 {
		s := index.Snapshot{ID: index.SnapshotID(i + 1), Name: fmt.Sprintf("auto-%05d", i), Time: time.Now().UnixNano(),
			Root: index.TreeEntry{Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Ino: 2}}
		l.list = append(l.list, s)
		l.byName[s.Name] = s
	}
	mnt, _ := testutil.Mount(b, fs.NewSnapshotsDir(l, nil), nil)
	b.Run("readdir", func(b *testing.B) {
		for b.Loop() {
			ents, err := os.ReadDir(mnt)
			if err != nil || len(ents) != 10000 {
				b.Fatal(len(ents), err)
			}
		}
	})
	b.Run("readdir+stat", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open(mnt)
			if err != nil {
				b.Fatal(err)
			}
			names, err := f.Readdirnames(-1)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			for _, n := range names {
				var st syscall.Stat_t
				if err := syscall.Lstat(mnt+"/"+n, &st); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
