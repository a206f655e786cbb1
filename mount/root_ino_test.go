package mount

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestRootInode: the mount's root has the live directory's inode number,
// not go-fuse's 0 (ls -id printed "?"), and no file under it shares it.
func TestRootInode(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	mustDo(t, os.Mkdir(l.mnt+"/d", 0o755))
	var root, dot, d, live syscall.Stat_t
	mustDo(t, syscall.Stat(l.mnt, &root))
	mustDo(t, syscall.Stat(l.mnt+"/d/..", &dot))
	mustDo(t, syscall.Stat(l.mnt+"/d", &d))
	mustDo(t, syscall.Stat(filepath.Join(store, liveDir), &live))
	if root.Ino == 0 || root.Ino != live.Ino || dot.Ino != root.Ino || d.Ino == root.Ino {
		t.Errorf("inodes: root %d, d/.. %d, d %d, live directory %d", root.Ino, dot.Ino, d.Ino, live.Ino)
	}
}
