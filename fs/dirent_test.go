package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestNameOfIno finds a hard link's other name among many entries (more
// than one getdents buffer holds), and none for a file with one name.
func TestNameOfIno(t *testing.T) {
	dir := t.TempDir()
	for i := range 2000 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-with-a-long-name-%04d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(dir, "file-with-a-long-name-1999")
	if err := os.Link(target, filepath.Join(dir, "zz-link")); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(target, &st); err != nil {
		t.Fatal(err)
	}
	if got := nameOfIno(dir, st.Ino, "zz-link"); got != "file-with-a-long-name-1999" {
		t.Fatalf("other name of the link: %q", got)
	}
	if got := nameOfIno(dir, st.Ino, "file-with-a-long-name-1999"); got != "zz-link" {
		t.Fatalf("other name of the file: %q", got)
	}
	if err := syscall.Lstat(filepath.Join(dir, "file-with-a-long-name-0007"), &st); err != nil {
		t.Fatal(err)
	}
	if got := nameOfIno(dir, st.Ino, "file-with-a-long-name-0007"); got != "" {
		t.Fatalf("a file with one name: %q", got)
	}
}
