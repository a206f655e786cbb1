package mount

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// deletedPaths lists what Deleted returns as "path:file:revisions".
func deletedPaths(t *testing.T, c Controller, dir string) []DeletedFile {
	t.Helper()
	list, err := c.Deleted(context.Background(), dir)
	mustDo(t, err)
	for _, d := range list {
		if !d.Deleted || d.Revisions == 0 || d.Time.IsZero() {
			t.Fatalf("deleted %q: %+v", dir, d)
		}
	}
	return list
}

// TestDeletedFileHistory: a file removed from a mount keeps its history
// reachable after a remount (what the recorder's one-minute memory of
// vacated paths does not cover): listed, logged and read by its last
// path or its id, and restored, through the mount and offline, as the
// next revision of the same history (a dedup when its newest revision
// comes back: the store grows by no record). gc's rule and the
// listing's agree: once gc has removed a deleted file, it is not listed
// and its path names nothing.
func TestDeletedFileHistory(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 7))
	v0 := make([]byte, 64<<10)
	for i := range v0 {
		v0[i] = byte(r.UintN(256))
	}
	v1 := append(bytes.Clone(v0), "one more line\n"...)
	v2 := []byte("a new file where the old one was\n")

	l := start(t, store)
	mustDo(t, os.Mkdir(l.mnt+"/docs", 0o755))
	f, err := os.Create(l.mnt + "/docs/notes.txt")
	mustDo(t, err)
	_, err = f.Write(v0)
	mustDo(t, errors.Join(err, f.Sync(), f.Close()))
	mustDo(t, l.rec.Sync(ctx)) // a revision of its own, not held with the next write
	mustDo(t, os.WriteFile(l.mnt+"/docs/notes.txt", v1, 0o644))
	mustDo(t, os.WriteFile(l.mnt+"/keep.txt", []byte("kept"), 0o644))
	mustDo(t, os.Remove(l.mnt+"/docs/notes.txt"))
	l.stop(t)

	l = start(t, store)
	c := connect(t, l.mnt, false)
	list := deletedPaths(t, c, "")
	if len(list) != 1 || list[0].Path != "docs/notes.txt" || list[0].Revisions != 2 || list[0].Size != uint64(len(v1)) {
		t.Fatalf("deleted after a remount: %+v", list)
	}
	fid1 := list[0].File
	if n := len(deletedPaths(t, c, "docs")); n != 1 {
		t.Errorf("deleted under docs: %d files", n)
	}
	if n := len(deletedPaths(t, c, "doc")); n != 0 {
		t.Errorf("deleted under doc: %d files", n)
	}
	lg, err := c.Log(ctx, Target{Path: "docs/notes.txt"})
	if err != nil || !lg.Deleted || lg.File != fid1 || len(lg.Revisions) != 2 {
		t.Fatalf("log of the deleted path: %+v, %v", lg, err)
	}
	for rev, want := range map[uint32][]byte{0: v0, 1: v1} {
		fr, data, err := CatBytes(ctx, c, Target{Path: "/docs/notes.txt"}, RevSpec{Rev: ptr(rev)})
		if err != nil || !bytes.Equal(data, want) || !fr.Deleted || fr.File != fid1 {
			t.Errorf("cat rev %d of the deleted path: %d bytes, %+v, %v", rev, len(data), fr, err)
		}
	}

	// A new file at the path, deleted too: the newest is the path's.
	mustDo(t, os.WriteFile(l.mnt+"/docs/notes.txt", v2, 0o644))
	mustDo(t, os.Remove(l.mnt+"/docs/notes.txt"))
	list = deletedPaths(t, c, "")
	if len(list) != 2 || list[0].File == fid1 || list[1].File != fid1 || list[0].Path != "docs/notes.txt" {
		t.Fatalf("deleted, newest first: %+v", list)
	}
	fid2 := list[0].File
	if fr, data, err := CatBytes(ctx, c, Target{Path: "docs/notes.txt"}, RevSpec{}); err != nil || !bytes.Equal(data, v2) || fr.File != fid2 {
		t.Errorf("cat of the path deleted twice: %q, %+v, %v", data, fr, err)
	}
	if fr, data, err := CatBytes(ctx, c, Target{File: fid1}, RevSpec{}); err != nil || !bytes.Equal(data, v1) || !fr.Deleted {
		t.Errorf("cat --id %d: %d bytes, %+v, %v", fid1, len(data), fr, err)
	}

	// Restore the older one where it was: its newest revision again, as
	// a dedup of it, continuing its history.
	before, err := c.Stats(ctx)
	mustDo(t, err)
	fr, err := c.Restore(ctx, Target{File: fid1}, nil)
	if err != nil || !fr.Deleted || fr.Path != "docs/notes.txt" {
		t.Fatalf("restore --id %d: %+v, %v", fid1, fr, err)
	}
	info := fr.Revision
	if info.Rev != 2 || info.P1 == nil || *info.P1 != (RevRef{File: fid1, Rev: 1}) || info.P2 == nil || *info.P2 != (RevRef{File: fid1, Rev: 1}) || info.Base != "dedup" {
		t.Fatalf("restored revision: %+v", info)
	}
	if b, err := os.ReadFile(l.mnt + "/docs/notes.txt"); err != nil || !bytes.Equal(b, v1) {
		t.Fatalf("restored file: %d bytes, %v", len(b), err)
	}
	after, err := c.Stats(ctx)
	mustDo(t, err)
	if after.Revisions != before.Revisions+1 || after.StoredBytes != before.StoredBytes {
		t.Errorf("the restore stored %d revisions, %d bytes (want 1 revision, no record)", after.Revisions-before.Revisions, after.StoredBytes-before.StoredBytes)
	}
	lg, err = c.Log(ctx, Target{Path: "docs/notes.txt"})
	if err != nil || lg.Deleted || lg.File != fid1 || len(lg.Revisions) != 3 {
		t.Fatalf("log of the restored file: %+v, %v", lg, err)
	}
	mustDo(t, os.WriteFile(l.mnt+"/docs/notes.txt", append(bytes.Clone(v1), "edited after\n"...), 0o644))
	if lg, err = c.Log(ctx, Target{Path: "docs/notes.txt"}); err != nil || lg.File != fid1 || len(lg.Revisions) != 4 {
		t.Fatalf("log after an edit of the restored file: %+v, %v", lg, err)
	}

	// The other one: not over a live file; elsewhere, from revision 0.
	if _, err := c.Restore(ctx, Target{File: fid2, Path: "docs/notes.txt"}, nil); !errors.Is(err, index.ErrExists) {
		t.Errorf("restore over a live file: %v", err)
	}
	fr, err = c.Restore(ctx, Target{File: fid2, Path: "old/v2.txt"}, ptr(uint32(0)))
	if err != nil || fr.File != fid2 || fr.Path != "old/v2.txt" || fr.Revision.P2 == nil || fr.Revision.P2.Rev != 0 {
		t.Fatalf("restore --id %d elsewhere: %+v, %v", fid2, fr, err)
	}
	if b, err := os.ReadFile(l.mnt + "/old/v2.txt"); err != nil || !bytes.Equal(b, v2) {
		t.Fatalf("file restored elsewhere: %q, %v", b, err)
	}
	if n := len(deletedPaths(t, c, "")); n != 0 {
		t.Errorf("%d deleted files after both restores", n)
	}
	if _, err := c.Log(ctx, Target{Path: "docs/nosuch"}); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("log of a path no file had: %v", err)
	}
	l.stop(t)

	// Offline: delete, list, restore by path, then delete and gc.
	live := filepath.Join(store, liveDir)
	mustDo(t, os.Remove(filepath.Join(live, "old/v2.txt")))
	o, err := OpenOffline(store, false, quiet())
	mustDo(t, err)
	oc := o.Controller()
	list = deletedPaths(t, oc, "old")
	if len(list) != 1 || list[0].File != fid2 || list[0].Path != "old/v2.txt" {
		t.Fatalf("offline deleted: %+v", list)
	}
	fr, err = oc.Restore(ctx, Target{Path: "old/v2.txt"}, nil)
	if err != nil || fr.File != fid2 || !fr.Deleted || fr.Revision.P1 == nil || fr.Revision.P1.File != fid2 {
		t.Fatalf("offline restore by path: %+v, %v", fr, err)
	}
	if b, err := os.ReadFile(filepath.Join(live, "old/v2.txt")); err != nil || !bytes.Equal(b, v2) {
		t.Fatalf("offline restored file: %q, %v", b, err)
	}
	if lg, err := oc.Log(ctx, Target{Path: "old/v2.txt"}); err != nil || lg.Deleted || lg.File != fid2 {
		t.Fatalf("offline log of the restored file: %+v, %v", lg, err)
	}
	mustDo(t, o.Close())
	mustDo(t, os.Remove(filepath.Join(live, "old/v2.txt")))
	if _, err := objstore.GC(ctx, store, objstore.GCOptions{Live: func() (map[index.FileID]bool, error) { return LiveFiles(store) }}); err != nil {
		t.Fatal(err)
	}
	o, err = OpenOffline(store, true, quiet())
	mustDo(t, err)
	defer o.Close()
	if list := deletedPaths(t, o.Controller(), ""); len(list) != 0 {
		t.Errorf("deleted after gc: %+v", list)
	}
	if _, _, err := CatBytes(ctx, o.Controller(), Target{Path: "old/v2.txt"}, RevSpec{}); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("cat of a path whose deleted file gc removed: %v", err)
	}
	if lg, err := o.Controller().Log(ctx, Target{Path: "docs/notes.txt"}); err != nil || lg.File != fid1 || len(lg.Revisions) != 4 {
		t.Errorf("the live file's history after gc: %+v, %v", lg, err)
	}
}

// TestDeletedFileNamedByItsLastPath: a file moved after its last change
// (itself, then with its directory) and then removed is listed, and
// found, by the path it was removed from, after a remount too (a
// read-only one).
func TestDeletedFileNamedByItsLastPath(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	ctx := context.Background()
	l := start(t, store)
	mustDo(t, os.WriteFile(l.mnt+"/a.txt", []byte("moved, then removed\n"), 0o644))
	mustDo(t, os.WriteFile(l.mnt+"/stay.txt", []byte("removed where it was made\n"), 0o644))
	mustDo(t, l.rec.Sync(ctx))
	mustDo(t, os.Mkdir(l.mnt+"/d", 0o755))
	mustDo(t, os.Rename(l.mnt+"/a.txt", l.mnt+"/d/a.txt"))
	mustDo(t, os.Rename(l.mnt+"/d", l.mnt+"/e"))
	mustDo(t, os.Remove(l.mnt+"/e/a.txt"))
	mustDo(t, os.Remove(l.mnt+"/stay.txt"))
	mustDo(t, l.rec.Sync(ctx))
	l.stop(t)

	l = startWith(t, Config{Store: store, ReadOnly: true})
	c := connect(t, l.mnt, true)
	list := deletedPaths(t, c, "")
	if len(list) != 2 || list[0].Path != "stay.txt" && list[1].Path != "stay.txt" || list[0].Path != "e/a.txt" && list[1].Path != "e/a.txt" {
		t.Fatalf("deleted: %+v", list)
	}
	if _, data, err := CatBytes(ctx, c, Target{Path: "e/a.txt"}, RevSpec{}); err != nil || string(data) != "moved, then removed\n" {
		t.Fatalf("cat of the path it was removed from: %q, %v", data, err)
	}
}

// TestSnapshotDuringRestoreOfDeletedFile: a snapshot taken while a
// restore of a deleted file has written its content but not yet fsynced
// it (restoreDeletedMounted: the live file is bound to the deleted
// store file only in storeSink.adopting) records that content for the
// snapshot, as the next revision of the deleted file's history, not as
// the first of a new store file: the restore then continues that
// history, as it does without the snapshot. A snapshot before the write
// records no empty revision in it.
func TestSnapshotDuringRestoreOfDeletedFile(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	ctx := context.Background()
	var revs *liveRevs
	cfg := Config{Store: store}
	cfg.testRevisions = func(r *liveRevs) fs.Revisions { revs = r; return r }
	l := startWith(t, cfg)
	old := bytes.Repeat([]byte("the deleted file's content\n"), 100)
	mustDo(t, os.WriteFile(l.mnt+"/notes.txt", old, 0o644))
	mustDo(t, l.rec.Sync(ctx))
	mustDo(t, os.Remove(l.mnt+"/notes.txt"))
	c := connect(t, l.mnt, false)
	list := deletedPaths(t, c, "")
	if len(list) != 1 || list[0].Revisions != 1 {
		t.Fatalf("deleted: %+v", list)
	}
	fid := index.FileID(list[0].File)

	// What restoreDeletedMounted does, with a snapshot between its write
	// and its fsync.
	f, err := os.OpenFile(l.mnt+"/notes.txt", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	mustDo(t, err)
	id, err := readFileID(filepath.Join(store, liveDir, "notes.txt"))
	mustDo(t, err)
	s := revs.ls.sink
	revs.ls.mu.Lock()
	before := s.prev(fid)
	s.adopting[id], s.restoring[fid] = fid, restore{rev: before}
	revs.ls.mu.Unlock()
	// Before the write: the file is still empty, and no empty revision
	// joins the history it continues.
	mustDo(t, os.Mkdir(l.mnt+"/.snapshots/before-write", 0o755))
	revs.ls.mu.Lock()
	early := s.prev(fid)
	revs.ls.mu.Unlock()
	if early != before {
		f.Close() // open, it would keep the mount busy at the cleanup's unmount
		t.Fatalf("a snapshot of the restored file before its write recorded %v", early)
	}
	_, err = f.Write(old)
	mustDo(t, err)
	mustDo(t, os.Mkdir(l.mnt+"/.snapshots/during", 0o755))
	mustDo(t, errors.Join(f.Sync(), f.Close()))
	mustDo(t, l.rec.Flush(ctx, id))
	revs.ls.mu.Lock()
	delete(s.adopting, id)
	delete(s.restoring, fid)
	now, bound := s.prev(fid), s.ids[id]
	revs.ls.mu.Unlock()
	if now == before || bound != fid {
		t.Errorf("the restored file is bound to store file %d (want %d), whose newest revision is %v (was %v)", bound, fid, now, before)
	}
	lg, err := c.Log(ctx, Target{Path: "notes.txt"})
	if err != nil || lg.Deleted || lg.File != uint64(fid) || len(lg.Revisions) < 2 {
		t.Fatalf("log of the restored file: file %d (want %d), %d revisions, deleted %v, %v", lg.File, fid, len(lg.Revisions), lg.Deleted, err)
	}
	if n := len(deletedPaths(t, c, "")); n != 0 {
		t.Errorf("%d deleted files after the restore", n)
	}
	if b, err := os.ReadFile(l.mnt + "/.snapshots/during/notes.txt"); err != nil || !bytes.Equal(b, old) {
		t.Errorf("the snapshot's copy: %d bytes, %v", len(b), err)
	}
}
