package mount

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// historyAt returns the revisions of the store file the live file at
// rel (in the unmounted store) maps to, oldest first.
func historyAt(t *testing.T, store, rel string) []string {
	t.Helper()
	var out []string
	eachRevisionAt(t, store, rel, func(st *objstore.Store, e index.Entry) error {
		b, err := st.Get(context.Background(), e.ID())
		out = append(out, string(b))
		return err
	})
	return out
}

// eachRevisionAt calls fn, oldest first, with each revision of the
// store file the live file at rel (in the unmounted store) maps to.
func eachRevisionAt(t *testing.T, store, rel string, fn func(*objstore.Store, index.Entry) error) {
	t.Helper()
	fid, ok := storeIDs(t, store)[liveID(filepath.Join(store, liveDir, rel))]
	if !ok {
		t.Fatalf("%s: no store file", rel)
	}
	st, err := objstore.Open(store, objstore.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.Revisions(context.Background(), fid, func(e index.Entry) error { return fn(st, e) })
	if err != nil {
		t.Fatal(err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// An atomic save over a file whose inode lives on (a hard link to it, or
// a descriptor kept open) gives the path the file's history; the old
// inode starts a history of its own (at once where a hard link in the
// rename's directories names it, else at its next change) and its
// changes are never recorded over the saved content (they were:
// "bbb\nccc\n", a text no file ever held, in history and in snapshots).
func TestAtomicSaveOverALinkedFileForksTheOldInode(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := func(n string) string { return filepath.Join(l.mnt, n) }
	if err := os.WriteFile(p("s1"), []byte("aaa\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("r"), []byte("orig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.recorded(t, 2)
	if err := os.Link(p("s1"), p("s2")); err != nil {
		t.Fatal(err)
	}
	kept, err := os.OpenFile(p("r"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"s1", "r"} { // atomic saves, quick
		if err := os.WriteFile(p(f+".tmp"), []byte("new "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p(f+".tmp"), p(f)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(p("s2"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("ccc\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := kept.WriteString("after\n"); err != nil {
		t.Fatal(err)
	}
	kept.Close()
	if err := os.Mkdir(p(".snapshots/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"s1": "new s1\n", "s2": "aaa\nccc\n", "r": "new r\n"} {
		if b, err := os.ReadFile(p(".snapshots/x/" + name)); err != nil || string(b) != want {
			t.Errorf("snapshot of %s: %q (%v), want %q", name, b, err, want)
		}
	}
	l.stop(t)
	if h := historyAt(t, store, "s1"); !equal(h, []string{"aaa\n", "new s1\n"}) {
		t.Errorf("s1's history %q", h)
	}
	if h := historyAt(t, store, "r"); !equal(h, []string{"orig\n", "new r\n"}) {
		t.Errorf("r's history %q", h)
	}
	if h := historyAt(t, store, "s2"); !equal(h, []string{"aaa\n", "aaa\nccc\n"}) {
		t.Errorf("s2's history %q, want its fork at the save, then its change", h)
	}
	// r's old inode, changed through the kept descriptor with no name
	// left, forked into a deleted file named by the path it had (it was
	// named "", which --id without a path could not reach).
	var names []string
	for _, d := range deletedPaths(t, connect(t, store, false), "") {
		names = append(names, string(d.Path))
	}
	if !equal(names, []string{"r"}) {
		t.Errorf("deleted files %q, want r's old inode as r", names)
	}
}

// A temp file recorded on its own (closed longer than the new-file
// grace before the rename) and renamed over a file still continues that
// file's history when it is young (saveWindow); an older file renamed
// over another keeps its own ("mv a b").
func TestSlowAtomicSaveContinuesTheHistory(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := func(n string) string { return filepath.Join(l.mnt, n) }
	write := func(n, s string) {
		t.Helper()
		if err := os.WriteFile(p(n), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("f", "v1\n")
	write("b", "b1\n")
	write("a", "a1\n")
	l.recorded(t, 3)
	write("f", "v2\n")
	write("f.new", "v2\nv3\n")
	l.recorded(t, 5) // f.new has a history of its own now
	if err := os.Rename(p("f.new"), p("f")); err != nil {
		t.Fatal(err)
	}
	if err := l.rec.Sync(context.Background()); err != nil { // the save's rename is recorded
		t.Fatal(err)
	}
	ls := l.rec.sink.(journalSink).ls
	ls.mu.Lock()
	ls.sink.saveWindow = 0 // a is old: "mv a b" carries a's history to b
	ls.mu.Unlock()
	if err := os.Rename(p("a"), p("b")); err != nil {
		t.Fatal(err)
	}
	l.stop(t)
	if h := historyAt(t, store, "f"); !equal(h, []string{"v1\n", "v2\n", "v2\nv3\n"}) {
		t.Errorf("f's history %q, want v1, v2 and the saved v3", h)
	}
	if h := historyAt(t, store, "b"); !equal(h, []string{"a1\n"}) {
		t.Errorf("b's history %q, want a's", h)
	}
}
