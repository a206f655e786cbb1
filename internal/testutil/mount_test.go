package testutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
)

func TestMountUnmount(t *testing.T) {
	RequireFUSE(t)
	var dir string
	t.Run("mounted", func(t *testing.T) {
		dir, _ = Mount(t, &fs.Inode{}, nil)
		if !Mounted(dir) {
			t.Fatalf("%s not in /proc/self/mountinfo", dir)
		}
		if _, err := os.ReadDir(dir); err != nil {
			t.Fatal(err)
		}
	})
	if dir == "" || Mounted(dir) {
		t.Fatalf("mount %q left behind after the subtest's cleanup", dir)
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	if got := unescapeMountinfo(`/tmp/a\040b\134c`); got != `/tmp/a b\c` {
		t.Fatalf("got %q", got)
	}
	if got := unescapeMountinfo(filepath.Join("/x", "y")); got != "/x/y" {
		t.Fatalf("got %q", got)
	}
}
