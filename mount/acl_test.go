package mount

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
)

// TestAllowOtherEnforcesACLs: with --allow-other the kernel checks
// permissions, and must check a file's POSIX ACL too, not its mode bits
// only: an ACL denying nobody a 0644 file keeps nobody out, and one
// granting nobody read of a 0600 file lets nobody read it.
func TestAllowOtherEnforcesACLs(t *testing.T) {
	if _, err := exec.LookPath("setfacl"); err != nil {
		testutil.SkipOrFail(t, "setfacl not installed (Debian package acl)")
	}
	l := allowOtherMount(t)
	denied, granted := filepath.Join(l.mnt, "denied"), filepath.Join(l.mnt, "granted")
	if err := os.WriteFile(denied, []byte("public\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(granted, []byte("shared\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The mode bits alone, before any ACL: what the kernel checked before.
	if err := readAs(denied); err != nil {
		t.Fatalf("nobody reads the 0644 file: %v", err)
	}
	if err := readAs(granted); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("nobody reads the 0600 file: %v, want EACCES", err)
	}
	for _, c := range [][]string{{"-m", "u:nobody:---", denied}, {"-m", "u:nobody:r--", granted}} {
		if out, err := exec.Command("setfacl", c...).CombinedOutput(); err != nil {
			t.Fatalf("setfacl %v: %v\n%s", c, err, out)
		}
	}
	if out, err := exec.Command("getfacl", "-c", granted).CombinedOutput(); err != nil || !strings.Contains(string(out), "user:nobody:r--") {
		t.Fatalf("getfacl %s through the mount: %v\n%s", granted, err, out)
	}
	if err := readAs(denied); !errors.Is(err, syscall.EACCES) {
		t.Errorf("nobody reads the file whose ACL denies nobody: %v, want EACCES", err)
	}
	if err := readAs(granted); err != nil {
		t.Errorf("nobody reads the 0600 file whose ACL grants nobody read: %v", err)
	}
	// With ACLs on, the VFS leaves the umask to the file system: the
	// kernel's FUSE client must still apply it to a new file.
	old := syscall.Umask(0o027)
	err := os.WriteFile(filepath.Join(l.mnt, "masked"), nil, 0o666)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(l.mnt, "masked")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("a 0666 file created under umask 027: %v %v, want -rw-r-----", fi.Mode(), err)
	}
}
