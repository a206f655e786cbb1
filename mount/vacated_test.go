package mount

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/objstore"
)

// textOfLines returns n lines of text that compress little (a fulltext
// of it costs most of its size), distinct per seed.
func textOfLines(seed uint64, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "line %05d %x\n", i, testutil.Bytes(seed*100_000+uint64(i), 16))
	}
	return b.String()
}

// entriesAt returns the entries of the store file the live file at rel
// (in the unmounted store) maps to, oldest first.
func entriesAt(t *testing.T, store, rel string) []index.Entry {
	t.Helper()
	var out []index.Entry
	eachRevisionAt(t, store, rel, func(_ *objstore.Store, e index.Entry) error {
		out = append(out, e)
		return nil
	})
	return out
}

// checkContinued checks that the last of es is a small delta on its
// predecessor (not a fulltext of the new file) and that no revision's
// time goes before its first parent's.
func checkContinued(t *testing.T, rel string, es []index.Entry) {
	t.Helper()
	last := es[len(es)-1]
	if last.P1 != es[len(es)-2].ID() {
		t.Errorf("%s: last revision's first parent %v, want %v", rel, last.P1, es[len(es)-2].ID())
	}
	if last.Size < 60_000 || last.Stored > 2048 {
		t.Errorf("%s: last revision stores %d bytes for %d: want a small delta", rel, last.Stored, last.Size)
	}
	checkTimes(t, rel, es)
}

// checkTimes checks that revision times never go back.
func checkTimes(t *testing.T, rel string, es []index.Entry) {
	t.Helper()
	for i := 1; i < len(es); i++ {
		if es[i].Time < es[i-1].Time {
			t.Errorf("%s: revision %d at %v, before revision %d at %v", rel, i, time.Unix(0, es[i].Time), i-1, time.Unix(0, es[i-1].Time))
		}
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// vimSave is what Vim's default save does (writebackup, backupcopy=auto:
// strace shows it): rename the file to f~, create a new f, write and
// fsync it, unlink f~.
func vimSave(t *testing.T, p, content string) {
	t.Helper()
	if err := os.Rename(p, p+"~"); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p + "~"); err != nil {
		t.Fatal(err)
	}
}

// An editor's save that moves the original away (or unlinks it) and
// creates a new file at its path continues the original's history, as
// a small delta; the original's revisions stay on the path, and gc keeps
// them. Vim itself when installed, its syscalls always.
func TestVimSaveContinuesTheHistory(t *testing.T) {
	for _, how := range []string{"syscalls", "vim"} {
		t.Run(how, func(t *testing.T) {
			vim, err := exec.LookPath("vim")
			if how == "vim" && err != nil {
				t.Skip("no vim installed; the syscalls case runs its sequence")
			}
			store := filepath.Join(t.TempDir(), "s.dfs")
			l := start(t, store)
			p := filepath.Join(l.mnt, "notes.txt")
			base := textOfLines(1, 2000)
			writeFile(t, p, base)
			l.recorded(t, 1)
			appendFile(t, p, "p2\n")
			l.recorded(t, 2)
			want := []string{base, base + "p2\n", base + "p2\np3\n"}
			if how == "vim" {
				// No cmd.Dir in the mount: the child's chdir before its exec
				// needs this process's FUSE server, which a vfork with
				// GOMAXPROCS=1 keeps from running (a deadlock).
				cmd := exec.Command(vim, "-u", "NONE", "-i", "NONE", "-N", "-e", "-s", "-c", "set backupskip=", "-c", "normal Gop3", "-c", "wq", p)
				cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("vim: %v: %s", err, out)
				}
			} else {
				vimSave(t, p, want[2])
			}
			if _, err := os.Stat(p + "~"); !os.IsNotExist(err) {
				t.Fatalf("the backup is still there: %v", err)
			}
			if _, got := history(t, l.mnt, "notes.txt"); !equal(got, want) {
				t.Fatalf(".history/notes.txt: %d revisions, want the 3 of the path", len(got))
			}
			l.stop(t)
			checkContinued(t, "notes.txt", entriesAt(t, store, "notes.txt"))
			gcStore(t, store)
			if h := historyAt(t, store, "notes.txt"); !equal(h, want) {
				t.Errorf("after gc, notes.txt has %d revisions, want 3", len(h))
			}
		})
	}
}

// gcStore runs the garbage collector as "deltafs gc" does.
func gcStore(t *testing.T, store string) {
	t.Helper()
	_, err := objstore.GC(context.Background(), store, objstore.GCOptions{Live: func() (map[index.FileID]bool, error) { return LiveFiles(store) }})
	if err != nil {
		t.Fatal(err)
	}
}

// git checkout unlinks a file it changes and creates it again (O_EXCL):
// the new file continues the path's history.
func TestGitCheckoutContinuesTheHistory(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		testutil.SkipOrFail(t, "no git installed")
	}
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	git := func(args ...string) {
		t.Helper()
		// -C, not cmd.Dir: see TestVimSaveContinuesTheHistory
		cmd := exec.Command(gitBin, append([]string{"-C", l.mnt, "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	p := filepath.Join(l.mnt, "f")
	v1 := textOfLines(2, 2000)
	writeFile(t, p, v1)
	l.recorded(t, 1) // not merged with the next change (a new file's grace)
	git("init", "-q")
	git("add", "f")
	git("commit", "-q", "-m", "1")
	appendFile(t, p, "edit\n")
	git("commit", "-q", "-a", "-m", "2")
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	git("checkout", "-q", "HEAD~1")
	want := []string{v1, v1 + "edit\n", v1}
	if _, got := history(t, l.mnt, "f"); !equal(got, want) {
		t.Fatalf(".history/f: %d revisions, want 3: %v", len(got), lens(got))
	}
	l.stop(t)
	es := entriesAt(t, store, "f")
	if last := es[len(es)-1]; last.Stored > 2048 || last.P1 != es[1].ID() {
		t.Errorf("checked-out f stores %d bytes, first parent %v: want a small delta or a dedup on %v", last.Stored, last.P1, es[1].ID())
	}
	checkTimes(t, "f", es)
	gcStore(t, store)
	if h := historyAt(t, store, "f"); !equal(h, want) {
		t.Errorf("after gc, f has %d revisions, want 3", len(h))
	}
}

// A path left empty is not always a save's: each case keeps the
// histories where they belong.
func TestVacatedPathsDoNotMisfire(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := func(n string) string { return filepath.Join(l.mnt, n) }
	for _, d := range []string{"d"} {
		if err := os.Mkdir(p(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, p("a"), "a1\n")
	writeFile(t, p("b"), "b1\n")
	writeFile(t, p("d/x"), "x1\n")
	writeFile(t, p("g"), "g1\n")
	writeFile(t, p("h"), "h1\n")
	writeFile(t, p("e"), "e1\n")
	l.recorded(t, 6)
	appendFile(t, p("a"), "a2\n")
	l.recorded(t, 7)

	// renamed away and still there: the new file continues the path's
	// history, the moved one keeps a fork of it
	if err := os.Rename(p("a"), p("a.old")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p("a"), "a1\na2\na3\n")
	// renamed away and changed there: a file of its own, the new one too
	if err := os.Rename(p("b"), p("b2")); err != nil {
		t.Fatal(err)
	}
	appendFile(t, p("b2"), "more\n")
	l.recorded(t, 9) // b2's change reported (its release is asynchronous) before b is made
	writeFile(t, p("b"), "new b\n")
	// a directory renamed: its files went along, a new one starts afresh
	if err := os.Rename(p("d"), p("d2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p("d/x"), "x new\n")
	// the path taken by a link to another file: that file's history
	if err := os.Remove(p("h")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(p("g"), p("h")); err != nil {
		t.Fatal(err)
	}
	appendFile(t, p("h"), "g2\n")
	// a file made after the window: a new file
	l.rec.mu.Lock()
	l.rec.vac.window = 50 * time.Millisecond
	l.rec.mu.Unlock()
	if err := os.Remove(p("e")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	writeFile(t, p("e"), "e new\n")
	l.recorded(t, 13)

	for rel, want := range map[string][]string{
		"a": {"a1\n", "a1\na2\n", "a1\na2\na3\n"}, "a.old": {"a1\na2\n"},
		"b": {"new b\n"}, "b2": {"b1\n", "b1\nmore\n"},
		"d/x": {"x new\n"}, "d2/x": {"x1\n"},
		"h": {"g1\n", "g1\ng2\n"}, "g": {"g1\n", "g1\ng2\n"},
		"e": {"e new\n"},
	} {
		if _, got := history(t, l.mnt, rel); !equal(got, want) {
			t.Errorf(".history/%s: %q, want %q", rel, got, want)
		}
	}
	l.stop(t)
	a, old := entriesAt(t, store, "a"), entriesAt(t, store, "a.old")
	if len(a) == 3 && len(old) == 1 && (old[0].P2 != a[1].ID() || old[0].Stored > 100 || old[0].Base.IsNull()) {
		t.Errorf("a.old's revision: second parent %v, %d bytes stored on %v; want a dedup of (or a copy delta on) %v", old[0].P2, old[0].Stored, old[0].Base, a[1].ID())
	}
}

// A revision's time never goes before its first parent's: an atomic save
// right after a change (sed -i) recorded the temp file's content with
// the time it was read at, before the original's change was.
func TestSavedRevisionTimesDoNotGoBack(t *testing.T) {
	sed, err := exec.LookPath("sed")
	if err != nil {
		testutil.SkipOrFail(t, "no sed installed")
	}
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	names := []string{"t0", "t1", "t2"}
	for _, n := range names {
		p := filepath.Join(l.mnt, n)
		writeFile(t, p, "one\n")
		appendFile(t, p, "two\n")
		if out, err := exec.Command(sed, "-i", "s/one/ONE/", p).CombinedOutput(); err != nil {
			t.Fatalf("sed: %v: %s", err, out)
		}
	}
	for _, n := range names { // waits for the file's changes to be recorded
		if _, got := history(t, l.mnt, n); len(got) < 2 || got[len(got)-1] != "ONE\ntwo\n" {
			t.Errorf(".history/%s: %q, want the saved text last", n, got)
		}
	}
	l.stop(t)
	for _, n := range names {
		checkTimes(t, n, entriesAt(t, store, n))
	}
}

// The vacated paths are bounded, expire, and forget a file that moved on.
func TestVacatedMemory(t *testing.T) {
	id := func(i int) fs.FileID { return fs.FileID{byte(i), byte(i >> 8), 1} }
	now := time.Now()
	v := vacated{window: time.Minute}
	for i := range 3 * maxVacated {
		v.left(fmt.Sprint(i), id(i), 0, "", now)
	}
	if len(v.byPath) != maxVacated || len(v.byID) != maxVacated || len(v.order) > 2*maxVacated {
		t.Fatalf("%d paths, %d ids, %d keys kept, want at most %d", len(v.byPath), len(v.byID), len(v.order), maxVacated)
	}
	if _, ok := v.take("0", id(99), 0, now); ok {
		t.Error("the oldest path is still remembered past the cap")
	}
	last := fmt.Sprint(3*maxVacated - 1)
	if _, ok := v.take(last, id(3*maxVacated-1), 0, now); ok {
		t.Error("a file succeeds itself")
	}
	if e, ok := v.take(last, id(5), 0, now); !ok || e.id != id(3*maxVacated-1) {
		t.Errorf("take %s: %v %v", last, e, ok)
	}
	if _, ok := v.take(last, id(5), 0, now); ok {
		t.Error("a path taken twice")
	}
	for range 5 * maxVacated { // one path vacated again and again
		v.left("same", id(7), 0, "", now)
	}
	if len(v.order) > 2*maxVacated+1 {
		t.Errorf("%d keys kept for %d paths", len(v.order), len(v.byPath))
	}
	v.left("later", id(8), 0, "elsewhere", now.Add(2*time.Minute))
	if _, ok := v.take("same", id(9), 0, now.Add(2*time.Minute)); ok || len(v.byPath) != 1 {
		t.Errorf("expired paths kept: %d", len(v.byPath))
	}
	v.changed(id(8))
	if _, ok := v.take("later", id(9), 0, now.Add(2*time.Minute)); ok {
		t.Error("a file changed after it left is still taken for a save's original")
	}
	v.left("dir/a", id(10), 0, "", now)
	v.left("dir/b/c", id(11), 0, "", now)
	v.left("dirx", id(12), 0, "", now)
	v.movedDir("dir")
	if len(v.byPath) != 1 || v.byID[id(12)] != "dirx" {
		t.Errorf("after a directory rename: %v", v.byPath)
	}
}

func lens(ss []string) []int {
	var n []int
	for _, s := range ss {
		n = append(n, len(s))
	}
	return n
}

// A snapshot taken while the new file of such a save is still open for
// writing (Vim's writebackup, git's rm and create) records it in the
// history of the file that left its path, as its close would have: the
// path keeps its whole history, through the snapshot, the close and gc.
func TestSnapshotDuringSaveContinuesTheHistory(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := func(n string) string { return filepath.Join(l.mnt, n) }
	base := textOfLines(3, 2000)
	for i, name := range []string{"vim", "git"} {
		writeFile(t, p(name), base)
		l.recorded(t, uint64(2*i+1)) // not merged with the next change (a new file's grace)
		appendFile(t, p(name), "v2\n")
		l.recorded(t, uint64(2*i+2))
	}
	mustDo(t, os.Rename(p("vim"), p("vim~")))
	mustDo(t, os.Remove(p("git")))
	var open []*os.File
	for _, name := range []string{"vim", "git"} {
		f, err := os.OpenFile(p(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		mustDo(t, err)
		_, err = f.WriteString(base + "v2\nv3\n")
		mustDo(t, err)
		open = append(open, f)
	}
	mustDo(t, os.Mkdir(p(".snapshots/during"), 0o755))
	for _, f := range open {
		mustDo(t, f.Close())
	}
	mustDo(t, os.Remove(p("vim~")))
	l.recorded(t, 6)
	want := []string{base, base + "v2\n", base + "v2\nv3\n"}
	for _, name := range []string{"vim", "git"} {
		if _, got := history(t, l.mnt, name); !equal(got, want) {
			t.Errorf(".history/%s: %d revisions %v, want the path's 3", name, len(got), lens(got))
		}
		if got, err := os.ReadFile(p(".snapshots/during/" + name)); err != nil || string(got) != want[2] {
			t.Errorf("the snapshot's %s: %d bytes (%v), want the new content", name, len(got), err)
		}
	}
	l.stop(t)
	gcStore(t, store)
	for _, name := range []string{"vim", "git"} {
		if h := historyAt(t, store, name); !equal(h, want) {
			t.Errorf("after gc, %s has %d revisions, want 3", name, len(h))
		}
	}
}

// Emacs's save (its default backup by renaming): f is renamed over the
// backup f~ left by an earlier session, and a new f is written. The new
// file continues f's history, and f~ keeps a fork of it, as when no
// backup was there. A young file renamed over another (an atomic save's
// temp file) still leaves no path behind.
func TestBackupRenameOverContinuesTheHistory(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := func(n string) string { return filepath.Join(l.mnt, n) }
	writeFile(t, p("f"), "v1\n")
	l.recorded(t, 1)
	appendFile(t, p("f"), "v2\n")
	writeFile(t, p("f~"), "an old backup\n")
	l.recorded(t, 3)
	// f is old: its history began before the save windows
	l.rec.mu.Lock()
	l.rec.births.window = 0
	l.rec.mu.Unlock()
	ls := l.rec.sink.(journalSink).ls
	ls.mu.Lock()
	ls.sink.saveWindow = 0
	ls.mu.Unlock()
	mustDo(t, os.Rename(p("f"), p("f~")))
	writeFile(t, p("f"), "v1\nv2\nv3\n")
	l.recorded(t, 4)
	if _, got := history(t, l.mnt, "f"); !equal(got, []string{"v1\n", "v1\nv2\n", "v1\nv2\nv3\n"}) {
		t.Errorf(".history/f: %q, want f's whole history", got)
	}
	if _, got := history(t, l.mnt, "f~"); !equal(got, []string{"v1\nv2\n"}) {
		t.Errorf(".history/f~: %q, want the backup, a fork of f's", got)
	}
	l.stop(t)
	gcStore(t, store)
	if h := historyAt(t, store, "f"); len(h) != 3 {
		t.Errorf("after gc, f has %d revisions, want 3", len(h))
	}
}

// A snapshot of a save's new file, still open, whose predecessor's last
// change was recorded after the new file was written (the recorder was
// busy), holds the new file's content: that the new file's stat predates
// the predecessor's newest revision says nothing about their contents,
// which the snapshot compares instead (it used to name the predecessor's
// revision for a new file of the same size).
func TestSnapshotDuringSaveComparesContent(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := func(n string) string { return filepath.Join(l.mnt, n) }
	a, b, c := strings.Repeat("a", 1000), strings.Repeat("b", 1000), strings.Repeat("c", 1000)
	writeFile(t, p("f"), a)
	l.recorded(t, 1)
	ls := l.rec.sink.(journalSink).ls
	ls.mu.Lock() // the recorder is busy
	writeFile(t, p("f"), b)
	l.reported(t, 2)
	mustDo(t, os.Rename(p("f"), p("f.bak")))
	nf, err := os.OpenFile(p("f"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	mustDo(t, err)
	defer nf.Close()
	_, err = nf.WriteString(c)
	mustDo(t, err)
	time.Sleep(3 * ctimeSlack)
	ls.mu.Unlock() // b is recorded now, after c was written
	mustDo(t, os.Mkdir(p(".snapshots/s"), 0o755))
	if got, err := os.ReadFile(p(".snapshots/s/f")); err != nil || string(got) != c {
		t.Fatalf("the snapshot's f: %.10q... (%v), want the new file's content", got, err)
	}
	if got, err := os.ReadFile(p(".snapshots/s/f.bak")); err != nil || string(got) != b {
		t.Fatalf("the snapshot's f.bak: %.10q... (%v), want the old file's", got, err)
	}
}

// A save whose temp file was recorded before it was renamed to the path
// its original had just left (JetBrains' safe write: the temp file
// written and closed, f renamed to f~ or removed, the temp file renamed
// to f, with more than the new-file grace between the close and the
// renames) continues f's history, as a temp file renamed over f does:
// the temp file's revision becomes f's next (a dedup of it, no data
// stored again), and an original still there keeps a fork of its own.
// The path's history restarted at the temp file's content (a user
// review).
func TestRecordedTempFileRenamedToVacatedPath(t *testing.T) {
	for _, how := range []string{"backup", "remove", "over"} {
		t.Run(how, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "s.dfs")
			l := start(t, store)
			p := func(n string) string { return filepath.Join(l.mnt, n) }
			v1 := textOfLines(1, 2000)
			v2 := v1 + "one more line\n"
			writeFile(t, p("f"), v1)
			l.recorded(t, 1)
			writeFile(t, p("f.new"), v2)
			if _, got := history(t, l.mnt, "f.new"); !equal(got, []string{v2}) { // recorded: past the grace
				t.Fatalf(".history/f.new: %d revisions", len(got))
			}
			if how == "backup" {
				mustDo(t, os.Rename(p("f"), p("f~")))
			} else if how == "remove" {
				mustDo(t, os.Remove(p("f")))
			}
			mustDo(t, os.Rename(p("f.new"), p("f")))
			if names, got := history(t, l.mnt, "f"); !equal(got, []string{v1, v2}) {
				t.Errorf(".history/f: %d revisions (%v %v), want the 2 of the path", len(got), lens(got), names)
			}
			if how == "backup" {
				if _, got := history(t, l.mnt, "f~"); !equal(got, []string{v1}) {
					t.Errorf(".history/f~: %d revisions, want the original's, a fork of f's", len(got))
				}
			}
			l.stop(t)
			es := entriesAt(t, store, "f")
			if len(es) != 2 || es[1].P1 != es[0].ID() || es[1].Stored > 2048 {
				t.Errorf("f's revisions in the store: %+v, want 2, the second a small one on the first", es)
			}
		})
	}
}
