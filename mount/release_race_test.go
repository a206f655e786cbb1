package mount

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The kernel sends a file's RELEASE after close(2) returns, and a rename
// over the file may reach the server first: "echo v2 > f; mv t f" must
// still record v2 before the rename makes t's content f's next revision
// (an atomic save), so every f's history reads v1, v2, v3 and its newest
// revision is what the live file holds.
func TestOverwriteThenRenameOverKeepsOrder(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	const n = 150
	p := func(k string, i int) string { return filepath.Join(l.mnt, fmt.Sprint(k, i)) }
	v1, v2, v3 := "v1\n", "v2 changed\n", "v3 new\n"
	for i := range n {
		if err := os.WriteFile(p("f", i), []byte(v1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l.recorded(t, n)
	for i := range n {
		if err := os.WriteFile(p("t", i), []byte(v3), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p("f", i), []byte(v2), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p("t", i), p("f", i)); err != nil {
			t.Fatal(err)
		}
	}
	l.stop(t)
	st, revs := revisions(t, store)
	if len(revs) != n {
		t.Fatalf("%d store files, want %d", len(revs), n)
	}
	bad := 0
	for fid, rs := range revs {
		var got []string
		for _, e := range rs {
			b, err := st.Get(context.Background(), e.ID())
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(b))
		}
		if len(got) != 3 || got[0] != v1 || got[1] != v2 || got[2] != v3 {
			if bad++; bad <= 3 {
				t.Errorf("file %v: revisions %q, want %q", fid, got, []string{v1, v2, v3})
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d files have the wrong history", bad, n)
	}
}

// A new file is held for newFileGrace after its close (an atomic save
// may follow); a writer that reopens it within the grace and rewrites it
// slowly must not have the held change read under it: the first revision
// is the content at the close, the second the rewrite, neither a mix.
func TestReopenDuringGraceKeepsFirstRevision(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := filepath.Join(l.mnt, "f")
	const size, piece = 1 << 20, 128 << 10
	a, b := bytes.Repeat([]byte("a"), size), bytes.Repeat([]byte("b"), size)
	if err := os.WriteFile(p, a, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < size; off += piece { // 8 pieces, past the grace
		writeAtT(t, f, int64(off), b[off:off+piece])
		time.Sleep(newFileGrace / 5)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	l.stop(t)
	st, revs := revisions(t, store)
	if len(revs) != 1 {
		t.Fatalf("%d store files, want 1", len(revs))
	}
	for _, rs := range revs {
		if len(rs) != 2 {
			t.Fatalf("%d revisions, want 2", len(rs))
		}
		for i, want := range [][]byte{a, b} {
			got, err := st.Get(context.Background(), rs[i].ID())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("revision %d: %d bytes, %d of them 'a'; want %d bytes of %q", i, len(got), bytes.Count(got, []byte("a")), size, want[:1])
			}
		}
	}
}
