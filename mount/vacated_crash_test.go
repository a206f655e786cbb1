package mount

import (
	"os"
	"path/filepath"
	"testing"
)

// A save that left a path and made a new file there (Vim's writebackup,
// git's rm and create), killed before the new file's change was
// recorded, still continues the path's history: the pending journal
// says which file the new one follows, and the next mount's redo binds
// it so, where it used to start a history of its own and leave the
// path's as a deleted file's, which gc then removes.
func TestKilledSaveContinuesTheHistory(t *testing.T) {
	dir := t.TempDir()
	store, mnt := filepath.Join(dir, "s.dfs"), filepath.Join(dir, "m")
	mustDo(t, os.Mkdir(mnt, 0o755))
	p := func(n string) string { return filepath.Join(mnt, n) }
	base := textOfLines(4, 2000)
	want := []string{base, base + "v2\n", base + "v2\nv3\n"}
	for _, text := range want[:2] {
		c := startCrashChild(t, store, mnt)
		for _, name := range []string{"vim", "git"} {
			writeFile(t, p(name), text)
		}
		c.term(t)
	}
	c := startCrashChild(t, store, mnt)
	mustDo(t, os.Rename(p("vim"), p("vim~")))
	mustDo(t, os.Remove(p("git")))
	for _, name := range []string{"vim", "git"} {
		writeFile(t, p(name), want[2]) // held: a new file's grace
	}
	mustDo(t, os.Remove(p("vim~")))
	killWait(t, c.Cmd, mnt)
	c = startCrashChild(t, store, mnt) // redoes the pending files
	c.term(t)
	gcStore(t, store)
	for _, name := range []string{"vim", "git"} {
		if h := historyAt(t, store, name); !equal(h, want) {
			t.Errorf("%s: %d revisions %v after the kill, the redo and gc; want the path's 3", name, len(h), lens(h))
		}
	}
}
