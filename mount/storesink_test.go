package mount

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/objstore"
)

// sinkOf returns the storeSink behind a live mount's recorder.
func (l *live) sink(t *testing.T) *storeSink {
	t.Helper()
	sink := l.rec.sink
	if js, ok := sink.(journalSink); ok {
		sink = js.ls
	}
	ls, ok := sink.(*lockedSink)
	if !ok {
		t.Fatalf("recorder sink is %T, want *lockedSink", l.rec.sink)
	}
	return ls.sink
}

// TestInPlaceWriteCostsTheWrite: recording a 4 KiB write into a 64 MiB file
// reads about 4 KiB of the live file and hashes nothing; every revision
// reads back identical and the store verifies clean.
func TestInPlaceWriteCostsTheWrite(t *testing.T) {
	const size, write = 64 << 20, 4096
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := filepath.Join(l.mnt, "big")
	want := [][]byte{testutil.Bytes(1, size)}
	if err := os.WriteFile(p, want[0], 0o644); err != nil {
		t.Fatal(err)
	}
	l.recorded(t, 1)
	sink := l.sink(t)
	for i := range 5 {
		read0, hashed0 := sink.liveRead.Load(), storeStats(t, sink.st).HashedBytes
		b := testutil.Bytes(uint64(10+i), write)
		off := int64(i)*(size/5) + 12345
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		writeAtT(t, f, off, b)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		next := bytes.Clone(want[len(want)-1])
		copy(next[off:], b)
		want = append(want, next)
		l.recorded(t, uint64(len(want)))
		read, hashed := sink.liveRead.Load()-read0, storeStats(t, sink.st).HashedBytes-hashed0
		t.Logf("revision %d: %d bytes read from the live file, %d hashed", i+1, read, hashed)
		if read > 2*write || hashed != 0 {
			t.Errorf("revision %d after a %d-byte write: read %d bytes, hashed %d; want about the write and none", i+1, write, read, hashed)
		}
	}
	l.stop(t)
	st, revs := revisions(t, store)
	if len(revs[1]) != len(want) {
		t.Fatalf("%d revisions, want %d", len(revs[1]), len(want))
	}
	for i, e := range revs[1] {
		got, err := st.Get(context.Background(), e.ID())
		if err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("revision %d reads back wrong (%v)", i, err)
		}
		if deferred := e.Flags&index.FlagHashDeferred != 0; deferred != (i > 0) {
			t.Errorf("revision %d: deferred hash %v", i, deferred)
		}
	}
	n, err := st.Verify(context.Background(), func(p objstore.Problem) { t.Errorf("verify: %v", p) })
	if err != nil || n != 0 {
		t.Fatalf("verify: %d problems, %v", n, err)
	}
}

// TestBigNewFileStreamed: a new file of 40 MiB (over the store's 32 MiB
// for chunked fulltexts), written through the mount, is recorded as a
// streamed chunked fulltext: its live file read and hashed once; its
// rewrite (a revision with a parent) is put from the whole text; both
// read back and the store verifies clean.
func TestBigNewFileStreamed(t *testing.T) {
	const size = 40 << 20
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := filepath.Join(l.mnt, "big")
	sink := l.sink(t)
	want := [][]byte{bytes.Repeat(testutil.Bytes(1, 4096), size/4096)}
	read0, hashed0 := sink.liveRead.Load(), storeStats(t, sink.st).HashedBytes
	if err := os.WriteFile(p, want[0], 0o644); err != nil {
		t.Fatal(err)
	}
	l.recorded(t, 1)
	read, hashed := sink.liveRead.Load()-read0, storeStats(t, sink.st).HashedBytes-hashed0
	if read != size || hashed != size {
		t.Errorf("first revision: %d bytes read from the live file, %d hashed; want %d once", read, hashed, size)
	}
	want = append(want, testutil.Bytes(2, size))
	if err := os.WriteFile(p, want[1], 0o644); err != nil {
		t.Fatal(err)
	}
	l.recorded(t, 2)
	l.stop(t)
	st, revs := revisions(t, store)
	if len(revs[1]) != len(want) {
		t.Fatalf("%d revisions, want %d", len(revs[1]), len(want))
	}
	// Compressible, so smaller than the text unless the appender stored
	// its chunks raw to save time (FlagFastZstd).
	if e := revs[1][0]; e.Kind != index.KindFull || e.Flags&index.FlagChunked == 0 ||
		uint64(e.Stored) >= e.Size && e.Flags&index.FlagFastZstd == 0 {
		t.Errorf("first revision stored as %v, flags %v, %d of %d bytes", e.Kind, e.Flags, e.Stored, e.Size)
	}
	for i, e := range revs[1] {
		got, err := st.Get(context.Background(), e.ID())
		if err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("revision %d reads back wrong (%v)", i, err)
		}
	}
	n, err := st.Verify(context.Background(), func(p objstore.Problem) { t.Errorf("verify: %v", p) })
	if err != nil || n != 0 {
		t.Fatalf("verify: %d problems, %v", n, err)
	}
}

// TestBigSparseFileStreamed: a new sparse file of 64 MiB with 4 KiB of
// data is recorded through the store's mapping of the live file
// (countingReader is an objstore.FileReader): its holes are found and
// not read, and the store keeps bytes, not megabytes. (The wrapper
// used to hide the file from the store, which then read every hole.)
func TestBigSparseFileStreamed(t *testing.T) {
	const size = 64 << 20
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := filepath.Join(l.mnt, "sparse")
	sink := l.sink(t)
	data := testutil.Bytes(3, 4096)
	f, err := os.Create(p)
	mustDo(t, err)
	mustDo(t, f.Truncate(size))
	if _, err := f.WriteAt(data, size/2); err != nil {
		t.Fatal(err)
	}
	read0, stored0 := sink.liveRead.Load(), storeStats(t, sink.st).StoredBytes
	mustDo(t, f.Close())
	l.recorded(t, 1)
	read, stored := sink.liveRead.Load()-read0, storeStats(t, sink.st).StoredBytes-stored0
	if read > size/4 || stored > 64<<10 {
		t.Errorf("sparse first revision: %d of %d bytes read from the live file, %d stored", read, size, stored)
	}
	l.stop(t)
	st, revs := revisions(t, store)
	want := make([]byte, size)
	copy(want[size/2:], data)
	if got, err := st.Get(context.Background(), revs[1][0].ID()); err != nil || !bytes.Equal(got, want) {
		t.Errorf("sparse revision reads back wrong: %d bytes, %v", len(got), err)
	}
}

func storeStats(t testing.TB, st *objstore.Store) objstore.Stats {
	t.Helper()
	s, err := st.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// BenchmarkRecordInPlaceWrite records 4 KiB in-place writes into a 64 MiB
// live file through the store sink (real files, real store, no FUSE) and
// reports the live-file bytes read per recorded revision.
func BenchmarkRecordInPlaceWrite(b *testing.B) {
	const size, write = 64 << 20, 4096
	dir, _, sink := openTestSink(b)
	path := filepath.Join(dir, "live")
	if err := os.WriteFile(path, testutil.Bytes(1, size), 0o644); err != nil {
		b.Fatal(err)
	}
	id := fs.NewFileID()
	record := func(c fs.Change) {
		var err error
		if c.Content, err = os.Open(path); err != nil {
			b.Fatal(err)
		}
		if err := sink.Record(context.Background(), Event{Change: &c}); err != nil {
			b.Fatal(err)
		}
	}
	record(fs.Change{Path: "live", ID: id, Size: size, Whole: true, New: true})
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := testutil.Bytes(2, write)
	read0 := sink.liveRead.Load()
	b.SetBytes(write)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		off := int64(i*7919*write) % (size - write)
		buf[0]++
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
		record(fs.Change{Path: "live", ID: id, Size: size, Kept: size, Dirty: []fs.Range{{Off: off, Len: write}}})
	}
	b.ReportMetric(float64(sink.liveRead.Load()-read0)/float64(b.N), "live-bytes-read/rev")
}

// openTestSink creates a store and a store sink in a fresh directory (the
// sink's live.ids beside the store), both closed when tb ends.
func openTestSink(tb testing.TB) (dir string, st *objstore.Store, sink *storeSink) {
	tb.Helper()
	dir = tb.TempDir()
	st, err := objstore.Open(filepath.Join(dir, "s.dfs"), objstore.Config{Create: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	sink, err = openStoreSink(st, filepath.Join(dir, idsFile), quiet())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sink.Close() })
	return dir, st, sink
}
