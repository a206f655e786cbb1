package fs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

// listHistory is a History of one file whose revisions a test adds, as
// the recorder does: only ever appended, numbered on from the last, past
// numbers a gc left free (skip).
type listHistory struct {
	id   FileID
	mu   sync.Mutex
	revs []Revision
	next index.Rev
}

func (h *listHistory) add() {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.next
	h.next++
	h.revs = append(h.revs, Revision{ID: index.RevID{File: 7, Rev: n}, Size: uint64(n),
		Time: time.Date(2026, 11, 30, 12, 0, int(n), 0, time.UTC).UnixNano()})
}

// skip leaves the next n revision numbers free, as gc removing them does.
func (h *listHistory) skip(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next += index.Rev(n)
}

func (h *listHistory) Revisions(ctx context.Context, id FileID) ([]Revision, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id != h.id {
		return nil, nil
	}
	return slices.Clone(h.revs), nil
}

// Len is the newest revision's number + 1, as the store's is.
func (h *listHistory) Len(ctx context.Context, id FileID) (index.FileID, int, error) {
	revs, err := h.Revisions(ctx, id)
	if len(revs) == 0 {
		return 0, 0, err
	}
	return 7, int(revs[len(revs)-1].ID.Rev) + 1, err
}

func (h *listHistory) Revision(ctx context.Context, id FileID, rev index.Rev) (Revision, error) {
	revs, _ := h.Revisions(ctx, id)
	for _, r := range revs {
		if r.ID.Rev == rev {
			return r, nil
		}
	}
	return Revision{}, index.ErrNotFound
}

func (h *listHistory) Read(ctx context.Context, id index.RevID) ([]byte, error) {
	return nil, nil
}

// mountHistory mounts a live tree whose file f has the history h.
func mountHistory(t *testing.T) (*FS, *listHistory, string) {
	testutil.RequireFUSE(t)
	live := t.TempDir()
	h := &listHistory{id: NewFileID()}
	if err := os.WriteFile(filepath.Join(live, "f"), []byte("live"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(live, "f"), XattrID, h.id[:], 0); err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{LiveDir: live, History: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mnt, _ := testutil.Mount(t, f.Root(), Options(false))
	return f, h, filepath.Join(mnt, HistoryName, "f")
}

// names lists the entries of the open directory d.
func names(t *testing.T, d *os.File) []string {
	t.Helper()
	got, err := d.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// wantRevs checks that got names revisions 0..n-1 of a file of n.
func wantRevs(t *testing.T, got []string, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%d revisions listed (%q), want %d", len(got), got, n)
	}
	for i, name := range got {
		if want := fmt.Sprintf("%04d@2026-11-30T12:00:%02dZ", i, i); name != want {
			t.Fatalf("entry %d: %q, want %q", i, name, want)
		}
	}
}

// ls lists dir from a fresh open.
func ls(t *testing.T, dir string) []string {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	return names(t, d)
}

// released waits until the kernel has released every open of the
// listing of f (it sends RELEASEDIR after close(2) has returned), so
// that the next open may use its cache.
func released(t *testing.T, fsys *FS) {
	t.Helper()
	n := fsys.root.GetChild(HistoryName).GetChild("f").Operations().(*histFile)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		n.mu.Lock()
		opens := n.kc.opens
		n.mu.Unlock()
		if opens == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d opens of .history/f not released", opens)
		}
	}
}

// TestHistoryListingCached: the kernel lists an unchanged history from
// its cache, with no READDIR, and a changed one afresh.
func TestHistoryListingCached(t *testing.T) {
	f, h, dir := mountHistory(t)
	for range 3 {
		h.add()
	}
	for range 3 {
		wantRevs(t, ls(t, dir), 3)
	}
	if n := f.histPasses.Load(); n != 1 {
		t.Fatalf("3 listings of an unchanged history: %d served by the mount, want 1", n)
	}
	released(t, f)
	h.add()
	wantRevs(t, ls(t, dir), 4)
	wantRevs(t, ls(t, dir), 4)
	if n := f.histPasses.Load(); n != 2 {
		t.Fatalf("after a new revision: %d listings served by the mount, want 2", n)
	}
}

// TestHistoryCacheOlderOpen: a directory opened before a new revision
// and read after it puts its older listing into the kernel's cache; no
// listing opened after the revision shows that, before or after it is
// closed.
func TestHistoryCacheOlderOpen(t *testing.T) {
	f, h, dir := mountHistory(t)
	h.add()
	wantRevs(t, ls(t, dir), 1) // cached
	old, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	h.add()
	wantRevs(t, ls(t, dir), 2) // drops the cache; old is not read yet
	h.add()
	mid, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer mid.Close()
	if got := names(t, old); len(got) != 1 && len(got) != 3 {
		t.Fatalf("the older open listed %q", got)
	}
	wantRevs(t, names(t, mid), 3)
	wantRevs(t, ls(t, dir), 3)
	old.Close()
	mid.Close()
	released(t, f)
	passes := f.histPasses.Load()
	wantRevs(t, ls(t, dir), 3) // drops what old put into the cache
	wantRevs(t, ls(t, dir), 3)
	if n := f.histPasses.Load() - passes; n != 1 {
		t.Fatalf("%d of 2 listings after the older opens' release served by the mount, want 1", n)
	}
}
