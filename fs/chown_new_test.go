package fs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestChownNewRefusesAHardLink: a node just made is chowned through a
// descriptor of it only while it has a single link, so a hard link
// swapped in for it between the make and the chown (with
// fs.protected_hardlinks off) leaves the file it links to as it was.
func TestChownNewRefusesAHardLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	dir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, filepath.Join(dir, "swapped")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "made"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dfd, err := syscall.Open(dir, unix.O_PATH|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dfd)
	if err := chownNew(dfd, "swapped", 1000, 1000); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("chown of a hard link to another file: %v, want EEXIST", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(victim, &st); err != nil || st.Uid != 0 || st.Gid != 0 {
		t.Fatalf("the linked file: uid %d gid %d, %v", st.Uid, st.Gid, err)
	}
	if err := chownNew(dfd, "made", 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(filepath.Join(dir, "made"), &st); err != nil || st.Uid != 1000 {
		t.Fatalf("the node made: uid %d, %v", st.Uid, err)
	}
}
