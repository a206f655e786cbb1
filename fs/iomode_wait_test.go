package fs_test

import (
	"os"
	"reflect"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
)

// TestWriterAfterReaderKeepsRanges: a big file opened for writing right
// after a reader closed it (its RELEASE still on the way, or within the
// passthrough grace) waits for the reader's passthrough mode to end
// instead of joining it, so its change keeps its ranges.
func TestWriterAfterReaderKeepsRanges(t *testing.T) {
	m := mountPassthrough(t)
	p := m.path("db")
	const size = 16 << 20
	if err := os.WriteFile(p, testutil.Bytes(3, size), 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitChanges(t, 1)
	for i := range 5 {
		r, err := os.Open(p) // passthrough
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		if _, err := r.ReadAt(buf, 1<<20); err != nil {
			t.Fatal(err)
		}
		r.Close()
		w, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		off := int64(1<<20 + i*8192)
		writeAt(t, w, off, testutil.Bytes(uint64(i), 4096))
		w.Close()
		c := m.waitChanges(t, 1)[0]
		want := fs.Change{Path: "db", ID: c.ID, Ino: c.Ino, Dirty: []fs.Range{{Off: off, Len: 4096}}, Kept: size, Size: size}
		if !reflect.DeepEqual(c, want) {
			t.Fatalf("write %d right after a read: %+v, want %+v", i, c, want)
		}
	}
}
