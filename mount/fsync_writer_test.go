package mount

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A writer that keeps its handle open after an fsync and goes on
// rewriting the file: the change of an fsync held back for the interval
// must not be read while the next version is being written, so every
// revision is one whole version. Both kinds of writer: a new file's
// (passthrough: the mount sees none of its writes) and an existing
// file's (its writes come through the mount).
func TestFsyncedWriterKeepsWritingRevisionsAreWhole(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "s.dfs")
			l := start(t, store) // fsync interval 50 ms
			p := filepath.Join(l.mnt, "db")
			const size, piece = 1 << 20, 128 << 10
			version := func(k int) []byte { return bytes.Repeat([]byte{byte('a' + k)}, size) }
			if existing {
				if err := os.WriteFile(p, version(0), 0o644); err != nil {
					t.Fatal(err)
				}
				l.recorded(t, 1)
			}
			f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			write := func(k int, slow bool) {
				v := version(k)
				for off := 0; off < size; off += piece {
					writeAtT(t, f, int64(off), v[off:off+piece])
					if slow { // past the interval: a held change's timer fires meanwhile
						time.Sleep(15 * time.Millisecond)
					}
				}
			}
			const n = 6
			for k := 1; k <= n; k += 2 {
				write(k, false)
				if err := f.Sync(); err != nil { // recorded now, or held
					t.Fatal(err)
				}
				write(k+1, false)
				if err := f.Sync(); err != nil { // within the interval: held
					t.Fatal(err)
				}
				write(k+2, true)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			l.stop(t)
			revs := onlyFile(t, store)
			for i, rev := range revs {
				if len(rev) != size || bytes.Count(rev, rev[:1]) != size {
					t.Fatalf("revision %d of %d: a mix of versions (%d bytes, %d of them %q)",
						i, len(revs), len(rev), bytes.Count(rev, rev[:1]), rev[:1])
				}
			}
			if last := revs[len(revs)-1]; !bytes.Equal(last, version(n+1)) {
				t.Fatalf("last revision is version %q, want %q", last[:1], version(n + 1)[:1])
			}
		})
	}
}

// An editor that fsyncs each save (vim's :w) and closes the file: a save
// within the fsync interval of the one before is held for the interval,
// but once its writer has closed it is a closed change, a revision of
// its own. It was left held, and the next change of the file within the
// interval (an append, a save without fsync) merged with it: the saved
// version was in no revision (a user review, vim's two saves then
// `echo >>`).
func TestClosedFsyncedSavesAreRevisions(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := startWith(t, Config{Store: store, FsyncInterval: time.Hour})
	p := filepath.Join(l.mnt, "g")
	if err := os.WriteFile(p, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.recorded(t, 1)
	save := func(text string) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	save("b\n") // the first fsync: recorded at once
	save("c\n") // within the interval: held while its writer is open
	// The kernel releases a closed file asynchronously; once it has,
	// nothing may be held any more.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		l.rec.mu.Lock()
		held := len(l.rec.held)
		l.rec.mu.Unlock()
		if held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fsynced save is still held 10 s after its writer closed")
		}
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("appended\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	l.stop(t)
	var got []string
	for _, rev := range onlyFile(t, store) {
		got = append(got, string(rev))
	}
	want := []string{"a\n", "b\n", "c\n", "c\nappended\n"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("revisions %q, want %q", got, want)
	}
}
