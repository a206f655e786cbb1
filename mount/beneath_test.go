package mount

import (
	"context"
	"github.com/deltafs/deltafs/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"errors"
)

// TestRestoreOfDeletedFileFollowsNoSymlink is a review's repro: a user
// removes their directory k holding a file with history, makes k a
// symlink to a directory outside the tree, and has root restore the
// deleted file at k/sub/f. The restore must fail, making and writing
// nothing outside; it made k's target's sub/ as root and wrote the
// file there (then removed it by path, which a second swap could aim
// at another file).
func TestRestoreOfDeletedFileFollowsNoSymlink(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	outside := filepath.Join(t.TempDir(), "outside")
	mustDo(t, os.Mkdir(outside, 0o755))
	ctx := context.Background()
	l := start(t, store)
	mustDo(t, os.MkdirAll(l.mnt+"/k/sub", 0o755))
	mustDo(t, os.WriteFile(l.mnt+"/k/sub/f", []byte("the user's content\n"), 0o644))
	mustDo(t, os.Mkdir(l.mnt+"/.snapshots/a", 0o755))
	mustDo(t, os.RemoveAll(l.mnt+"/k"))
	mustDo(t, os.Symlink(outside, l.mnt+"/k"))
	c := connect(t, l.mnt, false)
	list := deletedPaths(t, c, "")
	if len(list) != 1 {
		t.Fatalf("deleted: %+v", list)
	}
	_, err := c.Restore(ctx, Target{File: list[0].File, Path: "k/sub/f"}, nil)
	if err == nil {
		t.Fatal("the restore through a symlinked directory succeeded")
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("the restore made %d entries outside the tree (%s)", len(es), es[0].Name())
	}
	l.stop(t)
	// Offline, the same through the store's live tree.
	o, err := OpenOffline(store, false, quiet())
	mustDo(t, err)
	defer o.Close()
	oc := o.Controller()
	if _, err := oc.Restore(ctx, Target{File: list[0].File, Path: "k/sub/f"}, nil); err == nil {
		t.Fatal("the offline restore through a symlinked directory succeeded")
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("the offline restore made %d entries outside the tree", len(es))
	}
}

// TestBeneathHelpers: opening, making and removing under a root refuse
// a symlink on the way, and a rewrite refuses a file replaced since the
// restore looked it up.
func TestBeneathHelpers(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	mustDo(t, os.WriteFile(filepath.Join(outside, "f"), []byte("outside\n"), 0o644))
	mustDo(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(root, "d", "f"), []byte("inside\n"), 0o644))
	var st syscall.Stat_t
	mustDo(t, syscall.Lstat(filepath.Join(root, "d", "f"), &st))
	f, err := openSameBeneath(root, "d/f", st.Ino)
	mustDo(t, err)
	f.Close()
	if _, err := openSameBeneath(root, "d/f", st.Ino+1); err == nil {
		t.Error("openSameBeneath took another inode")
	}
	mustDo(t, os.Rename(filepath.Join(root, "d"), filepath.Join(root, "d.moved")))
	mustDo(t, os.Symlink(outside, filepath.Join(root, "d")))
	if _, err := openSameBeneath(root, "d/f", st.Ino); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("openSameBeneath through a symlink: %v, want ELOOP", err)
	}
	if err := mkdirAllBeneath(root, "d/new", 0o755); err == nil {
		t.Error("mkdirAllBeneath through a symlink succeeded")
	}
	mine, err := openBeneath(root, "d.moved/f", os.O_RDONLY, 0)
	mustDo(t, err)
	defer mine.Close()
	if err := removeBeneath(root, "d/f", mine); err == nil {
		t.Error("removeBeneath through a symlink succeeded")
	}
	if b, err := os.ReadFile(filepath.Join(outside, "f")); err != nil || string(b) != "outside\n" {
		t.Fatalf("outside f: %q, %v", b, err)
	}
	if es, _ := os.ReadDir(outside); len(es) != 1 {
		t.Fatalf("outside holds %d entries", len(es))
	}
	mustDo(t, mkdirAllBeneath(root, "a/b/c", 0o755))
	if fi, err := os.Stat(filepath.Join(root, "a/b/c")); err != nil || !fi.IsDir() {
		t.Fatalf("mkdirAllBeneath: %v", err)
	}
}

// TestLiveReadsFollowNoSymlink: the mount's own reads of a live file by
// path (a snapshot's or a restore's liveRevs.openSame, verify's
// compare) refuse a symlink swapped in above the file, where they read
// the file outside the tree it led to (into a revision of the user's own
// file, for liveRevs).
func TestLiveReadsFollowNoSymlink(t *testing.T) {
	live, outside := t.TempDir(), t.TempDir()
	mustDo(t, os.WriteFile(filepath.Join(outside, "f"), []byte("outside\n"), 0o644))
	mustDo(t, os.Mkdir(filepath.Join(live, "d.moved"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(live, "d.moved", "f"), []byte("inside\n"), 0o644))
	mustDo(t, os.Symlink(outside, filepath.Join(live, "d")))
	r := &liveRevs{live: live}
	if f, err := r.openSame(filepath.Join(live, "d", "f"), fs.FileID{}); err == nil {
		f.Close()
		t.Fatal("openSame read a file through a symlinked directory")
	}
	var st syscall.Stat_t
	mustDo(t, syscall.Stat(filepath.Join(outside, "f"), &st))
	c := &liveCheck{live: live}
	same, err := c.sameContent(filepath.Join(live, "d", "f"), st.Ino, &revText{data: []byte("outside\n"), size: 8})
	if same {
		t.Fatalf("verify compared a file through a symlinked directory (%v)", err)
	}
	if f, err := r.openSame(filepath.Join(live, "d.moved", "f"), fs.FileID{}); err != nil {
		t.Fatalf("openSame of a plain path: %v", err)
	} else {
		f.Close()
	}
}

// TestPathsThroughAnotherUsersSymlink: a history command's path that
// leads through another user's symlink is refused (a review had root's
// restore of one user's file, through a symlink a second user made in
// the mount, restore a third user's file), one of the caller's or
// root's is followed; and the mount resolves a path it is given in its
// live tree with no symlink on the way.
func TestPathsThroughAnotherUsersSymlink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a symlink to another user")
	}
	root := t.TempDir()
	live := filepath.Join(root, "store", liveDir)
	mustDo(t, os.MkdirAll(filepath.Join(live, "a"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(root, "store", "FORMAT"), []byte("x"), 0o600))
	mustDo(t, os.WriteFile(filepath.Join(live, "a", "x"), []byte("a's\n"), 0o600))
	mustDo(t, os.Symlink("a", filepath.Join(live, "mine")))
	mustDo(t, os.Symlink("a", filepath.Join(live, "theirs")))
	mustDo(t, os.Lchown(filepath.Join(live, "theirs"), 65534, 65534))
	if _, rel, err := Locate(filepath.Join(live, "mine", "x")); err != nil || rel != "a/x" {
		t.Errorf("through the caller's own symlink: %q, %v", rel, err)
	}
	if _, rel, err := Locate(filepath.Join(live, "theirs", "x")); !errors.Is(err, ErrForeignSymlink) {
		t.Errorf("through another user's symlink: %q, %v; want ErrForeignSymlink", rel, err)
	}
	if lf, err := openLiveFile(live, "mine/x"); err == nil {
		t.Errorf("the mount resolved a path through a symlink in its tree: %+v", lf)
	}
	if lf, err := openLiveFile(live, "a/x"); err != nil || lf.Ino == 0 {
		t.Errorf("a plain path: %+v, %v", lf, err)
	}
}
