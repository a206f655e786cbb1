package objstore

import (
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// checkPrivate walks dir and fails for every directory or file that group
// or others may read, write or search: the segments hold every revision's
// bytes, so reaching them would bypass the live tree's permissions.
func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		n++
		// The index's files are badger's, created 0644; the index
		// directory itself is 0700, which keeps others out of them.
		inIndex := filepath.Base(filepath.Dir(p)) == "index" && !fi.IsDir()
		if fi.Mode()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o077 != 0 && !inIndex {
			t.Errorf("%s: mode %v, want no group/other bits", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("walked only %d entries of %s", n, dir)
	}
}

func TestStoreFilesArePrivate(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(map[bool]string{false: "new directory", true: "existing empty directory"}[existing], func(t *testing.T) {
			storeFilesArePrivate(t, existing)
		})
	}
}

// storeFilesArePrivate makes a store, in an empty directory of mode 0755
// made before if existing (a review found it left 0755: every user could
// read the live files under it, mount or no mount), fills it, and checks
// that everything in it is private, also after a repack.
func storeFilesArePrivate(t *testing.T, existing bool) {
	old := syscall.Umask(0o022) // the common umask, which leaves 0644/0755 as asked
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "store")
	if existing {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(dir, Config{Create: true, SegmentSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	id := mustNewFile(t, s, "secret")
	var prev = mustPut(t, s, PutRequest{File: id, Data: []byte("secret text\n")}).ID()
	for i := range 20 {
		prev = mustPut(t, s, PutRequest{File: id, Data: genText(rand.New(rand.NewPCG(uint64(i), 7)), 3000), P1: prev}).ID()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*"))
	if len(segs) < 2 {
		t.Fatalf("want several segments, got %v", segs)
	}
	checkPrivate(t, dir)
	mustRepack(t, dir, RepackOptions{Reuse: ReuseNever, MaxChain: 8, Jobs: 1})
	checkPrivate(t, dir)
}

func TestOpenTightensOldSegmentsDir(t *testing.T) {
	s0, dir := openNew(t, Config{})
	if err := s0.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "segments")
	// A store written before the fix: segments/ searchable by everyone.
	if err := os.Chmod(seg, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("segments/ is %v after a writable open, want drwx------", fi.Mode())
	}
}
