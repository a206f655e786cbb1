package mount

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
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
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			mustDo(t, err)
			_, err = f.WriteAt([]byte("changed"), 30<<20)
			mustDo(t, err)
			mustDo(t, f.Close())
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
