package mount

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestRestoreKeepsOpenWriterContent: a restore of a file that another
// process holds open for writing first records what that writer wrote
// and has not closed or fsynced, so its content is in a revision (the
// restore truncates the file under it); then the restored revision.
func TestRestoreKeepsOpenWriterContent(t *testing.T) {
	store := t.TempDir() + "/store"
	l := start(t, store)
	ctx := context.Background()
	v0 := bytes.Repeat([]byte("version zero\n"), 500)
	v1 := bytes.Repeat([]byte("version one!\n"), 500)
	for i, v := range [][]byte{v0, v1} { // two revisions: a snapshot records each
		mustDo(t, os.WriteFile(l.mnt+"/f", v, 0o644))
		mustDo(t, os.Mkdir(l.mnt+"/.snapshots/s"+string(rune('0'+i)), 0o755))
	}
	w, err := os.OpenFile(l.mnt+"/f", os.O_WRONLY, 0)
	mustDo(t, err)
	defer w.Close()
	unsaved := []byte("UNSAVED WORK")
	if _, err := w.WriteAt(unsaved, 100); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(v1)
	copy(want[100:], unsaved)

	c := connect(t, l.mnt, false)
	fr, err := c.Restore(ctx, Target{Path: "f"}, new(uint32))
	mustDo(t, err)
	info := fr.Revision
	if info.P2 == nil || info.P2.Rev != 0 {
		t.Fatalf("restore: %+v", info)
	}
	if b, err := os.ReadFile(l.mnt + "/f"); err != nil || !bytes.Equal(b, v0) {
		t.Errorf("live file after the restore: %d bytes, %v", len(b), err)
	}
	lg, err := c.Log(ctx, Target{Path: "f"})
	mustDo(t, err)
	var kept bool
	for _, r := range lg.Revisions {
		rev := r.Rev
		_, data, err := CatBytes(ctx, c, Target{Path: "f"}, RevSpec{Rev: &rev})
		mustDo(t, err)
		if bytes.Equal(data, want) {
			kept = true
			if r.Rev >= info.Rev {
				t.Errorf("the open writer's content is revision %d, after the restore's %d", r.Rev, info.Rev)
			}
		}
	}
	if !kept {
		t.Fatalf("no revision holds the open writer's unsaved content: %s", revNums(lg))
	}
	if _, data, err := CatBytes(ctx, c, Target{Path: "f"}, RevSpec{}); err != nil || !bytes.Equal(data, v0) {
		t.Fatalf("newest revision after the restore: %d bytes, %v; log %s", len(data), err, revNums(lg))
	}
}

// TestOfflineRestoreKeepsUnrecordedChange: a mount killed with a change
// not recorded leaves it in the live file for the next mount to record;
// a restore on the unmounted store records it first, as a revision of
// its own, instead of writing over the only copy.
func TestOfflineRestoreKeepsUnrecordedChange(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	ctx := context.Background()
	l := start(t, store)
	mustDo(t, os.WriteFile(l.mnt+"/f", []byte("one\n"), 0o644))
	mustDo(t, l.rec.Sync(ctx))
	l.stop(t)
	two := []byte("two: left unrecorded by a killed mount\n")
	mustDo(t, os.WriteFile(filepath.Join(store, liveDir, "f"), two, 0o644))
	mustDo(t, os.WriteFile(filepath.Join(store, mountedFile), []byte(bootID()), 0o600))

	off := connect(t, store, false)
	fr, err := off.Restore(ctx, Target{Path: "f"}, ptr(uint32(0)))
	if err != nil || fr.Revision.Rev != 2 || fr.Revision.P2 == nil || fr.Revision.P2.Rev != 0 {
		t.Fatalf("offline restore: %+v, %v; want revision 2, second parent 0", fr.Revision, err)
	}
	for rev, want := range [][]byte{[]byte("one\n"), two, []byte("one\n")} {
		if _, data, err := CatBytes(ctx, off, Target{Path: "f"}, RevSpec{Rev: ptr(uint32(rev))}); err != nil || !bytes.Equal(data, want) {
			t.Fatalf("revision %d: %q, %v; want %q", rev, data, err, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(store, liveDir, "f")); !bytes.Equal(b, []byte("one\n")) {
		t.Fatalf("live file after the restore: %q", b)
	}
}
