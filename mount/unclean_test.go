package mount

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
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
		_, data, err := connect(t, l.mnt, false).Cat(ctx, Target{Path: "d/a.txt"}, RevSpec{})
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

	// A clean end: a change behind the mount's back is not looked for.
	mustDo(t, os.WriteFile(liveA, []byte("two, not looked for\n"), 0o644))
	l = start(t, store)
	mustDo(t, l.rec.Sync(ctx))
	if got := newest(l); !bytes.Equal(got, []byte("one\n")) {
		t.Fatalf("after a clean unmount the mount recorded %q", got)
	}
	l.stop(t)

	// An unclean end: the next mount finds the change.
	three := []byte("three: kept by the disk, named by no journal record\n")
	mustDo(t, os.WriteFile(liveA, three, 0o644))
	mustDo(t, os.WriteFile(mark, nil, 0o600))
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
