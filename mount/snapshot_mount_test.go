package mount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
	"golang.org/x/sys/unix"
)

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readOr(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(b)
}

// TestMountedSnapshots: snapshots of a real mount keep what the tree was,
// including a file still open for writing, hard links, symlinks, modes and
// xattrs, while the live tree moves on; .snapshots is never inside one.
func TestMountedSnapshots(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	m := l.mnt
	mustDo(t, os.MkdirAll(m+"/src/pkg", 0o755))
	mustDo(t, os.WriteFile(m+"/src/pkg/a.go", []byte("package a\n"), 0o644))
	mustDo(t, os.WriteFile(m+"/notes.txt", []byte("v1\n"), 0o600))
	mustDo(t, os.Link(m+"/src/pkg/a.go", m+"/src/a-link.go"))
	mustDo(t, os.Symlink("pkg/a.go", m+"/src/sym"))
	mustDo(t, unix.Setxattr(m+"/notes.txt", "user.tag", []byte("t1"), 0))
	open, err := os.OpenFile(m+"/open.log", os.O_CREATE|os.O_WRONLY, 0o644)
	mustDo(t, err)
	defer open.Close()
	_, err = open.WriteString("written before the snapshot\n")
	mustDo(t, err)

	mustDo(t, os.Mkdir(m+"/.snapshots/s1", 0o755))

	_, err = open.WriteString("written after\n")
	mustDo(t, err)
	mustDo(t, os.WriteFile(m+"/notes.txt", []byte("v2\n"), 0o600))
	mustDo(t, os.Chmod(m+"/src/pkg/a.go", 0o755))
	mustDo(t, os.Remove(m+"/src/a-link.go"))
	mustDo(t, unix.Setxattr(m+"/notes.txt", "user.tag", []byte("t2"), 0))
	mustDo(t, os.Rename(m+"/src/pkg", m+"/pkg2"))
	mustDo(t, os.Mkdir(m+"/.snapshots/s2", 0o755))

	s1, s2 := m+"/.snapshots/s1", m+"/.snapshots/s2"
	for p, want := range map[string]string{
		s1 + "/notes.txt": "v1\n", s1 + "/src/pkg/a.go": "package a\n", s1 + "/src/a-link.go": "package a\n",
		s1 + "/src/sym": "package a\n", s1 + "/open.log": "written before the snapshot\n",
		s2 + "/notes.txt": "v2\n", s2 + "/pkg2/a.go": "package a\n",
		s2 + "/open.log": "written before the snapshot\nwritten after\n",
	} {
		if got := readOr(t, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	var a, b syscall.Stat_t
	mustDo(t, syscall.Lstat(s1+"/src/pkg/a.go", &a))
	mustDo(t, syscall.Lstat(s1+"/src/a-link.go", &b))
	if a.Ino != b.Ino || a.Nlink != 2 || a.Mode&0o777 != 0o644 {
		t.Errorf("hard links in s1: ino %d/%d nlink %d mode %o", a.Ino, b.Ino, a.Nlink, a.Mode)
	}
	if fi, err := os.Stat(s2 + "/pkg2/a.go"); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("s2 a.go mode: %v %v", fi, err)
	}
	if fi, err := os.Stat(s1 + "/notes.txt"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("s1 notes.txt: %v %v", fi, err)
	}
	buf := make([]byte, 16)
	if n, err := unix.Getxattr(s1+"/notes.txt", "user.tag", buf); err != nil || string(buf[:n]) != "t1" {
		t.Errorf("s1 xattr: %q %v", buf[:max(n, 0)], err)
	}
	if n, _ := unix.Listxattr(s1+"/notes.txt", buf); strings.Contains(string(buf[:max(n, 0)]), "deltafs") {
		t.Errorf("s1 shows deltafs's own xattr: %q", buf[:n])
	}
	if _, err := os.Stat(s1 + "/.snapshots"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".snapshots inside a snapshot: %v", err)
	}
	if err := os.WriteFile(s1+"/notes.txt", []byte("x"), 0o600); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write into a snapshot: %v", err)
	}
	if err := os.Mkdir(m+"/.snapshots/a\\b/..", 0o755); err == nil {
		t.Error("mkdir of a nested name in .snapshots succeeded")
	}
	if err := os.Mkdir(m+"/.snapshots/"+strings.Repeat("x", 256), 0o755); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("256-byte snapshot name: %v", err)
	}
	for _, name := range []string{"a\nb", "tab\tx", "\x7f"} {
		if err := os.Mkdir(m+"/.snapshots/"+name, 0o755); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("mkdir of snapshot %q: %v, want EINVAL", name, err)
		}
		// rename(2)'s EINVAL means "new is a subdirectory of old" (mv
		// says so): a refused new name is EPERM.
		if err := os.Rename(s1, m+"/.snapshots/"+name); !errors.Is(err, syscall.EPERM) {
			t.Errorf("rename to snapshot %q: %v, want EPERM", name, err)
		}
	}
	mustDo(t, os.Rename(s1, m+"/.snapshots/first"))
	mustDo(t, os.Remove(s2))
	ents, err := os.ReadDir(m + "/.snapshots")
	if err != nil || len(ents) != 1 || ents[0].Name() != "first" {
		t.Fatalf("ls .snapshots: %v %v", ents, err)
	}
	if got := readOr(t, m+"/.snapshots/first/notes.txt"); got != "v1\n" {
		t.Errorf("renamed snapshot: %q", got)
	}
}

// TestMountedSnapshotControl reaches a running mount from the store path
// and from a path inside the mount, as the CLI does.
func TestMountedSnapshotControl(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	mustDo(t, os.MkdirAll(l.mnt+"/deep/dir", 0o755))
	mustDo(t, os.WriteFile(l.mnt+"/deep/dir/f", []byte("one"), 0o644))
	ctx := context.Background()
	for i, where := range []string{store, l.mnt + "/deep/dir"} {
		c, closeFn, err := Connect(ctx, where, false, quiet())
		if err != nil {
			t.Fatalf("connect via %s: %v", where, err)
		}
		if _, ok := c.(remote); !ok {
			t.Fatalf("connect via %s opened the store instead of the mount (%T)", where, c)
		}
		if _, err := c.CreateSnapshot(ctx, fmt.Sprintf("cli-%d", i)); err != nil {
			t.Fatal(err)
		}
		st, err := c.Stats(ctx)
		if err != nil || !st.Mounted || st.Snapshots != int64(i+1) || st.Files != 1 {
			t.Fatalf("stats via %s: %+v %v", where, st, err)
		}
		closeFn()
	}
	if got := readOr(t, l.mnt+"/.snapshots/cli-1/deep/dir/f"); got != "one" {
		t.Fatalf("snapshot taken over the socket: %q", got)
	}
	if _, err := Call(ctx, store, Request{Op: "create", Name: "cli-0"}); !errors.Is(err, index.ErrExists) {
		t.Fatalf("duplicate over the socket: %v", err)
	}
	if _, err := Call(ctx, store, Request{Op: "create", Name: ByteString(AutoName(time.Now()))}); !errors.Is(err, index.ErrBadName) {
		t.Fatalf("an automatic snapshot's name over the socket: %v", err)
	}
	l.stop(t)
	if _, err := os.Stat(filepath.Join(store, ControlSocket)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("control socket left behind: %v", err)
	}
}

// TestAutomaticSnapshots: --snapshot-every with --keep-snapshots.
func TestAutomaticSnapshots(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := startWith(t, Config{Store: store, SnapshotEvery: 1100 * time.Millisecond, KeepSnapshots: 2})
	mustDo(t, os.WriteFile(l.mnt+"/f", []byte("x"), 0o644))
	mustDo(t, os.Mkdir(l.mnt+"/.snapshots/mine", 0o755))
	// An automatic snapshot's name is reserved: one a user made could
	// be retired as automatic.
	if err := os.Mkdir(l.mnt+"/.snapshots/auto-2026-11-30T16:37:17Z", 0o755); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("mkdir of an automatic name: %v, want EINVAL", err)
	}
	if err := os.Rename(l.mnt+"/.snapshots/mine", l.mnt+"/.snapshots/auto-2026-11-30T16:37:17Z"); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("rename to an automatic name: %v, want EPERM", err)
	}
	// mv read EINVAL as a move into a subdirectory of itself.
	if mv, err := exec.LookPath("mv"); err == nil {
		out, err := exec.Command(mv, l.mnt+"/.snapshots/mine", l.mnt+"/.snapshots/auto-2026-12-01T02:00:00Z").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Operation not permitted") {
			t.Fatalf("mv to an automatic name: %v: %s", err, out)
		}
	}
	time.Sleep(4 * time.Second)
	ents, err := os.ReadDir(l.mnt + "/.snapshots")
	mustDo(t, err)
	var auto []string
	mine := false
	for _, e := range ents {
		if isAuto(e.Name()) {
			auto = append(auto, e.Name())
		}
		mine = mine || e.Name() == "mine"
	}
	if len(auto) != 2 || !mine {
		t.Fatalf("after 4 s every 1.1 s keeping 2: %v", ents)
	}
}

// TestSnapshotsDirTimes: .snapshots shows the time of the last change to
// the list of snapshots, or of the mount's start, not the epoch; a
// snapshot taken through the control socket (behind the kernel's back)
// counts too, once the kernel's cached attributes expire.
func TestSnapshotsDirTimes(t *testing.T) {
	before := time.Now().Truncate(time.Second)
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	dir := l.mnt + "/.snapshots"
	mtime := func() time.Time {
		t.Helper()
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		return st.ModTime()
	}
	t0 := mtime()
	if t0.Before(before) || t0.After(time.Now()) {
		t.Fatalf(".snapshots mtime %v, want the mount's start (after %v)", t0, before)
	}
	time.Sleep(1100 * time.Millisecond)
	mustDo(t, os.Mkdir(dir+"/a", 0o755))
	t1 := mtime()
	if !t1.After(t0) {
		t.Fatalf(".snapshots mtime %v after a mkdir, want later than %v", t1, t0)
	}
	time.Sleep(1100 * time.Millisecond)
	if _, err := Call(context.Background(), store, Request{Op: "create", Name: "b"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the kernel's attribute timeout
	if t2 := mtime(); !t2.After(t1) {
		t.Fatalf(".snapshots mtime %v after a snapshot over the socket, want later than %v", t2, t1)
	}
}

// TestSnapshotRootXattrs: a snapshot's directory answers getxattr of
// user.deltafs.exclusive_bytes but does not list it, so that copying a
// snapshot with its attributes (cp --preserve=xattr, rsync -X) copies
// the tree's own xattrs only: listed, the computed one was copied too,
// which the live tree refuses (user.deltafs.* is deltafs's own), and
// copying a snapshot back into the mount failed. Every node of a snapshot lists
// exactly the xattrs it had.
func TestSnapshotRootXattrs(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	m := l.mnt
	mustDo(t, os.MkdirAll(m+"/d", 0o755))
	mustDo(t, os.WriteFile(m+"/d/f", []byte("content\n"), 0o644))
	mustDo(t, unix.Setxattr(m, "user.top", []byte("1"), 0))
	mustDo(t, unix.Setxattr(m+"/d", "user.dir", []byte("2"), 0))
	mustDo(t, unix.Setxattr(m+"/d/f", "user.file", []byte("3"), 0))
	mustDo(t, os.Mkdir(m+"/.snapshots/h01", 0o755))
	root := m + "/.snapshots/h01"

	list := func(p string) string {
		t.Helper()
		sz, err := unix.Listxattr(p, nil)
		mustDo(t, err)
		buf := make([]byte, sz)
		n, err := unix.Listxattr(p, buf)
		if err != nil || n != sz {
			t.Fatalf("listxattr %s: %d bytes, %v; the size query said %d", p, n, err, sz)
		}
		return fmt.Sprint(strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00"))
	}
	for p, want := range map[string]string{
		root:          "[user.top]",
		root + "/d":   "[user.dir]",
		root + "/d/f": "[user.file]",
	} {
		if got := list(p); got != want {
			t.Errorf("listxattr %s = %s, want %s", p, got, want)
		}
	}
	buf := make([]byte, 64)
	n, err := unix.Getxattr(root, "user.deltafs.exclusive_bytes", buf)
	if err != nil {
		t.Fatalf("getxattr user.deltafs.exclusive_bytes of a snapshot: %v", err)
	}
	if _, err := strconv.ParseInt(string(buf[:n]), 10, 64); err != nil {
		t.Errorf("user.deltafs.exclusive_bytes = %q, want a decimal number", buf[:n])
	}
	if out, err := exec.Command("cp", "-R", "--preserve=mode,timestamps,xattr", root+"/.", m+"/restored").CombinedOutput(); err != nil {
		t.Fatalf("cp --preserve=xattr of a snapshot into the mount: %v: %s", err, out)
	}
	if got := list(m + "/restored"); got != "[user.top]" {
		t.Errorf("listxattr of the copy = %s, want [user.top]", got)
	}
	if got := list(m + "/restored/d/f"); got != "[user.file]" {
		t.Errorf("listxattr of the copied file = %s, want [user.file]", got)
	}
}

// TestMoveIntoSnapshotsRefused: a directory or file moved into
// .snapshots is refused with EPERM and leaves no snapshot behind. The
// rename failed with EXDEV, on which mv copies: its mkdir of the name
// took a snapshot of the whole tree, then the copy failed (a user
// review).
func TestMoveIntoSnapshotsRefused(t *testing.T) {
	l := start(t, filepath.Join(t.TempDir(), "store"))
	m := l.mnt
	mustDo(t, os.MkdirAll(m+"/proj/sub", 0o755))
	mustDo(t, os.WriteFile(m+"/proj/sub/f", []byte("f\n"), 0o644))
	mustDo(t, os.WriteFile(m+"/file", []byte("file\n"), 0o644))
	for _, name := range []string{"proj", "file"} {
		if err := os.Rename(m+"/"+name, m+"/.snapshots/"+name); !errors.Is(err, syscall.EPERM) {
			t.Errorf("rename of %s into .snapshots: %v, want EPERM", name, err)
		}
	}
	out, err := exec.Command("mv", m+"/proj", m+"/.snapshots/").CombinedOutput()
	if err == nil {
		t.Errorf("mv of a directory into .snapshots succeeded: %s", out)
	}
	if ents, err := os.ReadDir(m + "/.snapshots"); err != nil || len(ents) != 0 {
		t.Errorf(".snapshots after the moves: %v, %v; want no snapshot", ents, err)
	}
	if got := readOr(t, m+"/proj/sub/f"); got != "f\n" {
		t.Errorf("proj/sub/f after the moves: %q", got)
	}
}

// TestViewListingsHaveDots: every directory the mount lists itself
// (.snapshots, a snapshot's directories, .history and a file's
// revisions) lists "." and ".." first, as the live directories do: ls -a
// showed neither (a user review).
func TestViewListingsHaveDots(t *testing.T) {
	l := start(t, filepath.Join(t.TempDir(), "store"))
	m := l.mnt
	mustDo(t, os.MkdirAll(m+"/d", 0o755))
	mustDo(t, os.WriteFile(m+"/d/f", []byte("f\n"), 0o644))
	l.recorded(t, 1)
	mustDo(t, os.Mkdir(m+"/.snapshots/s", 0o755))
	for dir, rest := range map[string]string{
		m + "/.snapshots": "s", m + "/.snapshots/s": "d", m + "/.snapshots/s/d": "f",
		m + "/.history": "d", m + "/.history/d": "f",
	} {
		out, err := exec.Command("ls", "-a", dir).Output()
		if got, want := string(out), ".\n..\n"+rest+"\n"; err != nil || got != want {
			t.Errorf("ls -a %s: %q, %v; want %q", dir, got, err, want)
		}
	}
	out, err := exec.Command("ls", "-a", m+"/.history/d/f").Output()
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); err != nil || len(lines) != 3 || lines[0] != "." || lines[1] != ".." || !strings.HasPrefix(lines[2], "0000@") {
		t.Errorf("ls -a .history/d/f: %q, %v", out, err)
	}
	for _, dir := range []string{m + "/.snapshots/s/d", m + "/.history/d/f"} {
		var a, b syscall.Stat_t
		mustDo(t, syscall.Stat(dir, &a))
		mustDo(t, syscall.Stat(dir+"/.", &b))
		if a.Ino != b.Ino {
			t.Errorf("%s/. is inode %d, the directory %d", dir, b.Ino, a.Ino)
		}
	}
}
