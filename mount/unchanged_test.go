package mount

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
)

// A rewrite that changes no byte records no revision: a file rewritten
// with its own content (small, and big enough to be compared without
// being read whole), an atomic save of an unmodified buffer (quick, and
// slow enough for the temp file to have a history of its own); a real
// change after them is the next revision, and the store stays as big as
// before the unchanged rewrites.
func TestUnchangedRewritesRecordNoRevision(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := func(n string) string { return filepath.Join(l.mnt, n) }
	write := func(n string, b []byte) {
		t.Helper()
		if err := os.WriteFile(p(n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rename := func(from, to string) {
		t.Helper()
		if err := os.Rename(p(from), p(to)); err != nil {
			t.Fatal(err)
		}
	}
	v1, big := []byte("v1\n"), testutil.Bytes(3, 33<<20)
	write("f", v1)
	write("big", big)
	l.recorded(t, 2)
	stored := dirBytes(t, filepath.Join(store, "segments"))

	write("f", v1)
	write("big", big)
	l.recorded(t, 4)
	write(".f.swp", v1) // a quick save: the temp file has no history yet
	rename(".f.swp", "f")
	l.recorded(t, 5)
	write("f.new", v1) // a slow one: recorded on its own first
	l.recorded(t, 6)
	rename("f.new", "f")
	if got := dirBytes(t, filepath.Join(store, "segments")); got != stored {
		t.Errorf("unchanged rewrites grew the store from %d to %d bytes", stored, got)
	}
	write("f", []byte("v2\n"))
	l.recorded(t, 7)
	l.stop(t)

	if h := historyAt(t, store, "f"); !equal(h, []string{"v1\n", "v2\n"}) {
		t.Errorf("f's history %q, want v1 and v2 alone", h)
	}
	h := historyAt(t, store, "big")
	if len(h) != 1 || !bytes.Equal([]byte(h[0]), big) {
		t.Errorf("big has %d revisions, want its first alone", len(h))
	}
}

// dirBytes sums the sizes of the files in dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}
