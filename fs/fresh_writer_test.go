package fs_test

import (
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
)

// TestFreshWritersUsePassthrough: a created file's writer uses
// passthrough (the change is Whole, journaled before the open returns);
// a reader and a second writer may open meanwhile; fsync and close
// report the change; an O_TRUNC rewrite is reported from a Kept of 0
// (go-fuse does not negotiate atomic O_TRUNC, so the kernel truncates
// after a plain OPEN, which keeps the cached mode); an in-place writer
// opened later, with no passthrough handle left, is back to ranges.
func TestFreshWritersUsePassthrough(t *testing.T) {
	if os.Getenv("NOPT") != "" || os.Geteuid() != 0 {
		t.Skip("passthrough off, or not root")
	}
	m := mountLive(t)
	p := m.path("a")
	w, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if l := m.rec.takeLog(); !slices.Equal(l, []string{"dirtied"}) {
		t.Fatalf("after Create: %v, want Dirtied before the open returned", l)
	}
	writeAt(t, w, 0, testutil.Bytes(1, 8000))
	r, err := os.Open(p) // joins in passthrough
	if err != nil {
		t.Fatal(err)
	}
	w2, err := os.OpenFile(p, os.O_RDWR, 0) // forced into passthrough
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, w2, 8000, []byte("tail"))
	buf := make([]byte, 4)
	if _, err := r.ReadAt(buf, 8000); err != nil || string(buf) != "tail" {
		t.Fatalf("reader sees %q, %v", buf, err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	c := m.waitChanges(t, 1)[0]
	want := fs.Change{Path: "a", ID: c.ID, Ino: c.Ino, Size: 8004, Whole: true, New: true, Fsync: true}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("fsync of a new file: %+v, want %+v", c, want)
	}
	// The next session is journaled at once: a passthrough writer is open.
	if l := m.rec.takeLog(); !slices.Equal(l, []string{"changed", "dirtied"}) {
		t.Fatalf("fsync with a passthrough writer open: %v, want Changed then Dirtied", l)
	}
	writeAt(t, w, 100, []byte("in place")) // after fsync: a new session, still Whole
	w.Close()
	w2.Close()
	r.Close()
	c = m.waitChanges(t, 1)[0]
	want = fs.Change{Path: "a", ID: c.ID, Ino: c.Ino, Kept: 8004, Size: 8004, Whole: true}
	if l := m.rec.takeLog(); !reflect.DeepEqual(c, want) || !slices.Equal(l, []string{"changed"}) {
		t.Fatalf("in-place write after fsync: %+v %v, want %+v, Changed only", c, l, want)
	}

	w, err = os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if l := m.rec.takeLog(); len(l) == 0 || l[0] != "dirtied" {
		t.Fatalf("after an O_TRUNC open: %v, want Dirtied first", l)
	}
	writeAt(t, w, 0, []byte("short"))
	w.Close()
	c = m.waitChanges(t, 1)[0]
	want = fs.Change{Path: "a", ID: c.ID, Ino: c.Ino, Size: 5, Dirty: []fs.Range{{0, 5}}}
	if c.Whole {
		want.Dirty, want.Whole = nil, true
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("O_TRUNC rewrite: %+v, want %+v", c, want)
	}

	w, err = os.OpenFile(p, os.O_RDWR, 0) // no passthrough handle left
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, w, 1, []byte("HO"))
	w.Close()
	c = m.waitChanges(t, 1)[0]
	want = fs.Change{Path: "a", ID: c.ID, Ino: c.Ino, Dirty: []fs.Range{{1, 2}}, Kept: 5, Size: 5}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("in-place write: %+v, want %+v", c, want)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != "sHOrt" {
		t.Fatalf("file reads %q, %v", got, err)
	}
}
