package mount

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

func readAs(p string) error {
	return testutil.AsNobody(func() error { _, err := os.ReadFile(p); return err })
}

// allowOtherMount mounts a new store with --allow-other, reachable by
// nobody (the test's temporary directories are 0700).
func allowOtherMount(t *testing.T) *live {
	t.Helper()
	return allowOtherMountOf(t, filepath.Join(t.TempDir(), "s.dfs"))
}

// allowOtherMountOf is allowOtherMount of the store at store.
func allowOtherMountOf(t *testing.T, store string) *live {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root (to act as another user)")
	}
	l := startWith(t, Config{Store: store, AllowOther: true})
	for _, d := range []string{filepath.Dir(l.mnt), l.mnt} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestHistoryKeepsOldRevisionsPrivate: a file written 0600 with a secret,
// then rewritten with public content and made 0644: the old revision in
// .history must not become readable by others with the new mode (the
// store keeps no mode per revision, so revisions are the owner's only).
func TestHistoryKeepsOldRevisionsPrivate(t *testing.T) {
	l := allowOtherMount(t)
	p := filepath.Join(l.mnt, "f")
	if err := os.WriteFile(p, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.recorded(t, 1)
	if err := os.WriteFile(p, []byte("public\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	l.recorded(t, 2)
	if err := readAs(p); err != nil {
		t.Fatalf("nobody reads the 0644 live file: %v", err)
	}
	hd := filepath.Join(l.mnt, ".history", "f")
	fi, err := os.Stat(hd)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o500 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf(".history/f: %v uid %d, want dr-x------ root", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
	}
	ents, err := os.ReadDir(hd)
	if err != nil || len(ents) != 2 {
		t.Fatalf("ls %s: %v %v", hd, ents, err)
	}
	for _, e := range ents {
		rp := filepath.Join(hd, e.Name())
		fi, err := os.Stat(rp)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o400 {
			t.Errorf("%s: %v, want -r--------", e.Name(), fi.Mode())
		}
		if err := readAs(rp); !errors.Is(err, syscall.EACCES) {
			t.Errorf("nobody reads %s: %v, want EACCES", e.Name(), err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(hd, ents[0].Name())); err != nil || string(b) != "secret\n" {
		t.Errorf("owner reads revision 0: %q %v", b, err)
	}
	if err := testutil.AsNobody(func() error { _, err := os.ReadDir(hd); return err }); !errors.Is(err, syscall.EACCES) {
		t.Errorf("nobody lists .history/f: %v, want EACCES", err)
	}
}

// TestSnapshotsBelongToTheLiveOwner: the kernel checks permissions on
// every mount (default_permissions, which it turns on with its ACL
// support), so the user who mounted a store must own .snapshots to take
// a snapshot with mkdir there, and to rename and delete one. It was
// root's, 0755: on a user's mount (fusermount3, the live directory the
// user's) the user's mkdir failed with EACCES before reaching the mount.
// Played here by nobody through --allow-other, on a store whose live
// directory is nobody's: .snapshots is the live root's owner's, as the
// mount point and .history are.
func TestSnapshotsBelongToTheLiveOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root (to act as another user)")
	}
	store := filepath.Join(t.TempDir(), "s.dfs")
	start(t, store).stop(t)
	if err := os.Chown(filepath.Join(store, liveDir), testutil.Nobody, testutil.Nobody); err != nil {
		t.Fatal(err)
	}
	l := allowOtherMountOf(t, store)
	snaps := filepath.Join(l.mnt, ".snapshots")
	for _, p := range []string{l.mnt, snaps, filepath.Join(l.mnt, ".history")} {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != testutil.Nobody || st.Gid != testutil.Nobody {
			t.Errorf("%s belongs to %d:%d, want nobody's (%d), the live directory's owner", p, st.Uid, st.Gid, testutil.Nobody)
		}
	}
	if err := testutil.AsNobody(func() error { return os.Mkdir(filepath.Join(snaps, "s1"), 0o755) }); err != nil {
		t.Fatalf("the live directory's owner takes a snapshot: %v", err)
	}
	if err := testutil.AsNobody(func() error {
		return os.Rename(filepath.Join(snaps, "s1"), filepath.Join(snaps, "s2"))
	}); err != nil {
		t.Fatalf("the live directory's owner renames a snapshot: %v", err)
	}
	if err := testutil.AsNobody(func() error { return syscall.Rmdir(filepath.Join(snaps, "s2")) }); err != nil {
		t.Fatalf("the live directory's owner deletes a snapshot: %v", err)
	}
}

// TestTrustedXattrsListedToRootOnly: the server runs as root and reads
// every xattr of the live files, trusted.* too, which a local file
// system lists to privileged callers only (the kernel refuses the
// value to others itself, not the name in a listing). Through a mount
// with --allow-other, another user listed a file's trusted.* names, in
// the live tree and in a snapshot.
func TestTrustedXattrsListedToRootOnly(t *testing.T) {
	l := allowOtherMount(t)
	f := filepath.Join(l.mnt, "f")
	if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"trusted.secret": "s", "user.note": "n"} {
		if err := unix.Lsetxattr(f, name, []byte(v), 0); err != nil {
			t.Fatalf("set %s: %v", name, err)
		}
	}
	if err := os.Mkdir(filepath.Join(l.mnt, ".snapshots", "s1"), 0o755); err != nil {
		t.Fatal(err)
	}
	list := func(p string) ([]byte, error) {
		buf := make([]byte, 4096)
		n, err := unix.Llistxattr(p, buf)
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
	for _, p := range []string{f, filepath.Join(l.mnt, ".snapshots", "s1", "f")} {
		mine, err := list(p)
		if err != nil || !bytes.Contains(mine, []byte("trusted.secret\x00")) || !bytes.Contains(mine, []byte("user.note\x00")) {
			t.Errorf("root lists %s: %q %v, want trusted.secret and user.note", p, mine, err)
		}
		var theirs []byte
		if err := testutil.AsNobody(func() (err error) { theirs, err = list(p); return err }); err != nil {
			t.Fatalf("nobody lists %s: %v", p, err)
		}
		if bytes.Contains(theirs, []byte("trusted.")) || !bytes.Contains(theirs, []byte("user.note\x00")) {
			t.Errorf("nobody lists %s: %q, want user.note and no trusted.* name", p, theirs)
		}
	}
}
