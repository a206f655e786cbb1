package fs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

// aclEntry is one entry of a POSIX ACL in its xattr form.
type aclEntry struct {
	tag, perm uint16
	id        uint32
}

// POSIX ACL entry tags, in the order an ACL lists them.
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclMask     = 0x10
	aclOther    = 0x20
	aclNoID     = 0xffffffff
)

// aclXattr encodes entries as the value of system.posix_acl_access.
func aclXattr(entries ...aclEntry) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2) // POSIX_ACL_XATTR_VERSION
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// lgetxattr returns the value of attr of p, nil when p has none.
func lgetxattr(t *testing.T, p, attr string) []byte {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Lgetxattr(p, attr, buf)
	if errors.Is(err, unix.ENODATA) {
		return nil
	}
	if err != nil {
		t.Fatalf("lgetxattr %s %s: %v", p, attr, err)
	}
	return buf[:n]
}

// TestKernelKeepsACLs: on a mount with --allow-other, ls -l reads system.posix_acl_access of every file
// it lists (coreutils 9.1), and without CAP_POSIX_ACL the kernel kept no
// ACL: each listing of a directory of 50,000 files sent 50,000 GETXATTR
// requests to the server. With it (Options) the kernel keeps each
// inode's ACLs, absent ones too, so a second listing asks nothing; and
// forgets them at each change through the mount: an ACL set, the mask a
// chmod moves and a removal are read back at once, as the live file has
// them.
func TestKernelKeepsACLs(t *testing.T) {
	testutil.RequireFUSE(t)
	const files = 200
	f, dir := mountWithFiles(t, files)
	// ls -l: a listing, then each file's attributes and access ACL
	ls := func() int64 {
		t.Helper()
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) != files {
			t.Fatalf("readdir: %d entries, %v", len(ents), err)
		}
		before := f.xattrAsks.Load()
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			if _, err := os.Lstat(p); err != nil {
				t.Fatal(err)
			}
			if acl := lgetxattr(t, p, xattrACLAccess); acl != nil {
				t.Fatalf("%s has an ACL: %x", p, acl)
			}
		}
		return f.xattrAsks.Load() - before
	}
	ls() // the kernel reads each file's ACL once
	if asks := ls(); asks != 0 {
		t.Fatalf("a second ls -l of %d files asked the server %d times for their ACLs; the kernel keeps them", files, asks)
	}

	p := filepath.Join(dir, "0")
	lp := filepath.Join(f.live, "d", "0")
	acl := aclXattr(aclEntry{aclUserObj, 6, aclNoID}, aclEntry{aclUser, 4, 65534},
		aclEntry{aclGroupObj, 4, aclNoID}, aclEntry{aclMask, 6, aclNoID}, aclEntry{aclOther, 4, aclNoID})
	if err := unix.Lsetxattr(p, xattrACLAccess, acl, 0); errors.Is(err, unix.EOPNOTSUPP) {
		testutil.SkipOrFail(t, "the live directory's file system has no POSIX ACLs")
	} else if err != nil {
		t.Fatalf("set an ACL through the mount: %v", err)
	}
	seen := func(what string) []byte {
		t.Helper()
		got, want := lgetxattr(t, p, xattrACLAccess), lgetxattr(t, lp, xattrACLAccess)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: the mount shows the ACL %x, the live file has %x", what, got, want)
		}
		return got
	}
	if got := seen("after setxattr"); got == nil {
		t.Fatal("the live file has no ACL after setxattr")
	}
	if got := modeOf(t, p); got != 0o664 {
		t.Errorf("mode with the mask rw-: %v, want 0664", got)
	}
	if err := syscall.Chmod(p, 0o640); err != nil { // sets the mask to r--
		t.Fatal(err)
	}
	if got := seen("after chmod 0640"); bytes.Equal(got, acl) {
		t.Errorf("chmod 0640 left the ACL's mask rw-: %x", got)
	}
	if err := unix.Lremovexattr(p, xattrACLAccess); err != nil {
		t.Fatal(err)
	}
	if got := seen("after removexattr"); got != nil {
		t.Errorf("the ACL removed through the mount is still there: %x", got)
	}
}

// TestLsAsksOnce: ls -l (coreutils 9.1) asks every file it lists for
// its SELinux label and its access ACL. With --allow-other the kernel
// keeps ACLs (see TestKernelKeepsACLs) but no label: every listing of a directory of
// 50,000 files sent 50,000 GETXATTR security.selinux. On a host without
// SELinux an absent label is EOPNOTSUPP (absentXattr), after which ls
// asks no other file of the device: a listing asks the server once. A
// label a file has is read back as set; the history view (and the
// snapshot views, through the same absentXattr) answer absent labels
// alike.
func TestLsAsksOnce(t *testing.T) {
	testutil.RequireFUSE(t)
	if selinuxOn() {
		t.Skip("SELinux answers labels itself: the server is not asked")
	}
	ls, err := exec.LookPath("ls")
	if err != nil {
		testutil.SkipOrFail(t, "no ls")
	}
	const files = 200
	f, dir := mountWithFiles(t, files)
	lsl := func() int64 {
		t.Helper()
		before := f.xattrAsks.Load()
		out, err := exec.Command(ls, "-l", dir).CombinedOutput()
		if err != nil || bytes.Count(out, []byte("\n")) != files+1 {
			t.Fatalf("ls -l: %v\n%s", err, out)
		}
		return f.xattrAsks.Load() - before
	}
	lsl() // the kernel reads each file's ACL once
	if asks := lsl(); asks > 1 {
		t.Fatalf("a second ls -l of %d files asked the server %d times for xattrs, want at most 1 (the first label)", files, asks)
	}

	p := filepath.Join(dir, "0")
	if _, err := unix.Lgetxattr(p, xattrSELinux, make([]byte, 256)); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatalf("the label of a file without one: %v, want EOPNOTSUPP", err)
	}
	if _, err := unix.Lgetxattr(p, "user.none", make([]byte, 256)); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("another absent xattr: %v, want ENODATA", err)
	}
	if _, err := unix.Lgetxattr(filepath.Join(filepath.Dir(dir), HistoryName), xattrSELinux, make([]byte, 256)); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatalf("the label of .history: %v, want EOPNOTSUPP", err)
	}
	label := []byte("system_u:object_r:user_home_t:s0\x00")
	if err := unix.Lsetxattr(p, xattrSELinux, label, 0); err != nil {
		t.Fatalf("set a label through the mount: %v", err)
	}
	if got := lgetxattr(t, p, xattrSELinux); !bytes.Equal(got, label) {
		t.Fatalf("the label set through the mount reads %q, want %q", got, label)
	}
}

// mountWithFiles mounts a live tree over a fresh directory with the
// mount's options for --allow-other (the kernel keeps ACLs then) and
// makes n empty files in its directory d, which it returns with the FS.
func mountWithFiles(t *testing.T, n int) (*FS, string) {
	t.Helper()
	requireAllowOther(t)
	f, mnt := mountPlain(t, true)
	dir := filepath.Join(mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f, dir
}

// requireAllowOther skips (fails under CI) where a mount may not let
// other users in: allow_other needs root or user_allow_other.
func requireAllowOther(t *testing.T) {
	t.Helper()
	testutil.RequireFUSE(t)
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "allow_other needs root or user_allow_other in /etc/fuse.conf")
	}
}

// mountPlain mounts a live tree over a fresh directory, with no
// recorder, with the mount's options (allowOther, see Options): the FS
// and its mount point.
func mountPlain(t *testing.T, allowOther bool) (*FS, string) {
	t.Helper()
	f, err := New(Config{LiveDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // after the unmount, which Mount registers later
	mnt, _ := testutil.Mount(t, f.Root(), Options(allowOther))
	return f, mnt
}
