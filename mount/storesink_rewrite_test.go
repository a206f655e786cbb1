package mount

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/objstore"
)

// TestRewriteRecordsTheChange: a file rewritten wholesale through the
// mount (O_TRUNC, write all, close) with a small edit each time costs the
// store a small delta per revision, not its written bytes, and is read
// once per revision; every revision
// reads back and the store verifies clean.
func TestRewriteRecordsTheChange(t *testing.T) {
	const size = 4 << 20
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := filepath.Join(l.mnt, "text")
	want := [][]byte{textBytes(1, size)}
	if err := os.WriteFile(p, want[0], 0o644); err != nil {
		t.Fatal(err)
	}
	l.recorded(t, 1)
	read0 := l.sink(t).liveRead.Load()
	for i := range 5 {
		next := bytes.Clone(want[len(want)-1])
		copy(next[(i+1)*size/7:], fmt.Sprintf("<edit %d>", i))
		if err := os.WriteFile(p, next, 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, next)
		l.recorded(t, uint64(len(want)))
	}
	// Once, as a diff against the previous text: not the written ranges
	// first (a literal delta of the whole file, compressed, then refused
	// as no smaller than the text) and then the whole file again.
	if read := l.sink(t).liveRead.Load() - read0; read > 5*size {
		t.Errorf("5 rewrites of %d bytes read %d bytes of the live file, want each read once", size, read)
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
		if i > 0 && e.Stored > 4096 {
			t.Errorf("revision %d (a 9-byte edit of a rewritten %d-byte file) stored in %d bytes", i, size, e.Stored)
		}
	}
	n, err := st.Verify(context.Background(), func(p objstore.Problem) { t.Errorf("verify: %v", p) })
	if err != nil || n != 0 {
		t.Fatalf("verify: %d problems, %v", n, err)
	}
}

// BenchmarkRecordRewrite records wholesale rewrites (O_TRUNC, write all) of
// an 8 MiB text with a few small edits each, M6's pattern, through the store
// sink (real files, real store, no FUSE).
func BenchmarkRecordRewrite(b *testing.B) {
	const size = 8 << 20
	dir, _, sink := openTestSink(b)
	path := filepath.Join(dir, "live")
	text := textBytes(1, size)
	id := fs.NewFileID()
	record := func(c fs.Change) {
		if err := os.WriteFile(path, text, 0o644); err != nil {
			b.Fatal(err)
		}
		var err error
		if c.Content, err = os.Open(path); err != nil {
			b.Fatal(err)
		}
		if err := sink.Record(context.Background(), Event{Change: &c}); err != nil {
			b.Fatal(err)
		}
	}
	record(fs.Change{Path: "live", ID: id, Size: size, Whole: true, New: true})
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for k := range 3 {
			off := (i*7919 + k*104729) * 61 % (len(text) - 200)
			copy(text[off:], fmt.Sprintf("edit %d.%d ", i, k))
		}
		record(fs.Change{Path: "live", ID: id, Size: int64(len(text)), Dirty: []fs.Range{{Off: 0, Len: int64(len(text))}}})
	}
}

// textBytes returns n bytes of text-like data (words and lines), which
// compresses about as well as source code.
func textBytes(seed uint64, n int) []byte {
	words := strings.Fields("the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her she there been one all we their has would when if so no will can more out up into do any your what time about")
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]byte, 0, n+16)
	for len(out) < n {
		out = append(out, words[r.IntN(len(words))]...)
		if r.IntN(12) == 0 {
			out = append(out, '\n')
		} else {
			out = append(out, ' ')
		}
	}
	return out[:n]
}

// TestBackToBackRewrites: O_TRUNC rewrites in a tight loop (M6's
// pattern) wait at each open only until the previous change is read
// (Recorder.WaitRead), not until it is stored, and each truncation waits
// for a change reported by a late RELEASE: every revision reads back as
// one of the rewrites, in order, ending with the last. (The kernel sends
// RELEASE after close returns; an open waits for it a while, see fs's
// Open, and a rewrite whose open comes after that wait joins the
// previous writer's session: two rewrites may then make one revision.)
func TestBackToBackRewrites(t *testing.T) {
	const size = 1 << 20
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := filepath.Join(l.mnt, "text")
	want := [][]byte{textBytes(2, size)}
	if err := os.WriteFile(p, want[0], 0o644); err != nil {
		t.Fatal(err)
	}
	l.recorded(t, 1) // past the new file's grace
	r := rand.New(rand.NewPCG(3, 3))
	for i := range 40 {
		next := bytes.Clone(want[len(want)-1])
		copy(next[r.IntN(size-16):], fmt.Sprintf("<edit %03d>", i))
		if err := os.WriteFile(p, next, 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, next)
	}
	l.stop(t)
	st, revs := revisions(t, store)
	k := 0
	for i, e := range revs[1] {
		got, err := st.Get(context.Background(), e.ID())
		if err != nil {
			t.Fatalf("revision %d: %v", i, err)
		}
		for k < len(want) && !bytes.Equal(got, want[k]) {
			k++
		}
		if k == len(want) {
			t.Fatalf("revision %d (%d bytes) is none of the rewrites after the previous revision's", i, len(got))
		}
	}
	if k != len(want)-1 {
		t.Fatalf("the last revision is rewrite %d, want the last, %d", k, len(want)-1)
	}
	t.Logf("%d revisions of %d rewrites", len(revs[1]), len(want))
}
