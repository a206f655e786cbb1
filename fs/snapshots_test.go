package fs_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dfs "github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

// capture describes every node under root the way a user sees it: type
// and mode, owner, size, link count, all three times, content, symlink
// target, xattrs, and which names are hard links of one another.
func capture(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	firstOf := map[uint64]string{}
	err := filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		var b strings.Builder
		fmtTo(&b, "mode=%o uid=%d gid=%d size=%d nlink=%d atime=%d mtime=%d ctime=%d",
			st.Mode, st.Uid, st.Gid, st.Size, st.Nlink, st.Atim.Nano(), st.Mtim.Nano(), st.Ctim.Nano())
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			if first, ok := firstOf[st.Ino]; ok {
				fmtTo(&b, " link-of=%s", first)
			}
			firstOf[st.Ino] = rel
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmtTo(&b, " content=%x", sha256.Sum256(data))
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			target, _ := os.Readlink(path)
			fmtTo(&b, " target=%s", target)
		}
		fmtTo(&b, " xattrs=%s", userXattrs(t, path))
		out[rel] = b.String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fmtTo(b *strings.Builder, format string, a ...any) { b.WriteString(fmtNode(format, a...)) }

func userXattrs(t testing.TB, path string) string {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(path, buf)
	if err != nil {
		return "err:" + err.Error()
	}
	var out []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name == "" || strings.HasPrefix(name, "user.deltafs.") {
			continue
		}
		v := make([]byte, 4096)
		m, _ := unix.Lgetxattr(path, name, v)
		out = append(out, name+"="+string(v[:max(m, 0)]))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// stamp sets atime later than mtime and ctime and within the last day,
// so that reads (relatime) leave both alone and captures stay comparable.
func stamp(t testing.TB, path string, i int64) {
	t.Helper()
	now := time.Now().Unix()
	ts := []unix.Timespec{{Sec: now + 3600 + i, Nsec: 7}, {Sec: now - 3600 + i, Nsec: 3}}
	must(t, unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW))
}

func populate(t testing.TB, live string) {
	t.Helper()
	must(t, os.MkdirAll(live+"/src/deep/er", 0o755))
	must(t, os.Mkdir(live+"/empty", 0o700))
	writeFile(t, live+"/README", "hello\n")
	writeFile(t, live+"/src/main.go", "package main\n")
	writeFile(t, live+"/src/deep/er/data.bin", strings.Repeat("\x00\x01binary", 1000))
	writeFile(t, live+"/zero", "")
	must(t, os.Link(live+"/src/main.go", live+"/src/deep/hardlink.go"))
	must(t, os.Symlink("../README", live+"/src/readme-link"))
	must(t, syscall.Mkfifo(live+"/fifo", 0o640))
	must(t, os.Chmod(live+"/README", 0o4751))
	must(t, os.Lchown(live+"/src/main.go", 1234, 5678))
	must(t, unix.Lsetxattr(live+"/README", "user.color", []byte("blue"), 0))
	must(t, unix.Lsetxattr(live+"/src", "user.dir", []byte("x"), 0))
	must(t, unix.Lsetxattr(live+"/zero", dfs.XattrID, bytes.Repeat([]byte{1}, 16), 0))
	walkStamp(t, live)
}

func walkStamp(t testing.TB, root string) {
	t.Helper()
	var paths []string
	filepath.WalkDir(root, func(p string, _ fs.DirEntry, _ error) error { paths = append(paths, p); return nil })
	slices.Reverse(paths) // children before their directories
	for i, p := range paths {
		stamp(t, p, int64(i))
	}
}

func diffCaptures(t testing.TB, what string, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: %s missing", what, k)
		} else if g != w {
			t.Errorf("%s: %s\n got %s\nwant %s", what, k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s", what, k)
		}
	}
}

// TestSnapshotViewExact takes two snapshots with changes between and
// after them, and checks that each reads back exactly as the live tree
// was when it was taken.
func TestSnapshotViewExact(t *testing.T) {
	testutil.RequireFUSE(t)
	e := newSnapEnv(t)
	populate(t, e.live)
	want1 := capture(t, e.live)
	mnt, _ := testutil.Mount(t, dfs.NewSnapshotsDir(e, nil), nil)
	must(t, os.Mkdir(mnt+"/s1", 0o755))

	writeFile(t, e.live+"/src/main.go", "package main // changed\n")
	e.touchPath("src/main.go")
	e.b.Touch(dfs.Touch{Dir: inoOf(t, e.live+"/src/deep"), Node: inoOf(t, e.live+"/src/main.go")})
	must(t, os.Remove(e.live+"/README"))
	e.touchPath("README")
	must(t, os.Rename(e.live+"/src/deep/er", e.live+"/moved"))
	e.touchPath("moved")
	e.touchPath("src/deep/x")
	writeFile(t, e.live+"/moved/new.txt", "new")
	e.touchPath("moved/new.txt")
	walkStamp(t, e.live)
	e.touchAll() // as the live tree's utimens does for each
	want2 := capture(t, e.live)
	must(t, os.Mkdir(mnt+"/s2", 0o755))

	// Later changes touch neither snapshot.
	writeFile(t, e.live+"/moved/new.txt", "newer")
	must(t, os.Chmod(e.live+"/src", 0o700))

	diffCaptures(t, "s1", capture(t, mnt+"/s1"), want1)
	diffCaptures(t, "s2", capture(t, mnt+"/s2"), want2)
}

// TestSnapshotReadOnly checks that nothing inside a snapshot changes.
func TestSnapshotReadOnly(t *testing.T) {
	testutil.RequireFUSE(t)
	e := newSnapEnv(t)
	populate(t, e.live)
	mnt, _ := testutil.Mount(t, dfs.NewSnapshotsDir(e, nil), nil)
	must(t, os.Mkdir(mnt+"/s", 0o755))
	s := mnt + "/s"
	for name, op := range map[string]func() error{
		"write":     func() error { return os.WriteFile(s+"/README", []byte("x"), 0o644) },
		"create":    func() error { return os.WriteFile(s+"/newfile", []byte("x"), 0o644) },
		"mkdir":     func() error { return os.Mkdir(s+"/src/d", 0o755) },
		"rmdir":     func() error { return os.Remove(s + "/empty") },
		"unlink":    func() error { return os.Remove(s + "/zero") },
		"rename":    func() error { return os.Rename(s+"/zero", s+"/zero2") },
		"chmod":     func() error { return os.Chmod(s+"/README", 0o600) },
		"chown":     func() error { return os.Lchown(s+"/README", 1, 1) },
		"truncate":  func() error { return os.Truncate(s+"/README", 0) },
		"utimes":    func() error { return os.Chtimes(s+"/README", time.Now(), time.Now()) },
		"symlink":   func() error { return os.Symlink("x", s+"/l2") },
		"link":      func() error { return os.Link(s+"/README", s+"/R2") },
		"setxattr":  func() error { return unix.Lsetxattr(s+"/README", "user.x", []byte("1"), 0) },
		"rmxattr":   func() error { return unix.Lremovexattr(s+"/README", "user.color") },
		"mkfifo":    func() error { return syscall.Mkfifo(s+"/f2", 0o600) },
		"open-rdwr": func() error { f, err := os.OpenFile(s+"/README", os.O_RDWR, 0); f.Close(); return err },
	} {
		if err := op(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s inside a snapshot: %v, want EROFS", name, err)
		}
	}
	if v, err := os.ReadFile(s + "/README"); err != nil || string(v) != "hello\n" {
		t.Fatalf("README after refused writes: %q, %v", v, err)
	}
}

// TestSnapshotsDirOps: ls, mkdir of a taken or bad name, mv, rmdir.
func TestSnapshotsDirOps(t *testing.T) {
	testutil.RequireFUSE(t)
	e := newSnapEnv(t)
	writeFile(t, e.live+"/a", "a")
	mnt, _ := testutil.Mount(t, dfs.NewSnapshotsDir(e, nil), nil)
	for _, n := range []string{"one", "two", "three"} {
		must(t, os.Mkdir(mnt+"/"+n, 0o755))
	}
	ls := func() string {
		ents, err := os.ReadDir(mnt)
		must(t, err)
		var names []string
		for _, d := range ents {
			names = append(names, d.Name())
		}
		return strings.Join(names, " ")
	}
	if got := ls(); got != "one three two" {
		t.Fatalf("ls = %q", got)
	}
	if err := os.Mkdir(mnt+"/two", 0o755); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("mkdir of a taken name: %v", err)
	}
	if err := os.Mkdir(mnt+"/"+strings.Repeat("n", 256), 0o755); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("mkdir of a 256-byte name: %v", err)
	}
	must(t, os.Mkdir(mnt+"/"+strings.Repeat("n", 255), 0o755))
	must(t, os.Remove(mnt+"/"+strings.Repeat("n", 255)))
	must(t, os.Rename(mnt+"/two", mnt+"/deux"))
	if err := os.Rename(mnt+"/one", mnt+"/three"); err == nil {
		t.Fatal("rename over another snapshot succeeded")
	}
	if err := os.WriteFile(mnt+"/file", nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("file in .snapshots: %v", err)
	}
	must(t, os.Remove(mnt+"/one"))
	if got := ls(); got != "deux three" {
		t.Fatalf("ls after mv and rmdir = %q", got)
	}
	if v, err := os.ReadFile(mnt + "/deux/a"); err != nil || string(v) != "a" {
		t.Fatalf("renamed snapshot content %q, %v", v, err)
	}
	if _, err := os.Stat(mnt + "/one"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("deleted snapshot: %v", err)
	}
}
