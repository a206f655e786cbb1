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
	c := connect(t, l.mnt, false)
	for _, f := range []struct {
		path string
		revs int
		want []byte
	}{{"x", 1, one}, {"y", 2, two}} {
		lg, err := c.Log(ctx, Target{Path: f.path})
		if err != nil || len(lg.Revisions) != f.revs {
			t.Fatalf("log %s: %q, %v; want %d revisions", f.path, revNums(lg), err, f.revs)
		}
		if _, data, err := c.Cat(ctx, Target{Path: f.path}, RevSpec{}); err != nil || !bytes.Equal(data, f.want) {
			t.Fatalf("cat %s: %q, %v; want %q", f.path, data, err, f.want)
		}
	}
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
