package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
)

// TestOwnMountAsksNoAttributesPerChange: with default_permissions the
// kernel checks a directory's mode before each name it creates or
// removes there, and forgets the directory's attributes after each such
// change, so that every create and unlink of an untar, a git commit or
// an rm -rf cost one more GETATTR round trip. A mount that lets no other
// user in leaves the checks to the live directory (Options(false)):
// creating and removing files asks for no attributes per file. With
// --allow-other (Options(true)) the kernel must check other users and
// the round trips come back, which the test also shows, so that it
// fails if the two settings stop differing.
func TestOwnMountAsksNoAttributesPerChange(t *testing.T) {
	testutil.RequireFUSE(t)
	const files = 100
	asks := func(allowOther bool) int64 {
		f, mnt := mountPlain(t, allowOther)
		dir := filepath.Join(mnt, "d")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		before := f.getattrs.Load()
		for i := range files {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for i := range files {
			if err := os.Remove(filepath.Join(dir, fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		return f.getattrs.Load() - before
	}
	if n := asks(false); n > files/10 {
		t.Errorf("creating and removing %d files in the user's own mount asked for attributes %d times, want at most %d", files, n, files/10)
	}
	requireAllowOther(t)
	if n := asks(true); n < files {
		t.Errorf("with --allow-other, creating and removing %d files asked for attributes %d times: the kernel's checks (default_permissions) asked at least once per file before", files, n)
	}
}
