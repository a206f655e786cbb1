package fs

import (
	"os"
	"testing"
)

// A listing that grows past a gap gc left in the revision numbers (the
// file deleted, its newer revisions removed, then live again) opens and
// lists the revisions that exist.
func TestHistoryListingGrowsPastAGap(t *testing.T) {
	f, h, dir := mountHistory(t)
	// Revisions 0 and 1 kept; 2 and 3 removed by a gc (the file was
	// deleted, a snapshot held 1); the file is live again and records 4.
	h.add()
	h.add()
	if got := ls(t, dir); len(got) != 2 {
		t.Fatalf("before: %q, want 2 revisions", got)
	}
	released(t, f)
	h.skip(2)
	h.add()
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
