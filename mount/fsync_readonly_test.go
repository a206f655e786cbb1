package mount

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFsyncOfReadOnlyViews: fsync and fdatasync of the read-only views
// (.snapshots, a snapshot's directories and files, .history's
// directories, file listings and revisions) succeed, as they do for a
// file open read-only on a read-only file system: nothing of them is
// unwritten. go-fuse answers ENOTSUP for a node that does not implement
// fsync, and programs that sync what they read (coreutils `sync FILE`)
// failed on them.
func TestFsyncOfReadOnlyViews(t *testing.T) {
	l := start(t, filepath.Join(t.TempDir(), "s.dfs"))
	mustDo(t, os.MkdirAll(l.mnt+"/d", 0o755))
	mustDo(t, os.WriteFile(l.mnt+"/d/f", []byte("one\n"), 0o644))
	mustDo(t, os.Mkdir(l.mnt+"/.snapshots/s1", 0o755))
	hist, err := os.ReadDir(l.mnt + "/.history/d/f")
	mustDo(t, err)
	if len(hist) == 0 {
		t.Fatal(".history/d/f lists no revision")
	}
	paths := []string{
		".snapshots", ".snapshots/s1", ".snapshots/s1/d", ".snapshots/s1/d/f",
		".history", ".history/d", ".history/d/f", ".history/d/f/" + hist[0].Name(),
	}
	for _, p := range paths {
		f, err := os.Open(filepath.Join(l.mnt, p))
		if err != nil {
			t.Errorf("open %s: %v", p, err)
			continue
		}
		if err := f.Sync(); err != nil {
			t.Errorf("fsync of %s: %v", p, err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			t.Errorf("fdatasync of %s: %v", p, err)
		}
		f.Close()
	}
}
