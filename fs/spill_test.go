package fs

import (
	"bytes"
	"context"
	"errors"
	"io"
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
	f1, spillErr, err := st.spill(ctx, filepath.Join(dir, "nosuch"), uint64(len(text)), read, nil)
	if f1 != nil || spillErr == nil || err != nil {
		t.Fatalf("spill into a missing directory: %v, %v, %v", f1, spillErr, err)
	}
	st.open()
	if f2, spillErr, err := st.spill(ctx, dir, uint64(len(text)), read, nil); f2 != nil || spillErr != nil || err != nil {
		t.Fatalf("a second open beside one in memory: %v, %v, %v; want memory", f2, spillErr, err)
	}
	if b, err := st.get(ctx, uint64(len(text)), read); err != nil || !bytes.Equal(b, text) {
		t.Fatalf("in memory: %d bytes, %v", len(b), err)
	}
	st.release()
	st.release()

	st.open()
	f3, spillErr, err := st.spill(ctx, dir, uint64(len(text)), read, nil)
	if f3 == nil || spillErr != nil || err != nil {
		t.Fatalf("a new set of opens: %v, %v, %v; want a spilled file", f3, spillErr, err)
	}
	st.open()
	if f4, _, _ := st.spill(ctx, dir, uint64(len(text)), read, nil); f4 != f3 {
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

// TestSpillWrittenByTheStore: where the store writes the text itself
// (writeText), the file holds what it wrote and read is never called;
// where it declines, read is used; where it fails, the open fails.
func TestSpillWrittenByTheStore(t *testing.T) {
	ctx := context.Background()
	text := bytes.Repeat([]byte("written by the store "), 1000)
	dir := t.TempDir()
	reads := 0
	read := func(context.Context) ([]byte, error) { reads++; return bytes.Clone(text), nil }
	writes := func(ok bool, err error) writeText {
		return func(ctx context.Context, w io.WriterAt) (bool, error) {
			if ok && err == nil {
				for off := 0; off < len(text); off += 4096 {
					if _, err := w.WriteAt(text[off:min(off+4096, len(text))], int64(off)); err != nil {
						return true, err
					}
				}
			}
			return ok, err
		}
	}
	for _, c := range []struct {
		name      string
		write     writeText
		wantReads int
		wantErr   bool
	}{
		{"written", writes(true, nil), 0, false},
		{"declined", writes(false, nil), 1, false},
		{"store error", writes(true, errors.New("corrupt")), 0, true},
	} {
		var st sharedText
		reads = 0
		st.open()
		f, spillErr, err := st.spill(ctx, dir, uint64(len(text)), read, c.write)
		if (err != nil) != c.wantErr || spillErr != nil || reads != c.wantReads {
			t.Fatalf("%s: %v, %v, %d reads", c.name, spillErr, err, reads)
		}
		if !c.wantErr {
			got := make([]byte, len(text)+1)
			if n, _ := f.ReadAt(got, 0); n != len(text) || !bytes.Equal(got[:n], text) {
				t.Fatalf("%s: the file holds %d bytes, not the text", c.name, n)
			}
		}
		st.release()
	}
}
