package fs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/internal/testutil/crashfs"
)

// TestFsyncDirDurable: an fsync of a directory of the mount, the root
// included, fsyncs the live directory: with the live directory on
// crashfs (a name is durable at its directory's fsync), files created
// and fsynced in the root and in a subdirectory, with both directories
// fsynced, survive a power cut, and a file whose directory was not
// fsynced after its creation does not (the model is in force). The
// root's fsync failed with EOPNOTSUPP before rootDir.Fsyncdir.
func TestFsyncDirDurable(t *testing.T) {
	testutil.RequireFUSE(t)
	cfs := crashfs.MountT(t, crashfs.Options{})
	live := filepath.Join(cfs.Dir(), "live")
	if err := os.Mkdir(live, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{LiveDir: live})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mnt, _ := testutil.Mount(t, f.Root(), Options(false))
	sync := func(p string) {
		t.Helper()
		fd, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer fd.Close()
		if err := fd.Sync(); err != nil {
			t.Fatalf("fsync %s: %v", p, err)
		}
	}
	write := func(p string, data []byte) {
		t.Helper()
		w, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(mnt, "a"), []byte("root file"))
	write(filepath.Join(mnt, "d", "b"), []byte("file in d"))
	sync(filepath.Join(mnt, "d"))
	sync(mnt)
	sync(cfs.Dir()) // live's own name, outside the mount
	write(filepath.Join(mnt, "late"), []byte("its name never fsynced"))
	cfs.CrashT(t)
	img := cfs.MaterializeT(t)
	for name, want := range map[string]string{"a": "root file", "d/b": "file in d"} {
		if got, err := os.ReadFile(filepath.Join(img, "live", name)); err != nil || !bytes.Equal(got, []byte(want)) {
			t.Errorf("%s after the power cut: %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(img, "live", "late")); !os.IsNotExist(err) {
		t.Errorf("late after the power cut: %v; want it gone (its directory was not fsynced after its creation)", err)
	}
}
