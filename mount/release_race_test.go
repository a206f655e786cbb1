package mount

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
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
