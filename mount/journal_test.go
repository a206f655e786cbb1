package mount

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

func fid(b byte) fs.FileID { return fs.FileID{b} }

func TestJournalReplayTornTailAndCompaction(t *testing.T) {
	p := filepath.Join(t.TempDir(), journalFile)
	j, err := openJournal(p, quiet())
	if err != nil {
		t.Fatal(err)
	}
	j.dirtied(fid(1), "x/a", fs.FileID{})
	j.dirtied(fid(2), "b", fs.FileID{})
	j.dirtied(fid(1), "x/a", fs.FileID{}) // a second session: no record
	j.renamed(fs.Rename{From: "b", To: "c", ID: fid(2), Replaced: fid(4)})
	j.renamed(fs.Rename{From: "x", To: "y", Dir: true})
	j.dirtied(fid(3), "e", fs.FileID{})
	j.redone(fid(3), 1)
	j.dirtied(fid(5), "f", fs.FileID{})
	j.redone(fid(5), 0)                 // dirtied again since the redo started: stays
	if err := j.f.Close(); err != nil { // a killed mount: no compaction
		t.Fatal(err)
	}
	want := map[fs.FileID]pendingFile{fid(1): {path: "y/a"}, fid(2): {path: "c", continues: fid(4)}, fid(5): {path: "f"}}
	check := func(what string) {
		t.Helper()
		j, err := openJournal(p, quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer j.close()
		got := j.entries()
		if len(got) != len(want) {
			t.Fatalf("%s: pending %v, want %v", what, got, want)
		}
		for id, w := range want {
			if g := got[id]; g.path != w.path || g.continues != w.continues {
				t.Fatalf("%s: %v is %+v, want %+v", what, id, g, w)
			}
		}
	}
	check("replay")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec := appendRecord(nil, recDirty, fid(9), []byte("torn"))
	f.Write(rec[:len(rec)-3])
	f.Close()
	check("torn tail")
	b, _ := os.ReadFile(p)
	b = append(b, appendRecord(nil, recClean, fid(1), nil)...)
	b[len(b)-1] ^= 1 // a corrupt record is not applied
	os.WriteFile(p, b, 0o600)
	check("corrupt record")

	j, err = openJournal(p, quiet())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20_000 {
		id := fs.NewFileID()
		j.dirtied(id, "some/longer/path/to/a/file", fs.FileID{})
		j.redone(id, 1)
		if i%5000 == 0 {
			j.reported(&fs.Change{ID: id})
		}
	}
	if j.size > 2*compactAt {
		t.Fatalf("journal of %d bytes after 20,000 recorded sessions; compaction keeps it under %d", j.size, 2*compactAt)
	}
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
}

// TestRedoAtMount leaves a store as a killed mount would (live files
// newer than their history, named in the journal) and mounts it: the
// redo records exactly the files that differ, finds a file moved behind
// the journal's back, continues an atomic save's history, drops a
// deleted file, and leaves the journal empty after a clean unmount.
func TestRedoAtMount(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	for _, name := range []string{"a", "b", "c", "d/x", "gone", "m"} {
		p := filepath.Join(l.mnt, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, testutil.Bytes(uint64(len(name)), 20_000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l.stop(t)
	live := filepath.Join(store, liveDir)
	lp := func(name string) string { return filepath.Join(live, name) }
	idOf := func(name string) fs.FileID {
		t.Helper()
		id := liveID(lp(name))
		if id.IsZero() {
			t.Fatalf("%s has no FileID", name)
		}
		return id
	}
	ida, idb, idc, idx, idgone := idOf("a"), idOf("b"), idOf("c"), idOf("d/x"), idOf("gone")
	fc := storeIDs(t, store)[idc]

	j, err := openJournal(filepath.Join(store, journalFile), quiet())
	if err != nil {
		t.Fatal(err)
	}
	newA := testutil.Bytes(100, 30_000)
	j.dirtied(ida, "a", fs.FileID{})
	writeLive(t, lp("a"), newA)
	j.dirtied(idb, "b", fs.FileID{}) // dirtied, never changed
	idm, newM := idOf("m"), testutil.Bytes(104, 20_000)
	j.dirtied(idm, "m", fs.FileID{}) // same size, mtime set back (tar, cp -p): only the ctime tells
	writeLive(t, lp("m"), newM)
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(lp("m"), old, old); err != nil {
		t.Fatal(err)
	}
	j.dirtied(idx, "d/x", fs.FileID{})
	newX := testutil.Bytes(101, 20_000)
	writeLive(t, lp("d/x"), newX)
	if err := os.Rename(lp("d/x"), lp("x2")); err != nil { // the journal missed it
		t.Fatal(err)
	}
	j.dirtied(idgone, "gone", fs.FileID{})
	os.Remove(lp("gone"))
	idt, newC := fs.NewFileID(), testutil.Bytes(102, 20_000)
	j.dirtied(idt, "c.tmp", fs.FileID{})
	writeLive(t, lp("c.tmp"), newC)
	unix.Setxattr(lp("c.tmp"), fs.XattrID, idt[:], 0)
	os.Rename(lp("c.tmp"), lp("c"))
	j.renamed(fs.Rename{From: "c.tmp", To: "c", ID: idt, Replaced: idc})
	idn, newN := fs.NewFileID(), testutil.Bytes(103, 5_000)
	j.dirtied(idn, "n", fs.FileID{})
	writeLive(t, lp("n"), newN)
	unix.Setxattr(lp("n"), fs.XattrID, idn[:], 0)
	j.f.Close() // killed: no compaction

	l = start(t, store)
	if err := l.rec.Wait(context.Background(), ida); err != nil { // as fsync of a does
		t.Fatal(err)
	}
	ls := l.rec.sink.(journalSink).ls
	ls.mu.Lock() // the redo of other files may still run
	fa := ls.sink.ids[ida]
	ls.mu.Unlock()
	if m, err := ls.sink.st.File(fa); err != nil || m.Revs != 2 {
		t.Fatalf("after Wait for a: %d revisions (%v), want its redo as the 2nd", m.Revs, err)
	}
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(l.mnt, "x2")); err != nil || !bytes.Equal(got, newX) {
		t.Fatalf("x2 through the mount: %d bytes, %v", len(got), err)
	}
	l.stop(t)
	if b, err := os.ReadFile(filepath.Join(store, journalFile)); err != nil || len(b) != 0 {
		t.Fatalf("journal after a clean unmount: %d bytes, %v; want empty", len(b), err)
	}
	st, err := objstore.Open(store, objstore.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids := storeIDs(t, store)
	for _, c := range []struct {
		id   fs.FileID
		name string
		want []byte
		revs uint32
	}{
		{ida, "a", newA, 2},
		{idb, "b", testutil.Bytes(1, 20_000), 1},
		{idx, "x2", newX, 2},
		{idt, "c", newC, 2}, // continues c's history
		{idn, "n", newN, 1},
		{idm, "m", newM, 2},
	} {
		f, ok := ids[c.id]
		if !ok {
			t.Fatalf("%s: no store file", c.name)
		}
		text, revs := lastRevision(t, st, f)
		if !bytes.Equal(text, c.want) || revs != c.revs {
			t.Errorf("%s: last of %d revisions has %d bytes, want %d revisions ending in the live %d bytes", c.name, revs, len(text), c.revs, len(c.want))
		}
	}
	if ids[idt] != fc || fc == 0 {
		t.Errorf("the atomic save of c started store file %d, want c's %d", ids[idt], fc)
	}
	if f, ok := ids[idc]; ok {
		t.Errorf("c's old inode still maps to store file %d after the save took its history", f)
	}
}

func writeLive(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// storeIDs reads the store's live.ids.
func storeIDs(t *testing.T, store string) map[fs.FileID]index.FileID {
	t.Helper()
	ids, err := readIDs(store)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// lastRevision returns the text of f's newest revision and its count.
func lastRevision(t *testing.T, st *objstore.Store, f index.FileID) ([]byte, uint32) {
	t.Helper()
	m, err := st.File(f)
	if err != nil || m.Revs == 0 {
		t.Fatalf("file %d: %d revisions, %v", f, m.Revs, err)
	}
	text, err := st.Get(context.Background(), index.RevID{File: f, Rev: index.Rev(m.Revs - 1)})
	if err != nil {
		t.Fatalf("file %d: %v", f, err)
	}
	return text, m.Revs
}

type sinkFunc func(context.Context, Event) error

func (f sinkFunc) Record(ctx context.Context, ev Event) error { return f(ctx, ev) }

// TestRedoIsWaitedFor: fsync (Wait) and history views (Flush) of a file
// whose redo is queued wait for it, and Sync for every redo.
func TestRedoIsWaitedFor(t *testing.T) {
	block := make(chan struct{})
	r := NewRecorder(sinkFunc(func(_ context.Context, ev Event) error {
		if ev.redo != nil {
			<-block
		}
		return nil
	}), time.Second, quiet())
	defer r.Close(context.Background())
	var once sync.Once
	unblock := func() { once.Do(func() { close(block) }) }
	defer unblock() // before Close, which waits for the redo
	r.queueRedo(&redo{id: fid(1)})
	for name, wait := range map[string]func(context.Context) error{
		"Wait":  func(ctx context.Context) error { return r.Wait(ctx, fid(1)) },
		"Flush": func(ctx context.Context) error { return r.Flush(ctx, fid(1)) },
		"Sync":  r.Sync,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := wait(ctx)
		cancel()
		if err == nil {
			t.Fatalf("%s returned before the redo ran", name)
		}
	}
	if err := r.Wait(context.Background(), fid(2)); err != nil { // another file does not wait
		t.Fatal(err)
	}
	unblock()
	if err := r.Wait(context.Background(), fid(1)); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkJournalSession: what the journal adds to one write session
// (Dirtied, the report's stamp, the clean record once recorded): two
// small appends to the journal file, compaction included.
func BenchmarkJournalSession(b *testing.B) {
	j, err := openJournal(filepath.Join(b.TempDir(), journalFile), quiet())
	if err != nil {
		b.Fatal(err)
	}
	defer j.close()
	content, _ := os.Open(os.DevNull)
	defer content.Close()
	ids := make([]fs.FileID, 1024)
	for i := range ids {
		ids[i] = fs.NewFileID()
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	for i := range b.N {
		c := fs.Change{ID: ids[i%len(ids)], Content: content}
		j.dirtied(c.ID, "src/pkg/some/file.go", fs.FileID{})
		j.reported(&c)
		j.recorded(&c, true)
	}
}

// BenchmarkSmallFileSession: one 4 KiB file created, written and closed
// through a mount, the cost the journal's share is measured against.
func BenchmarkSmallFileSession(b *testing.B) {
	l := startBench(b, filepath.Join(b.TempDir(), "s.dfs"))
	data := testutil.Bytes(1, 4096)
	b.ResetTimer()
	defer reportCPU(b)()
	for i := range b.N {
		if err := os.WriteFile(filepath.Join(l.mnt, fmt.Sprintf("f%d", i%2000)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU reports the process's CPU time (user and system, every
// thread: the mount serves in-process) per op: on a loaded machine wall
// time says little. Call the returned function at the end.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() { b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op") }
}

// TestHeldFsyncSyncsTheJournal: an fsync whose change the Recorder holds
// back returns with the journal entry durable; one it records does not
// pay for a journal fsync.
func TestHeldFsyncSyncsTheJournal(t *testing.T) {
	j, err := openJournal(filepath.Join(t.TempDir(), journalFile), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	r := NewRecorder(&memSink{}, time.Hour, quiet())
	defer r.Close(context.Background())
	jr := journaled{Recorder: r, j: j}
	id := fs.NewFileID()
	for i, held := range []bool{false, true} {
		jr.Dirtied(id, "db")
		jr.Changed(fs.Change{Path: "db", ID: id, Dirty: []fs.Range{rg(0, 1)}, Size: 10, Fsync: true})
		if err := jr.Wait(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		j.mu.Lock()
		unsynced := j.unsynced
		j.mu.Unlock()
		if unsynced == held {
			t.Fatalf("fsync %d (held %v): journal unsynced %v after Wait", i, held, unsynced)
		}
	}
}
