package fs

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
)

// TestSpillSharedByTheOpens: the opens of one text share one spilled
// file; when the first open's spill fails, the later opens of the set
// stay in memory with it (the kernel refuses passthrough beside a cached
// open of the inode), and the next set spills again.
func TestSpillSharedByTheOpens(t *testing.T) {
	ctx := context.Background()
	text := bytes.Repeat([]byte("spilled text "), 1000)
	read := func(context.Context) ([]byte, error) { return bytes.Clone(text), nil }
	dir := t.TempDir()
	var st sharedText

	st.open()
	f1, spillErr, err := st.spill(ctx, filepath.Join(dir, "nosuch"), read)
	if f1 != nil || spillErr == nil || err != nil {
		t.Fatalf("spill into a missing directory: %v, %v, %v", f1, spillErr, err)
	}
	st.open()
	if f2, spillErr, err := st.spill(ctx, dir, read); f2 != nil || spillErr != nil || err != nil {
		t.Fatalf("a second open beside one in memory: %v, %v, %v; want memory", f2, spillErr, err)
	}
	if b, err := st.get(ctx, uint64(len(text)), read); err != nil || !bytes.Equal(b, text) {
		t.Fatalf("in memory: %d bytes, %v", len(b), err)
	}
	st.release()
	st.release()

	st.open()
	f3, spillErr, err := st.spill(ctx, dir, read)
	if f3 == nil || spillErr != nil || err != nil {
		t.Fatalf("a new set of opens: %v, %v, %v; want a spilled file", f3, spillErr, err)
	}
	st.open()
	if f4, _, _ := st.spill(ctx, dir, read); f4 != f3 {
		t.Fatal("a second open does not share the spilled file")
	}
	got := make([]byte, len(text))
	if n, err := f3.ReadAt(got, 0); n != len(text) || !bytes.Equal(got, text) {
		t.Fatalf("spilled file: %d bytes, %v", n, err)
	}
	st.release()
	st.release()
	if st.file != nil || st.data != nil {
		t.Fatal("the last release kept the text")
	}
}
