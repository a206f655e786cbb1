package mount

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/objstore"
)

// spilledFiles counts this process's descriptors of unlinked files in
// the store's live directory: the big texts of .snapshots and .history
// held open (fs's spill.go). The mount runs in the test's process.
func spilledFiles(t *testing.T, store string) int {
	t.Helper()
	live, err := filepath.EvalSymlinks(filepath.Join(store, "live"))
	if err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(target, live+"/") && strings.HasSuffix(target, " (deleted)") {
			n++
		}
	}
	return n
}

// awaitSpilled waits until spilledFiles is want (the kernel sends the
// RELEASE of a closed file after close returns).
func awaitSpilled(t *testing.T, store string, want int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); spilledFiles(t, store) != want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d texts spilled, want %d", spilledFiles(t, store), want)
		}
	}
}

// TestBigOldTextsSpilled: a big file's old content, opened in a snapshot
// and in .history, is read from one unlinked file per text while open,
// shared by its opens, and gone after the last close; it reads back
// exactly, through passthrough and through the server.
func TestBigOldTextsSpilled(t *testing.T) {
	for _, noPT := range []bool{false, true} {
		t.Run(map[bool]string{false: "passthrough", true: "server"}[noPT], func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "store")
			l := startWith(t, Config{Store: store, testNoPassthrough: noPT})
			p := filepath.Join(l.mnt, "big")
			old := testutil.Bytes(7, 40<<20)
			mustDo(t, os.WriteFile(p, old, 0o644))
			l.recorded(t, 1)
			mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", "s"), 0o755))
			writeAt(t, p, 30<<20, "changed")
			l.recorded(t, 2)

			ents, err := os.ReadDir(filepath.Join(l.mnt, ".history", "big"))
			mustDo(t, err)
			if len(ents) != 2 {
				t.Fatalf("%d revisions, want 2", len(ents))
			}
			for _, q := range []string{
				filepath.Join(l.mnt, ".snapshots", "s", "big"),
				filepath.Join(l.mnt, ".history", "big", ents[0].Name()),
			} {
				a, err := os.Open(q)
				mustDo(t, err)
				b, err := os.Open(q)
				mustDo(t, err)
				if n := spilledFiles(t, store); n != 1 {
					t.Fatalf("%s open twice: %d texts spilled, want 1", q, n)
				}
				got := make([]byte, len(old)+1)
				n, err := a.ReadAt(got, 0)
				if n != len(old) || !bytes.Equal(got[:n], old) {
					t.Fatalf("%s: read %d bytes (%v), not the old content", q, n, err)
				}
				tail := make([]byte, 4096)
				if _, err := b.ReadAt(tail, 30<<20); err != nil || !bytes.Equal(tail, old[30<<20:30<<20+4096]) {
					t.Fatalf("%s at 30 MiB: %v", q, err)
				}
				a.Close()
				b.Close()
				awaitSpilled(t, store, 0)
			}
		})
	}
}

// TestBigDeltaRevisionSpilledUnbuilt: an old revision of a big file that
// is a delta (an in-place write on its first revision), opened in
// .history and in a snapshot, is rebuilt in its spilled file, never
// whole in the mount's memory, and reads back exactly.
func TestBigDeltaRevisionSpilledUnbuilt(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	p := filepath.Join(l.mnt, "big")
	text := testutil.Bytes(9, 40<<20)
	mustDo(t, os.WriteFile(p, text, 0o644))
	l.recorded(t, 1)
	writeAt(t, p, 30<<20, "changed")
	l.recorded(t, 2)
	mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", "s"), 0o755))
	want := bytes.Clone(text)
	copy(want[30<<20:], "changed")
	mustDo(t, os.WriteFile(p, []byte("small now"), 0o644))
	l.recorded(t, 3)

	st := l.sink(t).st
	stats := func() objstore.Stats {
		s, err := st.Stats(context.Background())
		mustDo(t, err)
		return s
	}
	before := stats().RebuiltBytes
	ents, err := os.ReadDir(filepath.Join(l.mnt, ".history", "big"))
	mustDo(t, err)
	if len(ents) != 3 {
		t.Fatalf("%d revisions, want 3", len(ents))
	}
	for _, q := range []string{
		filepath.Join(l.mnt, ".history", "big", ents[1].Name()),
		filepath.Join(l.mnt, ".snapshots", "s", "big"),
	} {
		got, err := os.ReadFile(q)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes (%v), not the revision's content", q, len(got), err)
		}
		awaitSpilled(t, store, 0)
	}
	if n := stats().RebuiltBytes - before; n != 0 {
		t.Errorf("opening the delta revision rebuilt %d bytes in memory", n)
	}
}

// writeAt writes b into the file at p at off, in place, and closes it.
func writeAt(t *testing.T, p string, off int64, b string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	mustDo(t, err)
	writeAtT(t, f, off, []byte(b))
	mustDo(t, f.Close())
}
