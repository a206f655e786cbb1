package mount

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

// live is a mount run in-process by a test.
type live struct {
	store, mnt string
	cancel     context.CancelFunc
	done       chan error
	rec        *Recorder
}

// recorded waits until the live tree has reported n changes in all (the
// kernel releases a closed file asynchronously), then until they are
// recorded.
func (l *live) recorded(t *testing.T, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		l.rec.mu.Lock()
		got := l.rec.reports
		l.rec.mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d changes reported, want %d", got, n)
		}
	}
	if err := l.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// start runs a mount in the background and waits until it is ready.
func start(t testing.TB, store string) *live {
	t.Helper()
	return startWith(t, Config{Store: store})
}

// startWith runs a mount of cfg.Store on a fresh mount point.
func startWith(t testing.TB, cfg Config) *live {
	t.Helper()
	testutil.RequireFUSE(t)
	l := &live{store: cfg.Store, mnt: t.TempDir(), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	ready := make(chan *Mounted, 1)
	hook := cfg.testRecorder
	go func() {
		cfg.MountPoint = l.mnt
		if cfg.FsyncInterval == 0 {
			cfg.FsyncInterval = 50 * time.Millisecond
		}
		cfg.Ready = func(m *Mounted) { ready <- m }
		cfg.testRecorder = func(r *Recorder) {
			l.rec = r
			if hook != nil {
				hook(r)
			}
		}
		l.done <- Run(ctx, cfg)
	}()
	select {
	case <-ready:
	case err := <-l.done:
		t.Fatalf("mount failed: %v", err)
	}
	t.Cleanup(func() { l.stop(t) })
	return l
}

// stop unmounts and checks that Run ended cleanly.
func (l *live) stop(t testing.TB) {
	t.Helper()
	if l.cancel == nil {
		return
	}
	l.cancel()
	l.cancel = nil
	if err := <-l.done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if testutil.Mounted(l.mnt) {
		t.Errorf("%s still mounted", l.mnt)
	}
}

// revisions returns the store's entries of every file, by file.
func revisions(t *testing.T, store string) (*objstore.Store, map[index.FileID][]index.Entry) {
	t.Helper()
	st, err := objstore.Open(store, objstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	out := map[index.FileID][]index.Entry{}
	for f := index.FileID(1); f < 1000; f++ {
		st.Revisions(context.Background(), f, func(e index.Entry) error {
			out[f] = append(out[f], e)
			return nil
		})
	}
	return st, out
}

func TestRunRecordsAndUnmounts(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	data := testutil.Bytes(1, 100_000)
	if err := os.WriteFile(filepath.Join(l.mnt, "a"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	l.stop(t)
	st, revs := revisions(t, store)
	if len(revs) != 1 || len(revs[1]) != 1 {
		t.Fatalf("revisions %v, want one file with one revision", revs)
	}
	got, err := st.Get(context.Background(), revs[1][0].ID())
	if err != nil || string(got) != string(data) {
		t.Fatalf("stored revision differs (%d bytes, %v)", len(got), err)
	}
}

func TestSecondMountFailsNamingHolder(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	err := Run(context.Background(), Config{Store: store, MountPoint: t.TempDir()})
	if !errors.Is(err, objstore.ErrLocked) || !strings.Contains(err.Error(), l.mnt) {
		t.Fatalf("second mount: %v; want ErrLocked naming %s", err, l.mnt)
	}
}

func TestOutsideUnmountClosesCleanly(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	if err := os.WriteFile(filepath.Join(l.mnt, "a"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := unix.Unmount(l.mnt, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-l.done:
		if err != nil {
			t.Fatalf("Run after an outside unmount: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after an outside unmount")
	}
	l.cancel()
	l.cancel = nil
	if _, revs := revisions(t, store); len(revs[1]) != 1 {
		t.Fatalf("revisions %v", revs)
	}
}

// TestHistoryFollowsUsers checks by the store's growth that an atomic
// save continues the original's history as a small delta, and that a
// copy names its source as second parent.
func TestHistoryFollowsUsers(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := func(n string) string { return filepath.Join(l.mnt, n) }
	orig := testutil.Bytes(2, 1<<20)
	if err := os.WriteFile(p("notes"), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	// The original's close is released to the server asynchronously;
	// let it be reported and recorded before the editor saves (an atomic
	// save right after the original's own creation would race it).
	l.recorded(t, 1)
	edited := append([]byte("an edit at the top\n"), orig...)
	if err := os.WriteFile(p(".notes.tmp"), edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p(".notes.tmp"), p("notes")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p("notes"), p("renamed")); err != nil {
		t.Fatal(err)
	}
	copyFile(t, p("renamed"), p("copy"))
	l.stop(t)
	_, revs := revisions(t, store)
	if len(revs) != 2 || len(revs[1]) != 2 || len(revs[2]) != 1 {
		t.Fatalf("files and revisions %v; want notes with 2 revisions and the copy with 1", revs)
	}
	if second := revs[1][1]; second.Stored > 10_000 || second.P1 != revs[1][0].ID() {
		t.Fatalf("atomic save stored %d bytes with p1 %v; want a small delta on %v", second.Stored, second.P1, revs[1][0].ID())
	}
	if c := revs[2][0]; c.P2 != revs[1][1].ID() || c.Stored > 10_000 {
		t.Fatalf("copy: p2 %v, %d bytes stored; want p2 %v and a small record", c.P2, c.Stored, revs[1][1].ID())
	}
}

// copyFile copies src to dst with copy_file_range, as cp does.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := in.Stat()
	for done := int64(0); done < st.Size(); {
		n, err := unix.CopyFileRange(int(in.Fd()), nil, int(out.Fd()), nil, int(st.Size()-done), 0)
		if err != nil || n == 0 {
			t.Fatalf("copy_file_range: %d, %v", n, err)
		}
		done += int64(n)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReadOnlyMount(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	if err := os.WriteFile(filepath.Join(l.mnt, "a"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.stop(t)
	ro := startWith(t, Config{Store: store, ReadOnly: true})
	if b, err := os.ReadFile(filepath.Join(ro.mnt, "a")); err != nil || string(b) != "kept" {
		t.Fatalf("read: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(ro.mnt, "a"), []byte("x"), 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("write to a read-only mount: %v, want EROFS", err)
	}
	if err := os.Mkdir(filepath.Join(ro.mnt, "d"), 0o755); !errors.Is(err, unix.EROFS) {
		t.Fatalf("mkdir in a read-only mount: %v, want EROFS", err)
	}
	ro.stop(t)
	if err := Run(context.Background(), Config{Store: filepath.Join(t.TempDir(), "new"), MountPoint: t.TempDir(), ReadOnly: true}); !errors.Is(err, objstore.ErrNotStore) {
		t.Fatalf("read-only mount of a missing store: %v, want ErrNotStore", err)
	}
}

// TestMountsHaveDefaultPermissions: a mount that lets other users in
// lets the kernel check permissions (and keep POSIX ACLs, see
// fs.Options); one that does not leaves the checks to the live
// directory, whose syscalls run as the only caller.
func TestMountsHaveDefaultPermissions(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "allow_other needs root or user_allow_other in /etc/fuse.conf")
	}
	for _, other := range []bool{false, true} {
		l := startWith(t, Config{Store: filepath.Join(t.TempDir(), "s.dfs"), AllowOther: other})
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		var line string
		for _, ln := range strings.Split(string(b), "\n") {
			if strings.Contains(ln, " "+l.mnt+" ") {
				line = ln
			}
		}
		if line == "" {
			t.Fatalf("%s not in mountinfo", l.mnt)
		}
		if strings.Contains(line, "default_permissions") != other || strings.Contains(line, "allow_other") != other {
			t.Errorf("--allow-other %v: mount options %s, want default_permissions and allow_other with --allow-other only", other, line)
		}
		l.stop(t)
	}
}

// TestInPlaceWritesRecordExactly edits a file in place, truncates and
// extends it, and checks that every revision reads back as the content
// it had at its close.
func TestInPlaceWritesRecordExactly(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := filepath.Join(l.mnt, "db")
	want := [][]byte{testutil.Bytes(5, 4<<20)}
	if err := os.WriteFile(p, want[0], 0o644); err != nil {
		t.Fatal(err)
	}
	edit := func(fn func(f *os.File, cur []byte) []byte) {
		l.recorded(t, uint64(len(want))) // one revision per edit
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		next := fn(f, append([]byte(nil), want[len(want)-1]...))
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		want = append(want, next)
	}
	edit(func(f *os.File, cur []byte) []byte { // 4 KiB in place
		b := testutil.Bytes(6, 4096)
		f.WriteAt(b, 1<<20)
		return append(cur[:1<<20], append(b, cur[1<<20+4096:]...)...)
	})
	edit(func(f *os.File, cur []byte) []byte { // cut, then write past the cut
		f.Truncate(3 << 20)
		f.WriteAt([]byte("tail"), 3<<20+100)
		out := append(cur[:3<<20], make([]byte, 100)...)
		return append(out, "tail"...)
	})
	edit(func(f *os.File, cur []byte) []byte { // extend with a hole
		f.Truncate(int64(len(cur)) + 5000)
		return append(cur, make([]byte, 5000)...)
	})
	l.stop(t)
	st, revs := revisions(t, store)
	if len(revs[1]) != len(want) {
		t.Fatalf("%d revisions, want %d", len(revs[1]), len(want))
	}
	for i, e := range revs[1] {
		got, err := st.Get(context.Background(), e.ID())
		if err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("revision %d (%v) reads back wrong: %d bytes, %v", i, e.Kind, len(got), err)
		}
		if i > 0 && e.Stored > 20_000 {
			t.Errorf("revision %d stored %d bytes (%v) for a small edit", i, e.Stored, e.Kind)
		}
		t.Logf("revision %d: %v, %d bytes stored", i, e.Kind, e.Stored)
	}
}

// TestMoveOverKeepsOwnHistory: "mv a b" over an existing b carries a's
// history on; b's ends. (a is made older than saveWindow, past which it
// is no atomic save's temp file.)
func TestMoveOverKeepsOwnHistory(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := func(n string) string { return filepath.Join(l.mnt, n) }
	for i, n := range []string{"a", "b"} {
		if err := os.WriteFile(p(n), testutil.Bytes(uint64(10+i), 50_000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l.recorded(t, 2)
	ls := l.rec.sink.(journalSink).ls
	ls.mu.Lock()
	ls.sink.saveWindow = 0
	ls.mu.Unlock()
	if err := os.Rename(p("a"), p("b")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p("b"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	writeAtT(t, f, 0, []byte("edit"))
	f.Close()
	l.recorded(t, 3)
	l.stop(t)
	st, revs := revisions(t, store)
	var a, b []index.Entry
	for _, rs := range revs {
		switch len(rs) {
		case 2:
			a = rs
		case 1:
			b = rs
		}
	}
	if len(revs) != 2 || a == nil || b == nil || a[1].P1 != a[0].ID() {
		t.Fatalf("revisions %v; want a's file with 2 revisions (the edit after the move) and b's with 1", revs)
	}
	if first, err := st.Get(context.Background(), a[0].ID()); err != nil || !bytes.Equal(first, testutil.Bytes(10, 50_000)) {
		t.Fatalf("the edited file's history does not start with a's content (%v)", err)
	}
}

func writeAtT(t *testing.T, f *os.File, off int64, b []byte) {
	t.Helper()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}
