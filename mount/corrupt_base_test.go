package mount

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// TestRecordOnCorruptBase: a file whose last revision's record is bad is
// recorded again (as a fulltext or a delta on a readable base) and the
// tree snapshots, instead of every put and snapshot failing on that base.
func TestRecordOnCorruptBase(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	var text strings.Builder
	for i := 1; i <= 20000; i++ {
		fmt.Fprintln(&text, i)
	}
	l := start(t, store)
	mustDo(t, os.WriteFile(filepath.Join(l.mnt, "a.txt"), []byte(text.String()), 0o644))
	mustDo(t, os.WriteFile(filepath.Join(l.mnt, "b.txt"), []byte("hello\n"), 0o644))
	mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", "before"), 0o755))
	l.stop(t)

	bad := lastRevOfSize(t, store, uint64(text.Len()))
	seg := filepath.Join(store, "segments", fmt.Sprintf("%08d.seg", bad.Seg))
	flipAt(t, seg, int64(bad.Off+uint64(bad.Stored)/2))

	l = start(t, store)
	f, err := os.OpenFile(filepath.Join(l.mnt, "a.txt"), os.O_WRONLY|os.O_APPEND, 0)
	mustDo(t, err)
	_, err = f.WriteString("20001\n")
	mustDo(t, err)
	mustDo(t, f.Close())
	want := text.String() + "20001\n"
	l.recorded(t, 1)
	if err := os.Mkdir(filepath.Join(l.mnt, ".snapshots", "x"), 0o755); err != nil {
		t.Fatalf("snapshot with a corrupt base in the store: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(l.mnt, ".snapshots", "x", "a.txt"))
	if err != nil || string(got) != want {
		t.Fatalf("a.txt in the snapshot: %d bytes, %v; want %d bytes", len(got), err, len(want))
	}
	l.stop(t)

	st, err := objstore.Open(store, objstore.Config{ReadOnly: true})
	mustDo(t, err)
	defer st.Close()
	var last index.Entry
	mustDo(t, st.Revisions(context.Background(), bad.File, func(e index.Entry) error { last = e; return nil }))
	if last.Rev != bad.Rev+1 || last.Base == bad.ID() {
		t.Fatalf("newest revision of a.txt %v on %v (%v), want %v+1 not on it", last.ID(), last.Base, last.Kind, bad.ID())
	}
	stored, err := st.Get(context.Background(), last.ID())
	if err != nil || !bytes.Equal(stored, []byte(want)) {
		t.Fatalf("%v reads %d bytes, %v; want %d bytes", last.ID(), len(stored), err, len(want))
	}
}

// lastRevOfSize returns the newest revision of the store's file whose
// revision 0 has size n.
func lastRevOfSize(t *testing.T, store string, n uint64) index.Entry {
	t.Helper()
	st, err := objstore.Open(store, objstore.Config{ReadOnly: true})
	mustDo(t, err)
	defer st.Close()
	for f := index.FileID(1); f < 100; f++ {
		var last index.Entry
		st.Revisions(context.Background(), f, func(e index.Entry) error { last = e; return nil })
		if last.Size == n {
			return last
		}
	}
	t.Fatalf("no file of %d bytes in %s", n, store)
	return index.Entry{}
}

// flipAt inverts the byte at off of path.
func flipAt(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	mustDo(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	mustDo(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, off)
	mustDo(t, err)
}
