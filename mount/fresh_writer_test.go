package mount

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/objstore"
)

// TestFreshWriterRecordsTheLiveFile: a file created through the mount
// (a passthrough writer where the kernel offers it: its writes bypass the
// server, its changes are Whole) and kept open for in-place writes and
// fsyncs while a reader reads it, then rewritten with O_TRUNC: every
// revision reads back as the live file was at its fsync or close, and
// the store verifies clean.
func TestFreshWriterRecordsTheLiveFile(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := filepath.Join(l.mnt, "db")
	var want [][]byte
	cur := testutil.Bytes(21, 1<<20)
	w, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	writeAtT(t, w, 0, cur)
	synced := func() {
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		want = append(want, bytes.Clone(cur))
		l.recorded(t, uint64(len(want)))
	}
	synced()
	r, err := os.Open(p) // a reader while the writer is open
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := testutil.Bytes(22, 4096)
	writeAtT(t, w, 300_000, b)
	copy(cur[300_000:], b)
	got := make([]byte, len(b))
	if _, err := r.ReadAt(got, 300_000); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("reader misses the writer's bytes (%v)", err)
	}
	synced()
	writeAtT(t, w, int64(len(cur)), []byte("appended"))
	cur = append(cur, "appended"...)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want = append(want, bytes.Clone(cur))
	l.recorded(t, uint64(len(want)))
	cur = testutil.Bytes(23, 200_000)
	if err := os.WriteFile(p, cur, 0o644); err != nil { // O_TRUNC rewrite
		t.Fatal(err)
	}
	want = append(want, cur)
	l.recorded(t, uint64(len(want)))
	r.Close()
	l.stop(t)
	st, revs := revisions(t, store)
	if len(revs[1]) != len(want) {
		t.Fatalf("%d revisions, want %d", len(revs[1]), len(want))
	}
	for i, e := range revs[1] {
		got, err := st.Get(context.Background(), e.ID())
		if err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("revision %d (%v) reads back wrong: %d bytes, want %d (%v)", i, e.Kind, len(got), len(want[i]), err)
		}
	}
	n, err := st.Verify(context.Background(), func(p objstore.Problem) { t.Errorf("verify: %v", p) })
	if err != nil || n != 0 {
		t.Fatalf("verify: %d problems, %v", n, err)
	}
}
