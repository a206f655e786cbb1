package objstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestGCFullDisk runs gc on a store in a small filesystem (32 MiB) filled to
// leave too little room for the kept revisions' rewrite: gc fails with
// ENOSPC and removes its shadow (a failed run's shadow was left behind,
// and the next run resumed it, failed the same way and grew it); twice,
// the free space not shrinking. The store still verifies, and gc
// succeeds once there is room.
func TestGCFullDisk(t *testing.T) {
	fsdir := testutil.LoopFS(t, 128<<20) // the index keeps 19 MiB of logs allocated (index/space.go)
	dir := filepath.Join(fsdir, "store")
	live := fullDiskStore(t, dir)
	opt := GCOptions{Live: func() (map[index.FileID]bool, error) { return live, nil }}
	// Room for the store's index and its shadow's (index/space.go keeps
	// their logs allocated, 19 MiB each, and wants a reserve), not for
	// the rewrite: gc fails at the shadow's commit. (From 20 to 32 MiB
	// it fails at the store's index instead, before its shadow; from 44
	// it succeeds.)
	filler := fillDisk(t, fsdir, 38<<20)
	ctx := context.Background()
	var free uint64
	for i := range 2 {
		_, err := GC(ctx, dir, opt)
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("gc %d on a full disk: %v, want ENOSPC", i, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, shadowName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("gc %d left its shadow %s behind (%v)", i, shadowName, err)
		}
		now := freeBytes(t, fsdir)
		if i > 0 && now < free {
			t.Errorf("free space after gc %d: %d bytes, %d after the one before", i, now, free)
		}
		free = now
	}
	verifyDir(t, dir, true) // a writable open refuses on a full disk (index/space.go)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	rep, err := GC(ctx, dir, opt)
	if err != nil || rep.Removed == 0 {
		t.Fatalf("gc with room: %+v, %v", rep, err)
	}
	verifyDir(t, dir, false)
}

// fullDiskStore writes 10 files of 1 MiB of random bytes, in segments of
// 4 MiB, and returns the live files: all but the first, whose revision
// gc removes (so it rewrites the first segment and the others' records
// stored after it: the whole store).
func fullDiskStore(t *testing.T, dir string) map[index.FileID]bool {
	s, err := Open(dir, Config{Create: true, SegmentSize: 4 << 20, FastFulltexts: true})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{1})
	ids := make([]index.FileID, 10)
	live := map[index.FileID]bool{}
	for i := range ids {
		if ids[i], err = s.NewFile("f"); err != nil {
			t.Fatal(err)
		}
		live[ids[i]] = i > 0
	}
	for _, id := range ids {
		data := make([]byte, 1<<20)
		rng.Read(data)
		if _, err := s.Put(context.Background(), PutRequest{File: id, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return live
}

// fillDisk writes a file in dir that leaves about keep bytes free, and
// returns its path.
func fillDisk(t *testing.T, dir string, keep uint64) string {
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for freeBytes(t, dir) > keep+uint64(len(buf)) {
		if _, err := f.Write(buf); errors.Is(err, syscall.ENOSPC) {
			break // ext4 keeps some blocks from everyone (for unwritten extents)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return p
}

func freeBytes(t *testing.T, dir string) uint64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bfree * uint64(st.Bsize)
}

// verifyDir opens the store in dir and verifies it: no problem.
func verifyDir(t *testing.T, dir string, readOnly bool) {
	t.Helper()
	s, err := Open(dir, Config{ReadOnly: readOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	verifyClean(t, s)
}
