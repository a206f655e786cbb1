package fs

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Without a file handle (open_by_handle_at needs privileges), Change.Open
// opens the reported path and accepts it only if it is still the reported
// file: same inode and FileID.
func TestChangeOpenByPathChecksIdentity(t *testing.T) {
	live := t.TempDir()
	f, err := New(Config{LiveDir: live})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := filepath.Join(live, "a")
	if err := os.WriteFile(p, []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(p, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := fdID(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	if id.IsZero() {
		t.Skip("the live filesystem keeps no user xattrs")
	}
	change := func() *Change {
		return &Change{Path: "a", ID: id, Ino: st.Ino, ref: &contentRef{rootFd: f.rootFd, dirFd: f.dirFd, rel: "a"}}
	}
	c := change()
	lf, err := c.Open()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(lf); string(got) != "first" {
		t.Fatalf("read %q", got)
	}
	c.Close()
	if c.Content != nil || c.ref != nil {
		t.Fatal("Close left the change open")
	}
	// another file now has the name (possibly the same inode number)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("second"), 0o644); err != nil {
		t.Fatal(err)
	}
	if lf, err := change().Open(); err == nil {
		got, _ := io.ReadAll(lf)
		t.Fatalf("opened %q by path for a file that was replaced", got)
	}
}
