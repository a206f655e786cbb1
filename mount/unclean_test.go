package mount

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

// TestUncleanMountChecksEveryFile: a mount that did not end cleanly
// leaves mountedFile in the store, and the next mount checks every live
// file against its newest revision, recording those that differ; a
// change the disk kept without the journal record that names it (a
// power cut: the kernel's writeback, a passthrough writer, an fsync cut
// short) is so in history again. Made here behind the mount's back. A
// clean unmount takes the mark out, and the next mount checks nothing.
func TestUncleanMountChecksEveryFile(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	ctx := context.Background()
	mark, liveA := filepath.Join(store, mountedFile), filepath.Join(store, liveDir, "d", "a.txt")
	newest := func(l *live) []byte {
		t.Helper()
		_, data, err := CatBytes(ctx, connect(t, l.mnt, false), Target{Path: "d/a.txt"}, RevSpec{})
		mustDo(t, err)
		return data
	}
	l := start(t, store)
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("a mounted store has no %s: %v", mountedFile, err)
	}
	mustDo(t, os.MkdirAll(l.mnt+"/d", 0o755))
	mustDo(t, os.WriteFile(l.mnt+"/d/a.txt", []byte("one\n"), 0o644))
	mustDo(t, os.WriteFile(l.mnt+"/b.txt", []byte("b\n"), 0o644))
	mustDo(t, l.rec.Sync(ctx))
	l.stop(t)
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Fatalf("%s after a clean unmount: %v", mountedFile, err)
	}

	// A clean end: a change behind the mount's back is not looked for,
	// and offline verify reports it.
	mustDo(t, os.WriteFile(liveA, []byte("two, not looked for\n"), 0o644))
	if r := verifyOffline(t, store); r.Live.Problems != 1 || r.Live.Pending != 0 {
		t.Errorf("offline verify after a clean end and a change behind its back: %+v, want 1 problem", r.Live)
	}
	l = start(t, store)
	mustDo(t, l.rec.Sync(ctx))
	if got := newest(l); !bytes.Equal(got, []byte("one\n")) {
		t.Fatalf("after a clean unmount the mount recorded %q", got)
	}
	l.stop(t)

	// An unclean end: the next mount finds the change.
	three := []byte("three: kept by the disk, named by no journal record\n")
	mustDo(t, os.WriteFile(liveA, three, 0o644))
	mustDo(t, os.WriteFile(mark, []byte(bootID()), 0o600)) // this boot: the check by stat
	// Offline verify: the next mount's check records it, so it is
	// pending, not a problem.
	if r := verifyOffline(t, store); r.Live.Problems != 0 || r.Live.Pending != 1 {
		t.Errorf("offline verify after an unclean end: %+v, want 1 pending and no problem", r.Live)
	}
	l = start(t, store)
	mustDo(t, l.rec.Sync(ctx))
	if got := newest(l); !bytes.Equal(got, three) {
		t.Fatalf("after an unclean end the newest revision is %q, want the live content %q", got, three)
	}
	lg, err := connect(t, l.mnt, false).Log(ctx, Target{Path: "b.txt"})
	mustDo(t, err)
	if len(lg.Revisions) != 1 {
		t.Errorf("b.txt, unchanged, has %d revisions after the check, want 1", len(lg.Revisions))
	}
	l.stop(t)
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Fatalf("%s after a clean unmount: %v", mountedFile, err)
	}
}

// redoGate holds every redo (journal_redo.go) until the gate opens. It
// hides the journal sink's RecordBatch: the Recorder then hands it one
// event at a time, and redos run the same way in both.
type redoGate struct {
	Sink
	open chan struct{}
}

func (g *redoGate) Record(ctx context.Context, ev Event) error {
	if ev.redo != nil {
		<-g.open
	}
	return g.Sink.Record(ctx, ev)
}

// TestFirstWriterWaitsForRedo: after an unclean end, the check queues
// the redo of each changed live file (a content the disk kept that no
// revision holds), and the mount serves before the redos run. The first
// writer of such a file in the new mount, which reported nothing yet,
// must wait for its redo, and so must a rename over it and its unlink:
// an O_TRUNC open, a truncate(2) by path, a writable open, an editor's
// save and an rm would change or remove the live file before the redo
// read it, and the content the disk kept would be in no revision.
func TestFirstWriterWaitsForRedo(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	ctx := context.Background()
	// Each in a directory of its own: an unlink or a rename that waits
	// holds its directory locked in the kernel.
	names := []string{"trunc-open/f", "truncate-path/f", "write/f", "saved-over/f", "unlinked/f"}
	l := start(t, store)
	for _, n := range names {
		mustDo(t, os.MkdirAll(filepath.Join(l.mnt, filepath.Dir(n)), 0o755))
		mustDo(t, os.WriteFile(filepath.Join(l.mnt, n), []byte("one: recorded\n"), 0o644))
	}
	mustDo(t, l.rec.Sync(ctx))
	l.stop(t)

	kept := []byte("two: kept by the disk, named by no journal record\n")
	for _, n := range names {
		mustDo(t, os.WriteFile(filepath.Join(store, liveDir, n), kept, 0o644))
	}
	mustDo(t, os.WriteFile(filepath.Join(store, mountedFile), []byte(bootID()), 0o600))
	g := &redoGate{open: make(chan struct{})}
	var once sync.Once
	openGate := func() { once.Do(func() { close(g.open) }) }
	l = startWith(t, Config{Store: store, testRecorder: func(r *Recorder) {
		g.Sink, r.sink = r.sink, g
	}})
	defer openGate() // before the cleanup's unmount, which waits for the redos

	m := func(n string) string { return filepath.Join(l.mnt, n) }
	errs := make(chan error, len(names))
	go func() { errs <- os.WriteFile(m("trunc-open/f"), []byte("three\n"), 0o644) }()
	go func() { errs <- os.Truncate(m("truncate-path/f"), 3) }()
	go func() {
		f, err := os.OpenFile(m("write/f"), os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteAt([]byte("THREE"), 0)
			err = errors.Join(err, f.Close())
		}
		errs <- err
	}()
	go func() {
		err := os.WriteFile(m("saved-over/f.tmp"), []byte("saved\n"), 0o644)
		if err == nil {
			err = os.Rename(m("saved-over/f.tmp"), m("saved-over/f"))
		}
		errs <- err
	}()
	go func() { errs <- os.Remove(m("unlinked/f")) }()
	// Each of them waits for its file's redo: one waiter each.
	waiters := func() int {
		l.rec.mu.Lock()
		defer l.rec.mu.Unlock()
		return len(l.rec.waiters)
	}
	for deadline := time.Now().Add(10 * time.Second); waiters() < len(names); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("%d of %d waited for the redos in 10 s", waiters(), len(names))
			break
		}
	}
	// A file with no redo of its own does not wait: a new one written,
	// renamed (which queues its change behind the redos) and removed
	// (keepRemoved keeps that change's content).
	other := make(chan error, 1)
	go func() {
		err := os.WriteFile(m("other.tmp"), []byte("no redo\n"), 0o644)
		if err == nil {
			err = os.Rename(m("other.tmp"), m("other"))
		}
		if err == nil {
			err = os.Remove(m("other"))
		}
		other <- err
	}()
	select {
	case err := <-other:
		mustDo(t, err)
	case <-time.After(10 * time.Second):
		t.Errorf("a file with no redo of its own waited for the redos to be written and removed")
	}
	openGate()
	for range names {
		mustDo(t, <-errs)
	}
	mustDo(t, l.rec.Sync(ctx))
	c := connect(t, l.mnt, false)
	final := map[string]string{"trunc-open/f": "three\n", "truncate-path/f": string(kept[:3]),
		"write/f": "THREE" + string(kept[5:]), "saved-over/f": "saved\n"}
	for _, n := range names {
		lg, err := c.Log(ctx, Target{Path: n}) // unlinked: the deleted file last seen there
		mustDo(t, err)
		var texts []string
		for _, r := range lg.Revisions {
			rev := r.Rev
			_, data, err := CatBytes(ctx, c, Target{Path: n}, RevSpec{Rev: &rev})
			mustDo(t, err)
			texts = append(texts, string(data))
		}
		// Before the fix: the redo read the writer's content, or found
		// no file, and the content the disk kept was in no revision.
		want := []string{"one: recorded\n", string(kept)}
		if f, ok := final[n]; ok {
			want = append(want, f)
		}
		if !slices.Equal(texts, want) {
			t.Errorf("%s: revisions %q, want %q", n, texts, want)
		}
	}
}

// TestRedoChecksTheFileItOpened: a redo looks its file up by path, then
// opens the path, while the mount serves; a rename in between puts
// another file there. The redo must see that on the file it opened, and
// record nothing of it into the pending file's history (run then looks
// the file up again).
func TestRedoChecksTheFileItOpened(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	ctx := context.Background()
	l := start(t, store)
	mustDo(t, os.WriteFile(filepath.Join(l.mnt, "a"), []byte("a: one\n"), 0o644))
	mustDo(t, os.WriteFile(filepath.Join(l.mnt, "b"), []byte("b: another file\n"), 0o644))
	mustDo(t, l.rec.Sync(ctx))
	rd := l.rec.sink.(journalSink).rd
	idA := liveID(filepath.Join(store, liveDir, "a"))
	if err := rd.redoFile(ctx, idA, "b", true); !errors.Is(err, errMoved) {
		t.Errorf("redo of a's FileID at b: %v, want errMoved", err)
	}
	if err := rd.redoFile(ctx, idA, "gone", true); !errors.Is(err, errMoved) {
		t.Errorf("redo of a's FileID at a path gone since: %v, want errMoved", err)
	}
	mustDo(t, l.rec.Sync(ctx))
	lg, err := connect(t, l.mnt, false).Log(ctx, Target{Path: "a"})
	mustDo(t, err)
	if len(lg.Revisions) != 1 {
		t.Errorf("a has %d revisions after a redo that opened b, want 1", len(lg.Revisions))
	}
}

// verifyOffline runs VerifyOffline on the unmounted store.
func verifyOffline(t *testing.T, store string) VerifyReport {
	t.Helper()
	st, err := objstore.Open(store, objstore.Config{ReadOnly: true})
	mustDo(t, err)
	defer st.Close()
	r, err := VerifyOffline(context.Background(), st, store, func(p objstore.Problem) { t.Logf("offline verify: %v", p) }, nil)
	mustDo(t, err)
	return r
}

// TestUncleanMountAfterRestartReadsEveryFile: the check after an unclean
// end, and the redo of the files the pending journal names, trust a
// file's size and ctime while the kernel that made the mark runs. After
// a restart the disk's ctime may be older than its data (an overwrite's
// pages written before the journal committed the inode, or lazytime),
// so both compare every file's content. Made here with newest revisions
// timed after the live files' ctimes whose content differs at the same
// size: what the stat cannot tell from unchanged. a is found by the
// check, b is named by the journal (which the check leaves to it).
func TestUncleanMountAfterRestartReadsEveryFile(t *testing.T) {
	if bootID() == "" {
		testutil.SkipOrFail(t, "no boot id here: every unclean end is taken for a restart")
	}
	store := filepath.Join(t.TempDir(), "s.dfs")
	ctx := context.Background()
	recorded, kept := []byte("one: recorded\n"), []byte("ONE: THE DISK\n")
	l := start(t, store)
	for _, n := range []string{"a", "b"} {
		mustDo(t, os.WriteFile(filepath.Join(l.mnt, n), recorded, 0o644))
	}
	mustDo(t, l.rec.Sync(ctx))
	l.stop(t)
	lp := func(n string) string { return filepath.Join(store, liveDir, n) }
	for _, n := range []string{"a", "b"} {
		mustDo(t, os.WriteFile(lp(n), kept, 0o644))
	}
	// The newest revisions: the recorded content, timed after the live
	// files' ctimes, as if the disk had lost the ctimes of the overwrites.
	time.Sleep(2 * ctimeSlack)
	st, err := objstore.Open(store, objstore.Config{})
	mustDo(t, err)
	for _, n := range []string{"a", "b"} {
		fid := storeIDs(t, store)[liveID(lp(n))]
		prev, _, err := st.Latest(fid)
		mustDo(t, err)
		_, err = st.Put(ctx, objstore.PutRequest{File: fid, Data: recorded, P1: prev.ID()})
		mustDo(t, err)
	}
	mustDo(t, st.Close())

	revisions := func(mark string, problems, pending int64) map[string]string {
		t.Helper()
		j, err := openJournal(filepath.Join(store, journalFile), quiet())
		mustDo(t, err)
		j.dirtied(liveID(lp("b")), "b", fs.FileID{})
		j.f.Close() // killed: no compaction
		mustDo(t, os.WriteFile(filepath.Join(store, mountedFile), []byte(mark), 0o600))
		// Offline verify counts as pending what the next mount records.
		if r := verifyOffline(t, store); r.Live.Problems != int(problems) || r.Live.Pending != pending {
			t.Errorf("offline verify, mark %q: %+v, want %d problems, %d pending", mark, r.Live, problems, pending)
		}
		l := start(t, store)
		defer l.stop(t)
		mustDo(t, l.rec.Sync(ctx))
		// With every redo done, the mark names this boot (trustBoot).
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			b, err := os.ReadFile(filepath.Join(store, mountedFile))
			if err == nil && string(b) == bootID() {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("mark %q (%v) with every redo done, want this boot's id", b, err)
				break
			}
		}
		got := map[string]string{}
		for _, n := range []string{"a", "b"} {
			_, data, err := CatBytes(ctx, connect(t, l.mnt, false), Target{Path: n}, RevSpec{})
			mustDo(t, err)
			got[n] = string(data)
		}
		return got
	}
	// The same boot: the stat is taken at its word (the premise); a is
	// a problem for verify, b pending in the journal.
	if got, want := revisions(bootID(), 1, 1), string(recorded); got["a"] != want || got["b"] != want {
		t.Fatalf("unclean end in this boot: newest revisions %q, want %q (the stat check)", got, want)
	}
	// Another boot: the content is compared.
	if got, want := revisions("another boot", 0, 2), string(kept); got["a"] != want || got["b"] != want {
		t.Errorf("unclean end, then a restart: newest revisions %q, want the live content %q", got, want)
	}
}

// TestUncleanMountGivesBackALostFileID: a power cut can keep a live
// file's data and name but not the FileID xattr its create set. The
// check after it gives the file back the FileID of the history last at
// its path, when no live file has that one, so the history goes on; a
// new FileID forked it (a new store file, its first revision the
// content the disk kept). Not so for a file born after that history's
// newest revision (a path vacated by an rm before the cut), nor for a
// FileID a live file still has under another name, pending in the
// journal (a log rotated: app.log renamed app.log.1, a new app.log); a
// file with no history at its path gets a new FileID, as before.
func TestUncleanMountGivesBackALostFileID(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	ctx := context.Background()
	lp := func(n string) string { return filepath.Join(store, liveDir, n) }
	l := start(t, store)
	mustDo(t, os.MkdirAll(filepath.Join(l.mnt, "d"), 0o755))
	for _, n := range []string{"d/a.txt", "removed.txt", "app.log"} {
		mustDo(t, os.WriteFile(filepath.Join(l.mnt, n), []byte(n+": one\n"), 0o644))
	}
	mustDo(t, l.rec.Sync(ctx))
	mustDo(t, os.Remove(filepath.Join(l.mnt, "removed.txt")))
	l.stop(t)
	id, logID := liveID(lp("d/a.txt")), liveID(lp("app.log"))
	time.Sleep(2 * ctimeSlack) // the files made below are born after every revision
	mustDo(t, os.WriteFile(lp("d/a.txt"), []byte("two: its xattr lost\n"), 0o644))
	mustDo(t, unix.Lremovexattr(lp("d/a.txt"), fs.XattrID))
	mustDo(t, os.WriteFile(lp("new.txt"), []byte("no history\n"), 0o644))
	mustDo(t, os.WriteFile(lp("removed.txt"), []byte("made after the rm\n"), 0o644))
	mustDo(t, os.Rename(lp("app.log"), lp("app.log.1")))
	mustDo(t, os.WriteFile(lp("app.log"), []byte("a new log\n"), 0o644))
	j, err := openJournal(filepath.Join(store, journalFile), quiet())
	mustDo(t, err)
	j.dirtied(logID, "app.log", fs.FileID{})
	j.f.Close() // killed: no compaction
	mustDo(t, os.WriteFile(filepath.Join(store, mountedFile), []byte(bootID()), 0o600))
	l = start(t, store)
	mustDo(t, l.rec.Sync(ctx))
	if got := liveID(lp("d/a.txt")); got != id {
		t.Errorf("d/a.txt's FileID after the check: %v, want its own %v back", got, id)
	}
	for _, n := range []string{"new.txt", "removed.txt", "app.log"} {
		if got := liveID(lp(n)); got.IsZero() || got == logID {
			t.Errorf("%s's FileID after the check: %v (app.log.1's: %v)", n, got, logID)
		}
	}
	c := connect(t, l.mnt, false)
	for n, want := range map[string]int{"d/a.txt": 2, "removed.txt": 1, "app.log": 1, "app.log.1": 1} {
		lg, err := c.Log(ctx, Target{Path: n})
		mustDo(t, err)
		if len(lg.Revisions) != want {
			t.Errorf("%s has %d revisions, want %d: %s", n, len(lg.Revisions), want, revNums(lg))
		}
	}
	if _, data, err := CatBytes(ctx, c, Target{Path: "d/a.txt"}, RevSpec{}); err != nil || string(data) != "two: its xattr lost\n" {
		t.Errorf("d/a.txt's newest revision: %q, %v", data, err)
	}
}
