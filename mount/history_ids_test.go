package mount

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// TestStoreFileOfflineFollowsAtomicSaves: offline, a path maps to the
// store file its mount recorded, across "mv a b" and an editor's atomic
// save, and paths without history fail with the right errors.
func TestStoreFileOfflineFollowsAtomicSaves(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	m := l.mnt
	mustDo(t, os.WriteFile(m+"/notes.txt", []byte("one\n"), 0o644))
	mustDo(t, os.WriteFile(m+"/notes.tmp", []byte("two\n"), 0o644))
	mustDo(t, os.Rename(m+"/notes.tmp", m+"/notes.txt")) // atomic save
	mustDo(t, os.Mkdir(m+"/dir", 0o755))
	mustDo(t, os.WriteFile(m+"/dir/a", []byte("a\n"), 0o644))
	mustDo(t, os.Rename(m+"/dir/a", m+"/dir/b"))
	l.stop(t)
	mustDo(t, os.WriteFile(filepath.Join(store, liveDir, "unrecorded"), []byte("x"), 0o644))

	lf, fid, err := storeFileOffline(store, "/notes.txt")
	if err != nil || lf.Rel != "notes.txt" {
		t.Fatalf("notes.txt: %+v %v, %v", lf, fid, err)
	}
	st, err := objstore.Open(store, objstore.Config{ReadOnly: true})
	mustDo(t, err)
	defer st.Close()
	hist, err := st.History(context.Background(), fid)
	mustDo(t, err)
	// The save continues the original's history when the rename comes
	// within the new file's grace (newFileGrace); on a loaded machine it
	// may not, and the saved file then starts its own.
	if n := len(hist); n == 0 || n > 2 || n == 2 && hist[1].P1 != hist[0].ID(fid) {
		t.Fatalf("notes.txt history %+v: want the save, continuing the first revision", hist)
	}
	if b, err := st.Get(context.Background(), hist[len(hist)-1].ID(fid)); err != nil || string(b) != "two\n" {
		t.Errorf("notes.txt newest revision %q, %v", b, err)
	}
	if _, fb, err := storeFileOffline(store, "dir/../dir/b"); err != nil {
		t.Errorf("dir/b: %v", err)
	} else if h, err := st.History(context.Background(), fb); err != nil || len(h) != 1 || h[0].Size != 2 {
		t.Errorf("dir/b history %+v, %v", h, err)
	}
	for rel, want := range map[string]error{
		"dir": ErrIsDir, "/": ErrIsDir, "../../etc/passwd": index.ErrNotFound, "nosuch": index.ErrNotFound,
		"unrecorded": ErrNoHistory, ".snapshots/x/notes.txt": ErrNoHistory,
	} {
		if _, _, err := storeFileOffline(store, rel); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", rel, err, want)
		}
	}
}

// cleanRel: paths of the live tree pass, cleaned; the views and paths
// outside the tree are refused with the error a user's command maps to
// its exit code, and a path in a snapshot names the live path to log.
func TestCleanRel(t *testing.T) {
	for _, c := range []struct {
		rel, want string
		err       error
		says      string
	}{
		{rel: "a/b", want: "a/b"},
		{rel: "/a//b/../c", want: "a/c"},
		{rel: "a/.snapshots/s/f", want: "a/.snapshots/s/f"},
		{rel: "/", err: ErrIsDir},
		{rel: "../x", err: ErrNoHistory, says: "leaves the tree"},
		{rel: ".snapshots", err: ErrIsDir},
		{rel: ".snapshots/s", err: ErrIsDir},
		{rel: ".snapshots/s/d/f", err: ErrNoHistory, says: "log the live path d/f"},
		{rel: ".history/f", err: ErrNoHistory, says: "inside .history"},
	} {
		got, err := cleanRel(c.rel)
		switch {
		case c.err == nil && (err != nil || got != c.want):
			t.Errorf("cleanRel(%q) = %q, %v; want %q", c.rel, got, err, c.want)
		case c.err != nil && (!errors.Is(err, c.err) || !strings.Contains(err.Error(), c.says)):
			t.Errorf("cleanRel(%q): error %v, want %v saying %q", c.rel, err, c.err, c.says)
		}
	}
}
