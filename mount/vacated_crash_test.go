package mount

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A save that left a path and made a new file there (Vim's writebackup,
// git's rm and create), killed before the new file's change was
// recorded, still continues the path's history: the pending journal
// says which file the new one follows, and the next mount's redo binds
// it so, where it used to start a history of its own and leave the
// path's as a deleted file's, which gc then removes.
//
// offline: gc and an offline snapshot run before the next mount. gc
// removed the path's history as a deleted file's (the journal's note of
// the file a new one continues was read by the mount's redo only), and
// an offline snapshot gave the new file a history of its own (a user
// review): gc now keeps a history the journal names as continued, and a
// command that records offline refuses until a mount has redone it.
func TestKilledSaveContinuesTheHistory(t *testing.T) {
	for _, offline := range []bool{false, true} {
		t.Run(map[bool]string{false: "mount", true: "offline"}[offline], func(t *testing.T) { killedSave(t, offline) })
	}
}

func killedSave(t *testing.T, offline bool) {
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
	if offline {
		gcStore(t, store)
		if o, err := OpenOffline(store, false, nil); err == nil {
			o.Close()
			t.Error("a store with a save to redo opened for recording offline")
		} else if !strings.Contains(err.Error(), "mount it once") {
			t.Errorf("offline open: %v", err)
		}
	}
	c = startCrashChild(t, store, mnt) // redoes the pending files
	c.term(t)
	gcStore(t, store)
	for _, name := range []string{"vim", "git"} {
		if h := historyAt(t, store, name); !equal(h, want) {
			t.Errorf("%s: %d revisions %v after the kill, the redo and gc; want the path's 3", name, len(h), lens(h))
		}
	}
}
