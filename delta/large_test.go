//go:build linux

package delta

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// sparseFile writes a file of size bytes that is a hole except for the given
// blocks, and maps it read-only. Neither the file nor the mapping costs memory
// beyond the blocks, so tests can use inputs past 4 GiB.
func sparseFile(t *testing.T, size int64, blocks map[int64][]byte) (*os.File, []byte) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), fmt.Sprintf("sparse-%d", len(blocks))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for off, b := range blocks {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(m) })
	return f, m
}

// TestOver4GiB encodes an insertion past the 4 GiB mark of a 4.25 GiB file and
// checks, by streaming, that the delta rebuilds the target exactly.
func TestOver4GiB(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 8.5 GiB of sparse files")
	}
	const size = 4<<30 + 256<<20
	const at = 4<<30 + 123
	ins := textLike(1, 1000)
	data := textLike(2, 64<<10)
	baseFile, base := sparseFile(t, size, map[int64][]byte{0: data, 1 << 30: data, 4<<30 + 128<<20: data})
	_, target := sparseFile(t, size+int64(len(ins)), map[int64][]byte{
		0: data, 1 << 30: data, at: ins, 4<<30 + 128<<20 + int64(len(ins)): data,
	})
	d := Encode(base, target)
	if len(d) > 1100 {
		t.Fatalf("1000-byte insertion past 4 GiB gave a %d-byte delta", len(d))
	}
	w := &compareWriter{want: target}
	if err := ApplyStream(w, baseFile, size, d); err != nil {
		t.Fatal(err)
	}
	if w.pos != len(target) {
		t.Fatalf("stream produced %d bytes, want %d", w.pos, len(target))
	}
}

// compareWriter checks everything written to it against want, in order.
type compareWriter struct {
	want []byte
	pos  int
}

func (w *compareWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.want)-w.pos || !bytes.Equal(p, w.want[w.pos:w.pos+len(p)]) {
		return 0, fmt.Errorf("output differs at or after offset %d", w.pos)
	}
	w.pos += len(p)
	return len(p), nil
}
