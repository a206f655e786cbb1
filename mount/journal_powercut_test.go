package mount

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil/crashfs"
)

// TestJournalSurvivesPowerCut: what the journal's sync made durable is
// there after a power cut (crashfs, strict model), also after a rewrite
// replaced the journal by a rename (at open, in a compaction), which is
// durable only once the store's directory is fsynced.
func TestJournalSurvivesPowerCut(t *testing.T) {
	for _, compact := range []bool{false, true} {
		fsys := crashfs.MountT(t, crashfs.Options{})
		dir := filepath.Join(fsys.Dir(), "store")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		syncPath(t, fsys.Dir())
		syncPath(t, dir)
		p := filepath.Join(dir, journalFile)
		j, err := openJournal(p, quiet())
		if err != nil {
			t.Fatal(err)
		}
		j.dirtied(fid(1), "a")
		if compact {
			j.sync()
			j.mu.Lock()
			err := j.rewriteLocked(false) // as a running mount compacts
			j.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
		}
		j.dirtied(fid(2), "b")
		j.sync()
		fsys.CrashT(t)
		j.f.Close() // the mount is gone with the power
		img := fsys.MaterializeT(t)
		j2, err := openJournal(filepath.Join(img, "store", journalFile), quiet())
		if err != nil {
			t.Fatal(err)
		}
		got := j2.entries()
		j2.close()
		for id, path := range map[fs.FileID]string{fid(1): "a", fid(2): "b"} {
			if got[id].path != path {
				t.Errorf("compact %v: synced entry %v %q lost after a power cut: pending %v", compact, id, path, got)
			}
		}
	}
}

func syncPath(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
