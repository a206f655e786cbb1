package fs_test

import (
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
)

// TestFreshWritersUsePassthrough: a created file's writer uses
// passthrough (the change is Whole, journaled before the open returns);
// a reader and a second writer may open meanwhile; fsync and close
// report the change; an O_TRUNC rewrite (the mount negotiates atomic
// O_TRUNC, so Open sees the flag) uses passthrough too and is reported
// Whole from a Kept of 0; an O_RDONLY|O_TRUNC open truncates and reports
// it; an in-place writer opened later, with no passthrough handle left,
// is back to ranges.
func TestFreshWritersUsePassthrough(t *testing.T) {
	m := mountPassthrough(t)
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
	want = fs.Change{Path: "a", ID: c.ID, Ino: c.Ino, Size: 5, Whole: true}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("O_TRUNC rewrite: %+v, want %+v (passthrough)", c, want)
	}

	// Linux truncates on O_RDONLY|O_TRUNC too; no writer, so it is
	// reported as a truncate(2) is (after passthrough's grace).
	time.Sleep(50 * time.Millisecond)
	m.rec.takeLog()
	r, err = os.OpenFile(p, os.O_RDONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if st, err := os.Stat(p); err != nil || st.Size() != 0 {
		t.Fatalf("after O_RDONLY|O_TRUNC: %v, %v", st, err)
	}
	c = m.waitChanges(t, 1)[0]
	want = fs.Change{Path: "a", ID: c.ID, Ino: c.Ino, Size: 0}
	if l := m.rec.takeLog(); !reflect.DeepEqual(c, want) || len(l) == 0 || l[0] != "dirtied" {
		t.Fatalf("O_RDONLY|O_TRUNC: %+v %v, want %+v, Dirtied first", c, l, want)
	}
	if err := os.WriteFile(p, []byte("short"), 0); err != nil {
		t.Fatal(err)
	}
	m.waitChanges(t, 1)
	time.Sleep(50 * time.Millisecond) // passthrough's grace (ioModeGrace)

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

// waitLog waits until the Dirtied/Changed/Undirtied log holds n entries
// (the kernel releases a closed file after close returns) and takes it.
func (m *mounted) waitLog(t *testing.T, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		m.rec.mu.Lock()
		got := len(m.rec.log)
		m.rec.mu.Unlock()
		if got >= n || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(settle) // nothing more comes
	return m.rec.takeLog()
}

// TestUnchangedPassthroughWriterUndirties: a passthrough writer that
// changes nothing in its session (the editor's save: write, fsync,
// close; an O_TRUNC open of an empty file closed at once) gets its
// Dirtied taken back at the release, so that a journal of Dirtied calls
// is cleared by the reports before it; a second fsync with nothing new
// does not start a session of its own; a writer that does write after
// the fsync is reported, not taken back.
func TestUnchangedPassthroughWriterUndirties(t *testing.T) {
	m := mountPassthrough(t)
	w, err := os.Create(m.path("saved"))
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, w, 0, testutil.Bytes(2, 5000))
	for range 2 {
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	want := []string{"dirtied", "changed", "dirtied", "undirtied"}
	if l := m.waitLog(t, len(want)); !slices.Equal(l, want) {
		t.Fatalf("write, fsync twice, close: %v, want %v", l, want)
	}
	m.waitChanges(t, 1)

	if err := os.WriteFile(m.path("empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitLog(t, 2)
	m.waitChanges(t, 1)
	// Passthrough: an O_TRUNC open, and one within ioModeGrace of the
	// last passthrough handle's release.
	w, err = os.OpenFile(m.path("empty"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	want = []string{"dirtied", "undirtied"}
	if l := m.waitLog(t, len(want)); !slices.Equal(l, want) {
		t.Fatalf("O_TRUNC open of an empty file, closed: %v, want %v", l, want)
	}

	w, err = os.Create(m.path("b"))
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, w, 0, []byte("first"))
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	writeAt(t, w, 0, []byte("again, longer"))
	w.Close()
	want = []string{"dirtied", "changed", "dirtied", "changed"}
	if l := m.waitLog(t, len(want)); !slices.Equal(l, want) {
		t.Fatalf("write, fsync, write, close: %v, want %v", l, want)
	}
	m.waitChanges(t, 2)
}
