package mount

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSaveOverOneHardLinkForksTheOther: a backup made as a hard link
// (`ln x y`, rsync --backup, perl -pi.bak) and then an atomic save over
// one of the names (`sed -i` of y) leaves the other name holding the old
// file: the saved name continues the history, and the other gets a
// history of its own at once, forked from it (it got one only at its
// next change: until then log and cat of x failed, and verify reported
// x as never recorded).
func TestSaveOverOneHardLinkForksTheOther(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(map[bool]string{false: "quick", true: "slow"}[slow], func(t *testing.T) { saveOverHardLink(t, slow) })
	}
}

// saveOverHardLink is the test above; slow: the temp file is recorded
// before its rename (a save that took its time).
func saveOverHardLink(t *testing.T, slow bool) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	ctx := context.Background()
	l := start(t, store)
	one, two := []byte("one\n"), []byte("ONE\n")
	mustDo(t, os.WriteFile(l.mnt+"/x", one, 0o644))
	l.recorded(t, 1)
	mustDo(t, os.Link(l.mnt+"/x", l.mnt+"/y"))
	mustDo(t, os.WriteFile(l.mnt+"/.y.tmp", two, 0o644))
	if slow {
		l.recorded(t, 2)
	}
	mustDo(t, os.Rename(l.mnt+"/.y.tmp", l.mnt+"/y"))
	mustDo(t, l.rec.Sync(ctx))
	checkHistories(t, connect(t, l.mnt, false), histWant{"x", 1, one}, histWant{"y", 2, two})
	l.stop(t)
	if r := verifyOffline(t, store); r.Live.Problems != 0 || r.Live.Pending != 0 {
		t.Fatalf("verify: %+v", r.Live)
	}
	for _, d := range deletedPaths(t, connect(t, store, false), "") {
		if p := string(d.Path); p == "x" || p == "y" { // (a slow save's temp file keeps its own)
			t.Fatalf("deleted file %+v: both names live", d)
		}
	}
}

// TestSaveOverHardLinkElsewhereForksIt: the same with the other name in
// a directory the save does not touch (rsync --backup --backup-dir=old:
// "ln doc old/doc", then the new doc renamed over doc; or git's way,
// doc unlinked and written again). The mount does not know where the
// other name is, and the file there kept no history: verify reported
// it as never recorded, and gc refused the store as damaged (a user
// review). It forks at once, under the name it left.
func TestSaveOverHardLinkElsewhereForksIt(t *testing.T) {
	for _, how := range []string{"rename", "slow rename", "unlink", "vim", "slow vim"} {
		t.Run(how, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "s.dfs")
			ctx := context.Background()
			l := start(t, store)
			one, two := []byte("one\n"), []byte("two\n")
			mustDo(t, os.WriteFile(l.mnt+"/doc", one, 0o644))
			l.recorded(t, 1)
			mustDo(t, os.Mkdir(l.mnt+"/old", 0o755))
			mustDo(t, os.Link(l.mnt+"/doc", l.mnt+"/old/doc"))
			switch how {
			case "unlink":
				mustDo(t, os.Remove(l.mnt+"/doc"))
				mustDo(t, os.WriteFile(l.mnt+"/doc", two, 0o644))
			case "vim", "slow vim": // writebackup: doc moved to doc~, a new doc, doc~ removed
				mustDo(t, os.Rename(l.mnt+"/doc", l.mnt+"/doc~"))
				mustDo(t, os.WriteFile(l.mnt+"/doc", two, 0o644))
				// The new doc's report, held for its grace (the kernel's
				// RELEASE may come after the next syscall: a removal of
				// doc~ before the report made the memory of vacated paths
				// forget doc, and the new doc started a history of its own)
				l.recorded(t, 2)
				if how == "slow vim" {
					mustDo(t, l.rec.Sync(ctx))
				}
				mustDo(t, os.Remove(l.mnt+"/doc~"))
			default:
				mustDo(t, os.WriteFile(l.mnt+"/.doc.tmp", two, 0o644))
				if how == "slow rename" {
					l.recorded(t, 2)
				}
				mustDo(t, os.Rename(l.mnt+"/.doc.tmp", l.mnt+"/doc"))
			}
			mustDo(t, l.rec.Sync(ctx))
			c := connect(t, l.mnt, false)
			checkHistories(t, c, histWant{"old/doc", 1, one}, histWant{"doc", 2, two})
			// The fork is named by the path it left, doc; its removal
			// from old/ names it by that path.
			mustDo(t, os.Remove(l.mnt+"/old/doc"))
			mustDo(t, l.rec.Sync(ctx))
			var deleted []string
			for _, d := range deletedPaths(t, c, "") {
				if d.Path != ".doc.tmp" { // (a slow save's temp file keeps its own)
					deleted = append(deleted, string(d.Path))
				}
			}
			if len(deleted) != 1 || deleted[0] != "old/doc" {
				t.Errorf("deleted files %q, want old/doc", deleted)
			}
			l.stop(t)
			if r := verifyOffline(t, store); r.Live.Problems != 0 || r.Live.Pending != 0 {
				t.Errorf("verify: %+v", r.Live)
			}
			gcStore(t, store)
		})
	}
}

// histWant is what log and cat of a path should give: how many
// revisions, and the newest one's content.
type histWant struct {
	path string
	revs int
	want []byte
}

// checkHistories checks log and cat of each path through c.
func checkHistories(t *testing.T, c Controller, ws ...histWant) {
	t.Helper()
	ctx := context.Background()
	for _, f := range ws {
		lg, err := c.Log(ctx, Target{Path: f.path})
		if err != nil || len(lg.Revisions) != f.revs {
			t.Errorf("log %s: %q, %v; want %d revisions", f.path, revNums(lg), err, f.revs)
			continue
		}
		if _, data, err := CatBytes(ctx, c, Target{Path: f.path}, RevSpec{}); err != nil || !bytes.Equal(data, f.want) {
			t.Errorf("cat %s: %q, %v; want %q", f.path, data, err, f.want)
		}
	}
}
