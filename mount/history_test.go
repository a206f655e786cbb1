package mount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// reported waits until the live tree has reported n changes in all (the
// kernel releases a closed file asynchronously), without waiting for the
// recorder.
func (l *live) reported(t *testing.T, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		l.rec.mu.Lock()
		got := l.rec.reports
		l.rec.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d changes reported, want %d", got, n)
		}
	}
}

// history lists .history/rel and reads every revision, in listing order.
func history(t *testing.T, mnt, rel string) (names, contents []string) {
	t.Helper()
	dir := filepath.Join(mnt, ".history", rel)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ls %s: %v", dir, err)
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Size() != int64(len(b)) || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o400 {
			t.Fatalf("stat %s: %v (%d bytes read), %v", p, fi, len(b), err)
		}
		names = append(names, e.Name())
		contents = append(contents, string(b))
	}
	return names, contents
}

// checkNames checks that names are n revision names in order: numbered
// 0..n-1 (the store's numbers, as deltafs log shows them), with UTC
// times that do not go back, and already sorted.
func checkNames(t *testing.T, names []string, n int) {
	t.Helper()
	if len(names) != n || !slices.IsSorted(names) {
		t.Fatalf("names %q, want %d sorted", names, n)
	}
	var prev time.Time
	for i, name := range names {
		num, when, ok := strings.Cut(name, "@")
		want := fmt.Sprintf("%04d", i)
		if !ok || num != want {
			t.Fatalf("name %q: number %q, want %q", name, num, want)
		}
		tm, err := time.Parse(time.RFC3339, when)
		if err != nil || tm.Before(prev) || time.Since(tm) > time.Hour || !strings.HasSuffix(when, "Z") {
			t.Fatalf("name %q: time %v, %v", name, tm, err)
		}
		prev = tm
	}
}

// TestHistoryListsRevisions: several writes, then mv, then an editor's
// atomic save; .history shows one history per file identity, in order,
// each revision with its bytes and size, in a mirror of the live
// directories.
func TestHistoryListsRevisions(t *testing.T) {
	l := start(t, filepath.Join(t.TempDir(), "s.dfs"))
	m := l.mnt
	mustDo(t, os.MkdirAll(m+"/src/deep", 0o755))
	want := []string{"one\n", "two, longer\n", "", "four\n"}
	for i, v := range want {
		mustDo(t, os.WriteFile(m+"/src/deep/notes.txt", []byte(v), 0o644))
		l.recorded(t, uint64(i+1))
	}
	names, got := history(t, m, "src/deep/notes.txt")
	checkNames(t, names, 4)
	if !slices.Equal(got, want) {
		t.Fatalf("contents %q, want %q", got, want)
	}

	mustDo(t, os.Rename(m+"/src/deep/notes.txt", m+"/src/moved.txt"))
	mustDo(t, os.WriteFile(m+"/src/moved.txt", []byte("five\n"), 0o644))
	l.recorded(t, 5)
	want = append(want, "five\n")
	if _, got := history(t, m, "src/moved.txt"); !slices.Equal(got, want) {
		t.Fatalf("after mv: %q, want %q", got, want)
	}
	if _, err := os.Stat(m + "/.history/src/deep/notes.txt"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("history of the old name: %v", err)
	}

	// An atomic save: a temp file renamed over the original continues it.
	mustDo(t, os.WriteFile(m+"/src/.moved.txt.swp", []byte("six\n"), 0o644))
	mustDo(t, os.Rename(m+"/src/.moved.txt.swp", m+"/src/moved.txt"))
	l.recorded(t, 6)
	want = append(want, "six\n")
	names, got = history(t, m, "src/moved.txt")
	checkNames(t, names, 6)
	if !slices.Equal(got, want) {
		t.Fatalf("after an atomic save: %q, want %q", got, want)
	}

	mustDo(t, os.WriteFile(m+"/other", []byte("x"), 0o644))
	mustDo(t, os.Symlink("other", m+"/link"))
	l.recorded(t, 7)
	for dir, want := range map[string][]string{"": {"other", "src"}, "src": {"deep", "moved.txt"}, "src/deep": nil} {
		ents, err := os.ReadDir(filepath.Join(m, ".history", dir))
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
			if !e.IsDir() {
				t.Errorf(".history/%s/%s is not a directory", dir, e.Name())
			}
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ls .history/%s = %q, %v; want %q", dir, got, err, want)
		}
	}
	if _, err := os.Stat(m + "/.history/link"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a symlink has a history: %v", err)
	}
	if names, _ := history(t, m, "other"); len(names) != 1 {
		t.Errorf("other: %q", names)
	}
}

// TestHistoryNameLookup: any padding of a revision's number finds it (names
// widen past revision 9999), a wrong time or number does not.
func TestHistoryNameLookup(t *testing.T) {
	l := start(t, filepath.Join(t.TempDir(), "s.dfs"))
	m := l.mnt
	mustDo(t, os.WriteFile(m+"/f", []byte("a"), 0o644))
	l.recorded(t, 1)
	names, _ := history(t, m, "f")
	num, when, _ := strings.Cut(names[0], "@")
	dir := m + "/.history/f/"
	if got := readOr(t, dir+"00000000@"+when); got != "a" || num != "0000" {
		t.Fatalf("wider padding: %q (number %q)", got, num)
	}
	if got := readOr(t, dir+"0@"+when); got != "a" {
		t.Fatalf("no padding: %q", got)
	}
	for _, bad := range []string{"0000@2001-01-01T00:00:00Z", "0001@" + when, "0000", "x@" + when} {
		if _, err := os.Stat(dir + bad); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stat %s: %v, want ENOENT", bad, err)
		}
	}
}

// TestHistoryReadOnly: nothing under .history changes (EROFS), and no
// user makes, removes or renames a .history at the root; .history is not
// inside a snapshot, and one below the root is an ordinary name.
func TestHistoryReadOnly(t *testing.T) {
	l := start(t, filepath.Join(t.TempDir(), "s.dfs"))
	m := l.mnt
	mustDo(t, os.Mkdir(m+"/d", 0o755))
	mustDo(t, os.WriteFile(m+"/d/f", []byte("v1"), 0o644))
	l.recorded(t, 1)
	names, _ := history(t, m, "d/f")
	h := m + "/.history"
	rev := h + "/d/f/" + names[0]
	erofs := map[string]error{
		"write revision":   os.WriteFile(rev, []byte("x"), 0o644),
		"truncate":         os.Truncate(rev, 0),
		"chmod revision":   os.Chmod(rev, 0o644),
		"unlink revision":  os.Remove(rev),
		"rename revision":  os.Rename(rev, h+"/d/f/x"),
		"create in file":   os.WriteFile(h+"/d/f/new", nil, 0o644),
		"create in dir":    os.WriteFile(h+"/d/new", nil, 0o644),
		"mkdir":            os.Mkdir(h+"/d/new", 0o755),
		"mkdir at top":     os.Mkdir(h+"/new", 0o755),
		"rmdir":            syscall.Rmdir(h + "/d/f"),
		"symlink":          os.Symlink("x", h+"/d/s"),
		"link":             os.Link(rev, h+"/d/l"),
		"chmod dir":        os.Chmod(h+"/d", 0o700),
		"setxattr":         unix.Setxattr(rev, "user.x", []byte("1"), 0),
		"rename dir":       os.Rename(h+"/d", h+"/e"),
		"utimes":           os.Chtimes(rev, time.Now(), time.Now()),
		"mknod":            syscall.Mknod(h+"/d/p", syscall.S_IFIFO|0o644, 0),
		"rename file name": os.Rename(h+"/d/f", h+"/d/g"),
	}
	for what, err := range erofs {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s: %v, want EROFS", what, err)
		}
	}
	if err := os.Rename(m+"/d/f", h+"/d/g"); err == nil {
		t.Error("moved a live file into .history")
	}
	root := map[string]struct {
		err  error
		want syscall.Errno
	}{
		"mkdir":   {os.Mkdir(h, 0o755), syscall.EEXIST},
		"create":  {func() error { _, err := os.OpenFile(h, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); return err }(), syscall.EEXIST},
		"rmdir":   {syscall.Rmdir(h), syscall.EPERM},
		"symlink": {os.Symlink("d", h), syscall.EEXIST},
		"mv away": {os.Rename(h, m+"/g"), syscall.EPERM},
	}
	for what, c := range root {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s .history at the root: %v, want %v", what, c.err, c.want)
		}
	}
	if err := os.Rename(m+"/d", h); err == nil {
		t.Error("renamed a directory onto .history")
	}
	ents, err := os.ReadDir(m)
	var top []string
	for _, e := range ents {
		top = append(top, e.Name())
	}
	if err != nil || !slices.Equal(top, []string{"d"}) { // the views are reached by name, not listed
		t.Errorf("ls of the root: %q, %v", top, err)
	}
	mustDo(t, os.Mkdir(m+"/d/.history", 0o755))
	mustDo(t, os.Mkdir(m+"/.snapshots/s", 0o755))
	if _, err := os.Stat(m + "/.snapshots/s/.history"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".history inside a snapshot: %v", err)
	}
	if fi, err := os.Stat(m + "/.snapshots/s/d/.history"); err != nil || !fi.IsDir() {
		t.Errorf("d/.history in the snapshot: %v, %v", fi, err)
	}
}

// gateSink holds every change until the gate opens.
type gateSink struct {
	Sink
	mu   sync.Mutex
	gate chan struct{} // nil: open
}

func (g *gateSink) Record(ctx context.Context, ev Event) error {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil && ev.Change != nil {
		<-gate
	}
	return g.Sink.Record(ctx, ev)
}

func (g *gateSink) close() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gateSink) open() {
	g.mu.Lock()
	close(g.gate)
	g.gate = nil
	g.mu.Unlock()
}

// TestHistoryWaitsForQueuedChange: a change reported but still in the
// recorder's queue is listed (the listing waits for that file); a new
// file's first revision, held for an atomic save, is listed at once.
func TestHistoryWaitsForQueuedChange(t *testing.T) {
	gs := &gateSink{}
	l := startWith(t, Config{Store: filepath.Join(t.TempDir(), "s.dfs"), testRecorder: func(r *Recorder) {
		gs.Sink = r.sink
		r.sink = gs
	}})
	m := l.mnt
	mustDo(t, os.WriteFile(m+"/f", []byte("v1"), 0o644))
	l.recorded(t, 1)
	gs.close()
	mustDo(t, os.WriteFile(m+"/f", []byte("v2"), 0o644))
	l.reported(t, 2)
	listed := make(chan []string, 1)
	go func() {
		ents, err := os.ReadDir(m + "/.history/f")
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if err != nil {
			names = append(names, err.Error())
		}
		listed <- names
	}()
	select {
	case names := <-listed:
		t.Fatalf("listed %q while v2 was still queued", names)
	case <-time.After(300 * time.Millisecond):
	}
	gs.open()
	if names := <-listed; len(names) != 2 {
		t.Fatalf("listed %q, want 2 revisions", names)
	}

	mustDo(t, os.WriteFile(m+"/new", []byte("fresh"), 0o644))
	l.reported(t, 3)
	if names, got := history(t, m, "new"); len(names) != 1 || got[0] != "fresh" {
		t.Fatalf("new file listed as %q %q within its grace", names, got)
	}
}

// TestHistoryRightAfterClose: a listing right after close(2) shows the
// revision just written, though the kernel sends the release (which
// reports the change) after close has returned.
func TestHistoryRightAfterClose(t *testing.T) {
	l := start(t, filepath.Join(t.TempDir(), "s.dfs"))
	p := l.mnt + "/f"
	for i := 1; i <= 30; i++ {
		mustDo(t, os.WriteFile(p, []byte(fmt.Sprintf("version %d", i)), 0o644))
		ents, err := os.ReadDir(l.mnt + "/.history/f")
		if err != nil || len(ents) != i {
			t.Fatalf("after write %d: %d revisions listed, %v", i, len(ents), err)
		}
		if got := readOr(t, l.mnt+"/.history/f/"+ents[i-1].Name()); got != fmt.Sprintf("version %d", i) {
			t.Fatalf("newest revision after write %d: %q", i, got)
		}
	}
}

// TestHistoryReadOnlyMount: a read-only mount shows the history recorded
// by an earlier mount (its id map read once at mount).
func TestHistoryReadOnlyMount(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	for i, v := range []string{"one", "two"} {
		mustDo(t, os.WriteFile(l.mnt+"/a", []byte(v), 0o644))
		l.recorded(t, uint64(i+1))
	}
	l.stop(t)
	ro := startWith(t, Config{Store: store, ReadOnly: true})
	names, got := history(t, ro.mnt, "a")
	checkNames(t, names, 2)
	if !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("read-only mount's history of a: %q", got)
	}
}
