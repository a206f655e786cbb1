package fs

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

// gapHistory: revisions by number, some missing (gc removed them).
type gapHistory struct {
	id   FileID
	mu   sync.Mutex
	revs map[index.Rev]Revision
}

func (h *gapHistory) add(r index.Rev) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.revs[r] = Revision{ID: index.RevID{File: 7, Rev: r}, Size: uint64(r), Time: time.Date(2026, 11, 30, 12, 0, int(r), 0, time.UTC).UnixNano()}
}

func (h *gapHistory) Revisions(ctx context.Context, id FileID) ([]Revision, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Revision
	for r := index.Rev(0); r < 100; r++ {
		if v, ok := h.revs[r]; ok {
			out = append(out, v)
		}
	}
	return out, nil
}

func (h *gapHistory) Len(ctx context.Context, id FileID) (int, error) {
	revs, _ := h.Revisions(ctx, id)
	if len(revs) == 0 {
		return 0, nil
	}
	return int(revs[len(revs)-1].ID.Rev) + 1, nil
}

func (h *gapHistory) Revision(ctx context.Context, id FileID, rev index.Rev) (Revision, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v, ok := h.revs[rev]; ok {
		return v, nil
	}
	return Revision{}, index.ErrNotFound
}

func (h *gapHistory) Read(ctx context.Context, id index.RevID) ([]byte, error) { return nil, nil }

// A listing that grows past a gap gc left in the revision numbers (the
// file deleted, its newer revisions removed, then live again) opens and
// lists the revisions that exist.
func TestHistoryListingGrowsPastAGap(t *testing.T) {
	testutil.RequireFUSE(t)
	live := t.TempDir()
	h := &gapHistory{id: NewFileID(), revs: map[index.Rev]Revision{}}
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
	mnt, _ := testutil.Mount(t, f.Root(), Options())
	dir := filepath.Join(mnt, HistoryName, "f")
	// Revisions 0 and 1 kept; 2 and 3 removed by a gc (the file was
	// deleted, a snapshot held 1); the file is live again and records 4.
	h.add(0)
	h.add(1)
	if got := ls(t, dir); len(got) != 2 {
		t.Fatalf("before: %q, want 2 revisions", got)
	}
	released(t, f)
	h.add(4)
	d, err := os.Open(dir)
	if err != nil {
		t.Fatalf("open after a new revision past a gap: %v", err)
	}
	defer d.Close()
	got, err := d.Readdirnames(-1)
	if err != nil || len(got) != 3 {
		t.Fatalf("listing after a new revision past a gap: %q, %v", got, err)
	}
}
