package mount

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

func TestExcluderMatches(t *testing.T) {
	x, err := newExcluder([]string{"*.swp", "node_modules", "build/*.o", "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]bool{
		".a.txt.swp":            true,
		"src/.main.go.swp":      true,
		"a.swp.txt":             false,
		"node_modules":          true,
		"web/node_modules/x.js": true,
		"node_modules2/x":       false,
		"build/a.o":             true,
		"build/a.c":             false,
		"build/a.o/inner":       true, // a directory it matches excludes all below
		"src/build/a.o":         false,
		"tmp/x":                 true,
		"src/tmp/x":             false,
		"a.txt":                 false,
	} {
		if got := x.excluded(rel); got != want {
			t.Errorf("excluded(%q) = %v, want %v", rel, got, want)
		}
	}
	var none *excluder
	if none.excluded("a.swp") {
		t.Error("a nil excluder excludes")
	}
}

// revisionsAt returns the contents of the revisions of the live file at
// rel in the unmounted store, oldest first: none if it has no store file.
func revisionsAt(t *testing.T, store, rel string) []string {
	t.Helper()
	if _, ok := storeIDs(t, store)[liveID(filepath.Join(store, liveDir, rel))]; !ok {
		return nil
	}
	return historyAt(t, store, rel)
}

func writeIn(t *testing.T, mnt, rel string, b []byte) {
	t.Helper()
	p := filepath.Join(mnt, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// An excluded file records no revision however often it is written, at
// this mount or at the redo of the next one; a snapshot holds it as it
// is then, which is its only history; a mount without the pattern
// records its pending change.
func TestExcludedFilesRecordNoRevisions(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	cfg := Config{Store: store, Exclude: []string{"*.swp", "build"}}
	l := startWith(t, cfg)
	writeIn(t, l.mnt, "a.txt", []byte("kept\n"))
	l.recorded(t, 1)
	for i := range 5 {
		// each write its own report: a close the kernel has not
		// released yet when the next open comes continues its session
		writeIn(t, l.mnt, ".a.txt.swp", testutil.Bytes(uint64(i), 3000))
		l.recorded(t, uint64(2+i))
	}
	writeIn(t, l.mnt, "build/out.o", []byte("object\n"))
	l.recorded(t, 7)
	l.stop(t)
	if got := revisionsAt(t, store, "a.txt"); len(got) != 1 {
		t.Fatalf("a.txt: %d revisions, want 1", len(got))
	}
	for _, rel := range []string{".a.txt.swp", "build/out.o"} {
		if got := revisionsAt(t, store, rel); len(got) != 0 {
			t.Fatalf("%s, excluded: %d revisions, want none", rel, len(got))
		}
	}

	// The next mount's redo leaves them pending; a snapshot holds them.
	l = startWith(t, cfg)
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(l.mnt, ".snapshots", "s1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string][]byte{".a.txt.swp": testutil.Bytes(4, 3000), "build/out.o": []byte("object\n")} {
		got, err := os.ReadFile(filepath.Join(l.mnt, ".snapshots", "s1", rel))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("snapshot's %s: %d bytes, %v; want the live content", rel, len(got), err)
		}
	}
	writeIn(t, l.mnt, ".a.txt.swp", []byte("after the snapshot\n"))
	l.recorded(t, 1)
	l.stop(t)
	if got := revisionsAt(t, store, ".a.txt.swp"); len(got) != 1 || got[0] != string(testutil.Bytes(4, 3000)) {
		t.Fatalf(".a.txt.swp: %d revisions, want the snapshot's alone", len(got))
	}

	// Mounted without the pattern, the pending change is recorded.
	l = startWith(t, Config{Store: store})
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.stop(t)
	if got := revisionsAt(t, store, ".a.txt.swp"); len(got) != 2 || got[1] != "after the snapshot\n" {
		t.Fatalf(".a.txt.swp without the pattern: revisions %q", got)
	}
	if got := revisionsAt(t, store, "build/out.o"); len(got) != 1 {
		t.Fatalf("build/out.o without the pattern: %d revisions, want the snapshot's", len(got))
	}
}

// A rename that takes a file out of the patterns records it: the temp
// file of an atomic save continues the saved file's history, as a small
// delta; a directory renamed away from an excluded name records the
// files in it.
func TestRenameOutOfExcludedRecords(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := startWith(t, Config{Store: store, Exclude: []string{"*.tmp", "/scratch"}})
	v1 := testutil.Bytes(7, 200_000)
	v2 := append(bytes.Clone(v1[:100_000]), append([]byte("an edit"), v1[100_000:]...)...)
	// "doc" is saved right after it was made (its first revision still
	// held back: a new file's grace), "old" long after.
	writeIn(t, l.mnt, "old", v1)
	l.recorded(t, 1)
	for _, name := range []string{"doc", "old"} {
		if name == "doc" {
			writeIn(t, l.mnt, name, v1)
		}
		writeIn(t, l.mnt, name+".tmp", v2)
		if err := os.Rename(filepath.Join(l.mnt, name+".tmp"), filepath.Join(l.mnt, name)); err != nil {
			t.Fatal(err)
		}
	}
	writeIn(t, l.mnt, "scratch/sub/r", []byte("result\n"))
	writeIn(t, l.mnt, "scratch/other.tmp", []byte("temp\n"))
	l.recorded(t, 6)
	if err := os.Rename(filepath.Join(l.mnt, "scratch"), filepath.Join(l.mnt, "results")); err != nil {
		t.Fatal(err)
	}
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.stop(t)
	for _, name := range []string{"doc", "old"} {
		if got := revisionsAt(t, store, name); len(got) != 2 || got[0] != string(v1) || got[1] != string(v2) {
			t.Fatalf("%s: %d revisions, want v1 then the saved v2", name, len(got))
		}
		var stored []uint64
		eachRevisionAt(t, store, name, func(_ *objstore.Store, e index.Entry) error {
			stored = append(stored, uint64(e.Stored))
			return nil
		})
		if stored[1] > 1000 {
			t.Errorf("%s: the saved revision stores %d bytes, want a small delta against v1 (%d bytes stored)", name, stored[1], stored[0])
		}
	}
	if got := revisionsAt(t, store, "results/sub/r"); len(got) != 1 || got[0] != "result\n" {
		t.Fatalf("results/sub/r: revisions %q, want its content", got)
	}
	if got := revisionsAt(t, store, "results/other.tmp"); len(got) != 0 {
		t.Fatalf("results/other.tmp, still excluded: revisions %q", got)
	}
}

// pendingInJournal returns the ids the store's pending journal names as
// pending, as the next mount's replay would find them.
func pendingInJournal(t *testing.T, store string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(store, journalFile))
	if err != nil {
		t.Fatal(err)
	}
	j := &journal{pending: map[fs.FileID]*pendingFile{}}
	if rest := j.replay(b); rest > 0 {
		t.Fatalf("journal ends in %d bytes of a torn record", rest)
	}
	out := map[string]bool{}
	for _, p := range j.pending {
		out[p.path] = true
	}
	return out
}

// Excluded files deleted (or replaced by a rename) during a mount leave
// the pending journal: a long session of builds that write and delete
// excluded objects does not grow it, nor the mount's memory, by every
// file it ever made. Live excluded files stay pending (snapshots read
// them); a hard link of an excluded file at an included path is still
// recorded.
func TestDeletedExcludedFilesLeaveJournal(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := startWith(t, Config{Store: store, Exclude: []string{"*.o", "node_modules"}})
	for round := range 3 {
		for i := range 100 {
			writeIn(t, l.mnt, fmt.Sprintf("build/f%d.o", i), []byte(fmt.Sprint("object ", round, i)))
			writeIn(t, l.mnt, fmt.Sprintf("web/node_modules/p%d/index.js", i), []byte("js"))
		}
		// a linker's way: the new object under a temp name, renamed over
		writeIn(t, l.mnt, "build/new.o", []byte("fresh"))
		if err := os.Rename(filepath.Join(l.mnt, "build/new.o"), filepath.Join(l.mnt, "build/f0.o")); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < 100; i++ {
			if err := os.Remove(filepath.Join(l.mnt, fmt.Sprintf("build/f%d.o", i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.RemoveAll(filepath.Join(l.mnt, "web/node_modules")); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := pendingInJournal(t, store)
	if len(got) != 1 || !got["build/f0.o"] {
		t.Errorf("pending during the mount: %d files (%v), want build/f0.o alone, the one excluded file left", len(got), sample(got))
	}
	writeIn(t, l.mnt, "main.c", []byte("int main;\n"))
	l.stop(t)
	if got := revisionsAt(t, store, "main.c"); len(got) != 1 {
		t.Fatalf("main.c: %d revisions, want 1", len(got))
	}
}

func sample(m map[string]bool) []string {
	var out []string
	for p := range m {
		if len(out) == 3 {
			break
		}
		out = append(out, p)
	}
	return out
}

// A directory exchanged (RENAME_EXCHANGE) with an excluded one is a
// rename out of the patterns too, either way round: the files it takes
// out are recorded, those it takes in are not.
func TestDirExchangeOutOfExcludedRecords(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := startWith(t, Config{Store: store, Exclude: []string{"node_modules", "cache"}})
	writeIn(t, l.mnt, "node_modules/pkg/a.js", []byte("from node_modules\n"))
	writeIn(t, l.mnt, "src/b.js", []byte("from src\n"))
	writeIn(t, l.mnt, "lib/c.js", []byte("from lib\n"))
	writeIn(t, l.mnt, "cache/sub/d", []byte("from cache\n"))
	l.recorded(t, 4)
	exchange := func(from, to string) {
		t.Helper()
		if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(l.mnt, from), unix.AT_FDCWD, filepath.Join(l.mnt, to), unix.RENAME_EXCHANGE); err != nil {
			t.Fatal(err)
		}
	}
	exchange("node_modules", "src") // From excluded
	exchange("lib", "cache")        // To excluded
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.stop(t)
	for rel, want := range map[string]string{"src/pkg/a.js": "from node_modules\n", "lib/sub/d": "from cache\n"} {
		if got := revisionsAt(t, store, rel); len(got) != 1 || got[0] != want {
			t.Errorf("%s, exchanged out of the patterns: revisions %q, want its content", rel, got)
		}
	}
	for _, rel := range []string{"node_modules/b.js", "cache/c.js"} {
		if got := revisionsAt(t, store, rel); len(got) != 1 {
			t.Errorf("%s, exchanged into the patterns: %d revisions, want the one from before", rel, len(got))
		}
	}
}

// verify of a mounted store counts excluded files as pending, as the
// verify of the unmounted store does (it reads the journal): an
// excluded file is meant to differ from its last revision, or to have
// none.
func TestVerifyMountedExcludedPending(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := startWith(t, Config{Store: store, Exclude: []string{"*.o"}})
	writeIn(t, l.mnt, "a.txt", []byte("kept\n"))
	writeIn(t, l.mnt, "old.o", []byte("in a snapshot\n"))
	if err := os.Mkdir(filepath.Join(l.mnt, ".snapshots", "s1"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeIn(t, l.mnt, "old.o", []byte("changed since\n"))
	writeIn(t, l.mnt, "new.o", []byte("never recorded\n"))
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	verify := func(how string, run func(fn func(VerifyMessage)) (VerifyReport, error)) {
		t.Helper()
		r, err := run(func(m VerifyMessage) {
			if m.Problem != nil {
				t.Errorf("%s verify: %v", how, m.Problem)
			}
		})
		if err != nil || r.Problems() != 0 || r.Live.Pending != 2 {
			t.Errorf("%s verify: %d problems, %d pending (want 0, 2), %v", how, r.Problems(), r.Live.Pending, err)
		}
	}
	verify("mounted", func(fn func(VerifyMessage)) (VerifyReport, error) {
		return VerifyMounted(context.Background(), store, fn)
	})
	l.stop(t)
	verify("offline", func(fn func(VerifyMessage)) (VerifyReport, error) {
		st, err := objstore.Open(store, objstore.Config{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		return VerifyOffline(context.Background(), st, store, func(p objstore.Problem) {
			fn(VerifyMessage{Problem: &ProblemInfo{}})
			t.Logf("offline problem: %v", p)
		}, nil)
	})
}

// A snapshot after many new excluded files gives them their store files
// together, before its build: one fsync of the ids file, not one each
// (2,000 files took 3.7-4.7 s with the live tree frozen), and each file's
// content is its first revision, as the snapshot holds it.
func TestSnapshotOfManyExcludedFiles(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	var revs *liveRevs
	cfg := Config{Store: store, Exclude: []string{"*.tmp"}}
	cfg.testRevisions = func(r *liveRevs) fs.Revisions { revs = r; return r }
	l := startWith(t, cfg)
	const n = 300
	content := func(i int) []byte { return fmt.Appendf(nil, "scratch %d\n", i) }
	for i := range n {
		writeIn(t, l.mnt, fmt.Sprintf("d%d/f%d.tmp", i%7, i), content(i))
	}
	writeIn(t, l.mnt, "kept.txt", []byte("kept\n"))
	syncs := func() int {
		revs.ls.mu.Lock()
		defer revs.ls.mu.Unlock()
		return revs.ls.sink.idSyncs
	}
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := syncs()
	if err := os.Mkdir(filepath.Join(l.mnt, ".snapshots", "s1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := syncs() - before; got > 2 {
		t.Errorf("snapshot of %d new excluded files: %d fsyncs of the ids file, want at most 2", n, got)
	}
	for _, i := range []int{0, 1, 150, n - 1} {
		rel := fmt.Sprintf("d%d/f%d.tmp", i%7, i)
		got, err := os.ReadFile(filepath.Join(l.mnt, ".snapshots", "s1", rel))
		if err != nil || !bytes.Equal(got, content(i)) {
			t.Fatalf("snapshot's %s: %q, %v; want %q", rel, got, err, content(i))
		}
	}
	l.stop(t)
	for _, i := range []int{0, 77, n - 1} {
		rel := fmt.Sprintf("d%d/f%d.tmp", i%7, i)
		if got := revisionsAt(t, store, rel); len(got) != 1 || got[0] != string(content(i)) {
			t.Fatalf("%s: revisions %q, want the snapshot's alone", rel, got)
		}
	}
}

// An excluded temp file still empty when a snapshot is taken, then
// written and renamed over a file, continues that file's history: the
// snapshot records nothing for an empty file, and must not leave it
// bound to a store file of its own, which would make it look as if it
// had a history (see reservePending).
func TestEmptyExcludedFileAtSnapshotThenSavedOver(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := startWith(t, Config{Store: store, Exclude: []string{"*.tmp"}})
	v1 := testutil.Bytes(8, 100_000)
	v2 := append(bytes.Clone(v1[:50_000]), append([]byte("an edit"), v1[50_000:]...)...)
	writeIn(t, l.mnt, "out", v1)
	l.recorded(t, 1)
	writeIn(t, l.mnt, "out.tmp", nil)
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(l.mnt, ".snapshots", "s1"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeIn(t, l.mnt, "out.tmp", v2)
	if err := os.Rename(filepath.Join(l.mnt, "out.tmp"), filepath.Join(l.mnt, "out")); err != nil {
		t.Fatal(err)
	}
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.stop(t)
	if got := revisionsAt(t, store, "out"); len(got) != 2 || got[0] != string(v1) || got[1] != string(v2) {
		t.Fatalf("out: %d revisions, want v1 then the saved v2", len(got))
	}
}
