package fs_test

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

// settle is how long a test waits for reports that must not come: FUSE
// sends RELEASE after close(2) has returned.
const settle = 100 * time.Millisecond

// waitChanges waits until n changes were reported, then a little more,
// and returns exactly what was reported.
func (m *mounted) waitChanges(t *testing.T, n int) []fs.Change {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.rec.mu.Lock()
		got := len(m.rec.changes)
		m.rec.mu.Unlock()
		if got >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(settle)
	c := m.rec.takeChanges()
	if len(c) != n {
		t.Fatalf("%d changes reported, want %d: %+v", len(c), n, c)
	}
	return c
}

func writeAt(t *testing.T, f *os.File, off int64, b []byte) {
	t.Helper()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestRecordCreate(t *testing.T) {
	m := mountLive(t)
	data := testutil.Bytes(1, 10_000)
	if err := os.WriteFile(m.path("a"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	c := m.waitChanges(t, 1)[0]
	// A created file's writer uses passthrough when it can: its writes
	// bypass us and its change is Whole.
	want := fs.Change{Path: "a", ID: c.ID, Ino: c.Ino, Dirty: []fs.Range{{0, 10_000}}, Size: 10_000, New: true}
	if os.Getenv("NOPT") == "" {
		want.Dirty, want.Whole = nil, true
	}
	if !reflect.DeepEqual(c, want) || c.ID.IsZero() {
		t.Fatalf("change %+v, want %+v", c, want)
	}
}

func TestRecordLastWriterOnly(t *testing.T) {
	m := mountLive(t)
	if err := os.WriteFile(m.path("a"), testutil.Bytes(1, 10_000), 0o644); err != nil {
		t.Fatal(err)
	}
	id := m.waitChanges(t, 1)[0].ID
	f1, err := os.OpenFile(m.path("a"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := os.OpenFile(m.path("a"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, f1, 100, []byte("hello"))
	writeAt(t, f2, 5000, []byte("world"))
	writeAt(t, f2, 105, []byte("!!")) // adjacent: coalesces with 100..105
	f1.Close()
	m.waitChanges(t, 0)
	f2.Close()
	c := m.waitChanges(t, 1)[0]
	want := fs.Change{Path: "a", ID: id, Ino: c.Ino, Dirty: []fs.Range{{100, 7}, {5000, 5}}, Kept: 10_000, Size: 10_000}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("change %+v, want %+v", c, want)
	}
}

func TestRecordNothingForReadsAndMetadata(t *testing.T) {
	m := mountLive(t)
	p := m.path("a")
	if err := os.WriteFile(p, []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitChanges(t, 1)
	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0) // writable open, no write
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, time.Unix(1, 0), time.Unix(2, 0)); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(p, "user.color", []byte("blue"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, m.path("b")); err != nil {
		t.Fatal(err)
	}
	m.waitChanges(t, 0)
	if len(m.rec.renames) != 1 || m.rec.renames[0].From != "a" || m.rec.renames[0].To != "b" {
		t.Fatalf("renames %+v", m.rec.renames)
	}
}

func TestRecordTruncateAndFsync(t *testing.T) {
	m := mountLive(t)
	p := m.path("a")
	if err := os.WriteFile(p, testutil.Bytes(2, 8000), 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitChanges(t, 1)
	if err := os.Truncate(p, 3000); err != nil { // by path, no writer open
		t.Fatal(err)
	}
	if c := m.waitChanges(t, 1)[0]; c.Kept != 3000 || c.Size != 3000 || len(c.Dirty) != 0 {
		t.Fatalf("truncate by path: %+v", c)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writeAt(t, f, 2000, []byte("xyz"))
	m.rec.mu.Lock()
	waitsBefore := len(m.rec.waits)
	m.rec.mu.Unlock()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	c := m.waitChanges(t, 1)[0]
	if !c.Fsync || !reflect.DeepEqual(c.Dirty, []fs.Range{{2000, 3}}) || c.Kept != 3000 {
		t.Fatalf("fsync: %+v", c)
	}
	m.rec.mu.Lock()
	waits := slices.Clone(m.rec.waits[waitsBefore:])
	m.rec.mu.Unlock()
	if len(waits) != 1 || waits[0] != c.ID {
		t.Fatalf("fsync waited for %v, want once for %v", waits, c.ID)
	}
	if err := f.Truncate(1000); err != nil {
		t.Fatal(err)
	}
	writeAt(t, f, 1500, []byte("abc")) // past the cut: a hole, then bytes
	f.Close()
	c = m.waitChanges(t, 1)[0]
	if c.Fsync || c.Kept != 1000 || c.Size != 1503 || !reflect.DeepEqual(c.Dirty, []fs.Range{{1500, 3}}) {
		t.Fatalf("ftruncate then write: %+v", c)
	}
	f2, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f2.Close()
	if c := m.waitChanges(t, 1)[0]; c.Kept != 0 || c.Size != 0 {
		t.Fatalf("O_TRUNC: %+v", c)
	}
}

// TestMixedReadersAndWriters opens readers and writers of one file in
// both orders: the kernel refuses to mix passthrough and cached handles,
// so the live tree must choose modes that never fail an open.
func TestMixedReadersAndWriters(t *testing.T) {
	m := mountLive(t)
	p := m.path("a")
	if err := os.WriteFile(p, bytes.Repeat([]byte{'a'}, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitChanges(t, 1)
	for _, readerFirst := range []bool{true, false} {
		var r, w *os.File
		var err error
		open := func() {
			if r, err = os.Open(p); err != nil {
				t.Fatalf("reader open (reader first %v): %v", readerFirst, err)
			}
		}
		if readerFirst {
			open()
		}
		if w, err = os.OpenFile(p, os.O_WRONLY, 0); err != nil {
			t.Fatalf("writer open (reader first %v): %v", readerFirst, err)
		}
		if !readerFirst {
			open()
		}
		writeAt(t, w, 10, []byte("XY"))
		buf := make([]byte, 4)
		if _, err := r.ReadAt(buf, 9); err != nil || string(buf) != "aXYa" {
			t.Fatalf("reader sees %q, %v", buf, err)
		}
		r.Close()
		w.Close()
		c := m.waitChanges(t, 1)[0]
		if !c.Whole && !reflect.DeepEqual(c.Dirty, []fs.Range{{10, 2}}) {
			t.Fatalf("reader first %v: %+v", readerFirst, c)
		}
	}
}

func TestRecordCopyFileRange(t *testing.T) {
	m := mountLive(t)
	if err := os.WriteFile(m.path("src"), testutil.Bytes(3, 50_000), 0o644); err != nil {
		t.Fatal(err)
	}
	srcID := m.waitChanges(t, 1)[0].ID
	in, err := os.Open(m.path("src"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(m.path("dst"))
	if err != nil {
		t.Fatal(err)
	}
	var offIn, offOut int64
	n, err := unix.CopyFileRange(int(in.Fd()), &offIn, int(out.Fd()), &offOut, 50_000, 0)
	if err != nil || n != 50_000 {
		t.Fatalf("copy_file_range: %d, %v", n, err)
	}
	out.Close()
	c := m.waitChanges(t, 1)[0]
	if len(c.Sources) != 1 || c.Sources[0].ID != srcID || c.Sources[0].Path != "src" || c.Size != 50_000 {
		t.Fatalf("copy: %+v", c)
	}
}

func TestFileIDSurvivesRenameAndIsHidden(t *testing.T) {
	m := mountLive(t)
	p := m.path("a")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := m.waitChanges(t, 1)[0].ID
	if err := os.Rename(p, m.path("b")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.path("b"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := m.waitChanges(t, 1)[0]; c.ID != id || c.Path != "b" {
		t.Fatalf("after rename: %+v, want id %v", c, id)
	}
	buf := make([]byte, 64)
	if _, err := unix.Getxattr(m.path("b"), fs.XattrID, buf); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("getxattr of the id: %v, want ENODATA", err)
	}
	if err := unix.Setxattr(m.path("b"), fs.XattrID, []byte("forged"), 0); !errors.Is(err, unix.EPERM) {
		t.Fatalf("setxattr of the id: %v, want EPERM", err)
	}
	n, err := unix.Listxattr(m.path("b"), buf)
	if err != nil || bytes.Contains(buf[:n], []byte("deltafs")) {
		t.Fatalf("listxattr shows %q, %v", buf[:n], err)
	}
}

func TestSnapshotsNameReserved(t *testing.T) {
	m := mountLive(t)
	snap := m.path(fs.SnapshotsName)
	st, err := os.Stat(snap)
	if err != nil || !st.IsDir() {
		t.Fatalf("stat .snapshots: %v, %v", st, err)
	}
	ents, err := os.ReadDir(m.mnt) // reached by name, never listed
	if err != nil || len(ents) != 0 {
		t.Fatalf("root lists %v, %v", ents, err)
	}
	if err := os.WriteFile(m.path("f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"mkdir", os.Mkdir(snap, 0o755), syscall.EEXIST},
		{"create", func() error { _, err := os.OpenFile(snap, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); return err }(), syscall.EEXIST},
		{"rmdir", syscall.Rmdir(snap), syscall.EPERM},
		{"symlink", os.Symlink("f", snap), syscall.EEXIST},
	}
	for _, c := range checks {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if err := os.Rename(m.path("f"), snap); err == nil {
		t.Error("renamed a file onto .snapshots")
	}
	if err := os.Rename(snap, m.path("g")); !errors.Is(err, syscall.EPERM) {
		t.Errorf("rename .snapshots away: %v, want EPERM", err)
	}
	if err := os.Mkdir(m.path("sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(m.path("sub/"+fs.SnapshotsName), 0o755); err != nil {
		t.Fatalf("a .snapshots below the root is an ordinary name: %v", err)
	}
}

// TestPassthroughWriterUtimensIsNoChange: a writer that had to join a
// passthrough reader is judged by size and mtime; setting the mtime is
// not a write.
func TestPassthroughWriterUtimensIsNoChange(t *testing.T) {
	m := mountLive(t)
	p := m.path("a")
	if err := os.WriteFile(p, []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitChanges(t, 1)
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, time.Unix(1, 0), time.Unix(2, 0)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r.Close()
	m.waitChanges(t, 0)
	r, _ = os.Open(p)
	w, _ = os.OpenFile(p, os.O_RDWR, 0)
	writeAt(t, w, 0, []byte("C"))
	if err := os.Chtimes(p, time.Unix(1, 0), time.Unix(2, 0)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r.Close()
	if c := m.waitChanges(t, 1)[0]; !c.Whole && len(c.Dirty) != 1 {
		t.Fatalf("a write followed by utimens: %+v", c)
	}
}

// TestPassthroughWriterSameSizeTruncateIsNoChange: a truncation to the
// file's own size moves its mtime on the live file system, which a
// writer that had to join a passthrough reader must not take for a
// write (through its handle, or by path while it is open); a write
// before such a truncation is still seen.
func TestPassthroughWriterSameSizeTruncateIsNoChange(t *testing.T) {
	m := mountPassthrough(t)
	p := m.path("a")
	if err := os.WriteFile(p, testutil.Bytes(4, 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitChanges(t, 1)
	for _, byPath := range []bool{false, true} {
		r, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		w, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // a later mtime, were it a write
		if byPath {
			err = os.Truncate(p, 5000)
		} else {
			err = w.Truncate(5000)
		}
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		r.Close()
		if c := m.waitChanges(t, 0); len(c) != 0 {
			t.Fatalf("byPath %v: %+v", byPath, c)
		}
	}
	r, _ := os.Open(p)
	w, _ := os.OpenFile(p, os.O_RDWR, 0)
	writeAt(t, w, 0, []byte("C"))
	if err := w.Truncate(5000); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r.Close()
	if c := m.waitChanges(t, 1)[0]; c.Size != 5000 || !c.Whole && len(c.Dirty) != 1 {
		t.Fatalf("a write followed by a same-size truncate: %+v", c)
	}
}

// A truncation to the size the file has changes no byte: `truncate -s`
// of a file to its own size opens it (O_CREAT, no O_TRUNC) and truncates
// through that handle, and records nothing, as a truncate(2) by path
// does not.
func TestRecordTruncateToSameSize(t *testing.T) {
	m := mountLive(t)
	p := m.path("a")
	if err := os.WriteFile(p, testutil.Bytes(3, 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitChanges(t, 1)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(5000); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 5000); err != nil { // by path, no writer open
		t.Fatal(err)
	}
	m.waitChanges(t, 0)
	// By path while a writer is open: the kernel sends the release of a
	// closed writer after close(2) returns, so the truncate(2) of
	// `truncate -s` may come while the session lives.
	f, err = os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 5000); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m.waitChanges(t, 0)
	// A real truncation through a handle is still a change.
	f, err = os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if c := m.waitChanges(t, 1)[0]; c.Size != 4000 || c.Kept != 4000 {
		t.Fatalf("truncate through a handle: %+v", c)
	}
}

// TestRewritesRightAfterCloseAreChangesOfTheirOwn: the kernel sends a
// closed writer's RELEASE after close(2) returns, so a rewrite's open
// may come first (`echo a > f; echo b > f`); it waits for that release
// rather than join the closed writer's session, which would record the
// two rewrites as one revision. The wait is bounded (openClosingWait),
// so one merge in the 200 is let pass for a loaded machine; without the
// wait 3 to 16 were seen.
func TestRewritesRightAfterCloseAreChangesOfTheirOwn(t *testing.T) {
	m := mountLive(t)
	p := m.path("f")
	const n = 200
	for i := range n {
		if err := os.WriteFile(p, []byte(strconv.Itoa(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []fs.Change
	for deadline := time.Now().Add(10 * time.Second); len(got) < n && time.Now().Before(deadline); {
		time.Sleep(settle)
		got = append(got, m.rec.takeChanges()...)
	}
	if len(got) < n-1 || len(got) > n {
		t.Fatalf("%d changes for %d rewrites", len(got), n)
	}
	if c := got[len(got)-1]; c.Size != 3 {
		t.Fatalf("the last change: %+v", c)
	}
}
