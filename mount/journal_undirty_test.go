package mount

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
)

// journalNames reads the pending journal of a running mount (its
// records reach the page cache at once) and reports whether it names id.
func journalNames(t *testing.T, store string, id fs.FileID) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(store, journalFile))
	if err != nil {
		t.Fatal(err)
	}
	j := &journal{pending: map[fs.FileID]*pendingFile{}}
	j.replay(b)
	return j.pending[id] != nil
}

// TestFsyncedNewFileLeavesTheJournal is an editor's save of a new file:
// write, fsync, close, all through one passthrough handle. The fsync
// journals the next session at once (the writer is still open and fs
// sees none of its writes), and the close reports nothing; that second
// Dirtied is taken back (fs.Undirtier), so once the revision is recorded
// the journal no longer names the file, a clean unmount leaves it empty
// and the next mount neither rereads the file nor records it again.
func TestFsyncedNewFileLeavesTheJournal(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	data := testutil.Bytes(7, 300_000)
	f, err := os.Create(filepath.Join(l.mnt, "saved"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	id := liveID(filepath.Join(store, liveDir, "saved"))
	if id.IsZero() {
		t.Fatal("saved has no FileID")
	}
	// The fsync's change is held (a new file's grace), and was kept held
	// for the writer that stayed open; the close releases it, no Sync
	// needed. The kernel sends the release after close returns.
	for deadline := time.Now().Add(10 * time.Second); l.rec.holding(id); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fsynced change is still held 10 s after the close")
		}
	}
	if err := os.Mkdir(filepath.Join(l.mnt, ".snapshots", "s"), 0o755); err != nil {
		t.Fatal(err) // waits until everything reported is recorded
	}
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if journalNames(t, store, id) {
		t.Fatal("the pending journal still names the file after its revision was recorded")
	}
	l.stop(t)
	j, err := openJournal(filepath.Join(store, journalFile), quiet())
	if err != nil {
		t.Fatal(err)
	}
	pending := j.entries()
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	if len(pending) != 0 {
		t.Fatalf("after a clean unmount the journal names %v, want nothing", pending)
	}

	l = start(t, store)
	l.rec.mu.Lock()
	queued := l.rec.enq // the redos, queued before the mount serves
	l.rec.mu.Unlock()
	if queued != 0 {
		t.Fatalf("the next mount queued %d redos, want none", queued)
	}
	l.stop(t)
	st, revs := revisions(t, store)
	sf := storeIDs(t, store)[id]
	if len(revs[sf]) != 1 {
		t.Fatalf("saved has %d revisions, want 1", len(revs[sf]))
	}
	if text, _ := lastRevision(t, st, sf); string(text) != string(data) {
		t.Fatalf("saved's revision holds %d bytes, want the %d written", len(text), len(data))
	}
}

// TestJournalUndirtied: a Dirtied taken back leaves the file clean once
// every change reported before it is durably recorded, whichever comes
// first; not if one failed, nor for a file the journal named at the
// mount's start before its redo.
func TestJournalUndirtied(t *testing.T) {
	j, err := openJournal(filepath.Join(t.TempDir(), journalFile), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	pending := func(id fs.FileID) bool {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.pending[id] != nil
	}
	report := uint64(0)
	change := func(id fs.FileID) *fs.Change {
		report++
		c := &fs.Change{ID: id, Report: report}
		j.reported(c)
		return c
	}

	j.dirtied(fid(1), "a", fs.FileID{}) // a writer that never writes: clean at once
	j.undirtied(fid(1))
	if pending(fid(1)) {
		t.Fatal("a Dirtied taken back at once: still pending")
	}

	j.dirtied(fid(2), "b", fs.FileID{}) // recorded after the take-back
	c := change(fid(2))
	j.dirtied(fid(2), "b", fs.FileID{})
	j.undirtied(fid(2))
	if !pending(fid(2)) {
		t.Fatal("taken back before the fsync's revision is recorded: clean too early")
	}
	j.recorded(c, true)
	if pending(fid(2)) {
		t.Fatal("fsync's revision recorded after the take-back: still pending")
	}

	j.dirtied(fid(3), "c", fs.FileID{}) // recorded before the take-back
	c = change(fid(3))
	j.dirtied(fid(3), "c", fs.FileID{})
	j.recorded(c, true)
	if !pending(fid(3)) {
		t.Fatal("a writer still open after the recorded fsync: clean too early")
	}
	j.undirtied(fid(3))
	if pending(fid(3)) {
		t.Fatal("fsync's revision recorded before the take-back: still pending")
	}

	j.dirtied(fid(4), "d", fs.FileID{}) // the recording failed
	c = change(fid(4))
	j.dirtied(fid(4), "d", fs.FileID{})
	j.recorded(c, false)
	j.undirtied(fid(4))
	if !pending(fid(4)) {
		t.Fatal("a failed recording: clean")
	}

	j.mu.Lock()
	j.pending[fid(5)] = &pendingFile{path: "e"} // named at the mount's start
	j.mu.Unlock()
	j.dirtied(fid(5), "e", fs.FileID{})
	j.undirtied(fid(5))
	if !pending(fid(5)) {
		t.Fatal("a file pending from the last mount: clean before its redo")
	}
	j.redone(fid(5), 0)
	if pending(fid(5)) {
		t.Fatal("redone: still pending")
	}
}
