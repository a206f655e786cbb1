package mount

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
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
// slowly must not have the held change read under it: the held change
// waits for the writer's close and is recorded as the file then is, not
// as a mix of the two versions.
func TestReopenDuringGraceIsNotReadUnderTheWriter(t *testing.T) {
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
	revs := onlyFile(t, store)
	for i, rev := range revs {
		if !bytes.Equal(rev, a) && !bytes.Equal(rev, b) {
			t.Fatalf("revision %d: %d bytes, %d of them 'a': a mix of the two versions", i, len(rev), bytes.Count(rev, []byte("a")))
		}
	}
	if !bytes.Equal(revs[len(revs)-1], b) {
		t.Fatal("the last revision is not the rewrite")
	}
}

// An atomic save whose temp file is reopened for writing before the
// rename ("cp f t; echo x >> t; mv t f") still continues f's history.
func TestReopenedTempFileContinuesTheOriginal(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := func(n string) string { return filepath.Join(l.mnt, n) }
	orig := testutil.Bytes(3, 200_000)
	if err := os.WriteFile(p("f"), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	l.recorded(t, 1)
	if err := os.WriteFile(p("t"), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p("t"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("appended\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p("t"), p("f")); err != nil {
		t.Fatal(err)
	}
	l.stop(t)
	revs := onlyFile(t, store) // the temp file continues f
	want := append(bytes.Clone(orig), "appended\n"...)
	if len(revs) != 2 || !bytes.Equal(revs[0], orig) || !bytes.Equal(revs[1], want) {
		t.Fatalf("%d revisions; want f's content then the saved one", len(revs))
	}
}

// contents reads every revision of every file of the unmounted store.
func contents(t *testing.T, store string) map[index.FileID][][]byte {
	t.Helper()
	st, revs := revisions(t, store)
	out := map[index.FileID][][]byte{}
	for fid, rs := range revs {
		for _, e := range rs {
			b, err := st.Get(context.Background(), e.ID())
			if err != nil {
				t.Fatal(err)
			}
			out[fid] = append(out[fid], b)
		}
	}
	return out
}

// onlyFile reads every revision of the one file of the unmounted store,
// and fails t if the store has another number of files.
func onlyFile(t *testing.T, store string) [][]byte {
	t.Helper()
	got := contents(t, store)
	if len(got) != 1 {
		t.Fatalf("%d store files, want 1", len(got))
	}
	for _, revs := range got {
		return revs
	}
	return nil
}
