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
