package mount

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
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

// TestACLModeSeenAtOnce: setting or removing a POSIX ACL changes the
// file's mode bits (its group entry is the mask), and cp -a and mv set
// the final mode that way. A kernel without the mount's ACL support
// takes system.posix_acl_access as any xattr and kept the mode it had
// cached, for the live tree's whole attribute timeout: stat showed 0700
// for a directory setfacl had opened to 0755. A mount without
// --allow-other leaves ACLs to the live directory (fs.Options), and the
// server tells the kernel to forget the attributes after an ACL change;
// with --allow-other the kernel handles ACLs and forgets them itself.
func TestACLModeSeenAtOnce(t *testing.T) {
	if _, err := exec.LookPath("setfacl"); err != nil {
		testutil.SkipOrFail(t, "setfacl not installed (Debian package acl)")
	}
	for _, other := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow-other=%v", other), func(t *testing.T) {
			if other && os.Geteuid() != 0 {
				testutil.SkipOrFail(t, "allow_other needs root or user_allow_other in /etc/fuse.conf")
			}
			aclModeSeenAtOnce(t, other)
		})
	}
}

func aclModeSeenAtOnce(t *testing.T, allowOther bool) {
	l := startWith(t, Config{Store: filepath.Join(t.TempDir(), "store"), AllowOther: allowOther})
	d, f := filepath.Join(l.mnt, "d"), filepath.Join(l.mnt, "f")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// statx asking for the mode alone, as stat -c %A and ls do: the
	// kernel answers it from its cache unless the mode was invalidated
	// (an xattr change invalidates only the ctime)
	mode := func(p string) os.FileMode {
		t.Helper()
		var st unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, p, 0, unix.STATX_TYPE|unix.STATX_MODE, &st); err != nil {
			t.Fatal(err)
		}
		return os.FileMode(st.Mode & 0o777)
	}
	if mode(d) != 0o700 || mode(f) != 0o600 { // cached by the kernel now
		t.Fatalf("modes %v %v before the ACLs", mode(d), mode(f))
	}
	setfacl := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("setfacl", args...).CombinedOutput(); err != nil {
			t.Fatalf("setfacl %v: %v\n%s", args, err, out)
		}
	}
	setfacl("-m", "g::rx,o::rx", d)
	setfacl("-m", "g::r,o::r", f)
	if got := mode(d); got != 0o755 {
		t.Errorf("directory mode after setfacl g::rx,o::rx: %v, want 0755", got)
	}
	if got := mode(f); got != 0o644 {
		t.Errorf("file mode after setfacl g::r,o::r: %v, want 0644", got)
	}
	setfacl("-m", "u:nobody:rwx", d) // an extended ACL: the group bits are its mask
	if got := mode(d); got != 0o775 {
		t.Errorf("directory mode with u:nobody:rwx: %v, want 0775 (mask rwx)", got)
	}
	setfacl("-b", d) // removes the extended ACL; the mode keeps the mask's bits
	if got, live := mode(d), mode(filepath.Join(l.store, "live", "d")); got != live {
		t.Errorf("directory mode after setfacl -b: %v through the mount, %v in the live directory", got, live)
	}
}
