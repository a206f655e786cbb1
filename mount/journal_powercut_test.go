package mount

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil/crashfs"
)

// TestJournalSurvivesPowerCut: what the journal's sync made durable is
// there after a power cut (crashfs, strict model), also after a rewrite
// replaced the journal by a rename (at open, in a compaction), which is
// durable only once the store's directory is fsynced; and also when
// entries appended after the sync reach the disk torn
// (crashfs.Options.TornSeed): they are there whole or not at all.
func TestJournalSurvivesPowerCut(t *testing.T) {
	tornKept := 0
	for i := range 48 {
		compact, torn := i%2 == 1, uint64(max(i-1, 0)) // torn 0: no tearing
		fsys := crashfs.MountT(t, crashfs.Options{TornSeed: torn})
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
		j.dirtied(fid(1), "a", fs.FileID{})
		if compact {
			j.sync()
			j.mu.Lock()
			err := j.rewriteLocked(false) // as a running mount compacts
			j.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
		}
		j.dirtied(fid(2), "b", fs.FileID{})
		j.sync()
		unsynced := map[fs.FileID]map[string]bool{} // the paths written of each
		for k := range 500 {                        // ~20 KiB: sectors torn mid-entry
			id, p := fid(byte(10+k%200)), fmt.Sprintf("unsynced/%d/%s", k, strings.Repeat("x", k%40))
			j.dirtied(id, p, fs.FileID{})
			if unsynced[id] == nil {
				unsynced[id] = map[string]bool{}
			}
			unsynced[id][p] = true
		}
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
				t.Errorf("compact %v, torn %d: synced entry %v %q lost after a power cut: pending %v", compact, torn, id, path, got)
			}
		}
		kept := 0
		for id, e := range got {
			if unsynced[id][e.path] {
				kept++
			}
			if id != fid(1) && id != fid(2) && !unsynced[id][e.path] {
				t.Errorf("compact %v, torn %d: entry %v %q was never written", compact, torn, id, e.path)
			}
		}
		if torn == 0 && kept > 0 {
			t.Errorf("compact %v: %d unsynced entries survived a cut without tearing", compact, kept)
		}
		tornKept += kept
	}
	if tornKept == 0 {
		t.Errorf("no unsynced entry survived a torn cut: the test tore nothing")
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
