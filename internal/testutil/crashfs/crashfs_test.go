package crashfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func writeFile(t *testing.T, path string, data []byte, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// crash cuts the power on f and returns the materialized image.
func crash(t *testing.T, f *FS) string {
	t.Helper()
	f.CrashT(t)
	return f.MaterializeT(t)
}

func wantFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s holds %q, want %q", path, trim(got), trim(want))
	}
}

func trim(b []byte) []byte {
	if len(b) > 40 {
		return append(b[:40:40], "..."...)
	}
	return b
}

func wantGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s survived the crash (%v)", path, err)
	}
}

// TestStrictModel checks the strict model's rules, each on its own
// names in one file system.
func TestStrictModel(t *testing.T) {
	f := MountT(t, Options{})
	m := f.Dir()

	// a directory fsynced from the start: its entries are durable at its fsync
	mkdir(t, filepath.Join(m, "d"))
	syncDir(t, m)
	d := filepath.Join(m, "d")

	// fsynced file in a directory never fsynced: gone
	mkdir(t, filepath.Join(m, "n"))
	syncDir(t, m)
	writeFile(t, filepath.Join(m, "n", "lost"), []byte("lost"), true)

	// fsynced file and fsynced directory: survives
	writeFile(t, filepath.Join(d, "kept"), []byte("kept"), true)
	// its name durable, its data never fsynced: empty
	writeFile(t, filepath.Join(d, "empty"), []byte("never fsynced"), false)
	// data changed after the fsync: the fsynced content
	writeFile(t, filepath.Join(d, "old"), []byte("first"), true)
	// a file renamed over by a new fsynced file, directory fsynced
	writeFile(t, filepath.Join(d, "target"), []byte("old target"), true)
	// a rename not followed by a directory fsync reverts
	writeFile(t, filepath.Join(d, "moved"), []byte("moved"), true)
	// a hard link, durable
	writeFile(t, filepath.Join(d, "linked"), []byte("linked"), true)
	if err := os.Link(filepath.Join(d, "linked"), filepath.Join(d, "link2")); err != nil {
		t.Fatal(err)
	}
	// a truncation after the fsync is undone; one before it is kept
	writeFile(t, filepath.Join(d, "trunc"), bytes.Repeat([]byte("x"), 200_000), false)
	if err := os.Truncate(filepath.Join(d, "trunc"), 70_000); err != nil {
		t.Fatal(err)
	}
	fsyncPath(t, filepath.Join(d, "trunc"))
	if err := os.Truncate(filepath.Join(d, "trunc"), 10); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(d, "trunc"), 100_000); err != nil {
		t.Fatal(err)
	}
	// an xattr, fsynced
	if err := unix.Setxattr(filepath.Join(d, "kept"), "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	fsyncPath(t, filepath.Join(d, "kept"))
	syncDir(t, d)
	// only now "lost": created after the fsync of d
	writeFile(t, filepath.Join(d, "late"), []byte("late"), true)
	writeFile(t, filepath.Join(d, "old"), []byte("second, not fsynced"), false)
	writeFile(t, filepath.Join(d, "new"), []byte("new target"), true)
	if err := os.Rename(filepath.Join(d, "new"), filepath.Join(d, "target")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(d, "moved"), filepath.Join(d, "moved2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(d, "linked")); err != nil {
		t.Fatal(err)
	}

	// a second directory: an atomic save done right (file fsync, rename,
	// directory fsync) survives
	mkdir(t, filepath.Join(m, "e"))
	syncDir(t, m)
	e := filepath.Join(m, "e")
	writeFile(t, filepath.Join(e, "tmp"), []byte("saved"), true)
	if err := os.Rename(filepath.Join(e, "tmp"), filepath.Join(e, "file")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, e)
	// a directory made but its parent never fsynced after: gone
	mkdir(t, filepath.Join(m, "undurable"))
	writeFile(t, filepath.Join(m, "undurable", "x"), []byte("x"), true)
	syncDir(t, filepath.Join(m, "undurable"))

	img := crash(t, f)

	// after the cut, every change fails
	if err := os.WriteFile(filepath.Join(d, "after"), []byte("x"), 0o644); !errors.Is(err, syscall.EIO) {
		t.Errorf("create after the crash: %v, want EIO", err)
	}
	if _, err := os.ReadFile(filepath.Join(d, "old")); err != nil {
		t.Errorf("read after the crash: %v", err)
	}

	di := filepath.Join(img, "d")
	wantGone(t, filepath.Join(img, "n", "lost"))
	if _, err := os.Stat(filepath.Join(img, "n")); err != nil {
		t.Errorf("directory n: %v", err)
	}
	wantGone(t, filepath.Join(di, "late"))
	wantFile(t, filepath.Join(di, "kept"), []byte("kept"))
	wantFile(t, filepath.Join(di, "empty"), nil)
	wantFile(t, filepath.Join(di, "old"), []byte("first"))
	wantFile(t, filepath.Join(di, "target"), []byte("old target"))
	wantFile(t, filepath.Join(di, "moved"), []byte("moved"))
	wantGone(t, filepath.Join(di, "moved2"))
	wantFile(t, filepath.Join(di, "linked"), []byte("linked"))
	wantFile(t, filepath.Join(di, "link2"), []byte("linked"))
	wantFile(t, filepath.Join(di, "trunc"), bytes.Repeat([]byte("x"), 70_000))
	var a, b syscall.Stat_t
	if syscall.Stat(filepath.Join(di, "linked"), &a) != nil || syscall.Stat(filepath.Join(di, "link2"), &b) != nil || a.Ino != b.Ino {
		t.Errorf("linked and link2 are not one file in the image")
	}
	if v := make([]byte, 8); true {
		n, err := unix.Getxattr(filepath.Join(di, "kept"), "user.k", v)
		if err != nil || string(v[:n]) != "v" {
			t.Errorf("xattr of kept: %q, %v", v[:max(n, 0)], err)
		}
	}
	wantFile(t, filepath.Join(img, "e", "file"), []byte("saved"))
	wantGone(t, filepath.Join(img, "e", "tmp"))
	wantGone(t, filepath.Join(img, "undurable"))
}

func fsyncPath(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestRenameBetweenDirectories: each directory is durable on its own.
func TestRenameBetweenDirectories(t *testing.T) {
	f := MountT(t, Options{})
	m := f.Dir()
	mkdir(t, filepath.Join(m, "a"))
	mkdir(t, filepath.Join(m, "b"))
	syncDir(t, m)
	writeFile(t, filepath.Join(m, "a", "x"), []byte("x"), true)
	writeFile(t, filepath.Join(m, "a", "y"), []byte("y"), true)
	syncDir(t, filepath.Join(m, "a"))
	if err := os.Rename(filepath.Join(m, "a", "x"), filepath.Join(m, "b", "x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(m, "a", "y"), filepath.Join(m, "b", "y")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, filepath.Join(m, "b")) // x and y in b
	if err := os.Rename(filepath.Join(m, "b", "y"), filepath.Join(m, "a", "y")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, filepath.Join(m, "b")) // y no longer in b, not yet back in a durably... but a still has it
	img := crash(t, f)
	wantFile(t, filepath.Join(img, "a", "x"), []byte("x")) // a never fsynced after the move
	wantFile(t, filepath.Join(img, "b", "x"), []byte("x"))
	wantFile(t, filepath.Join(img, "a", "y"), []byte("y"))
	wantGone(t, filepath.Join(img, "b", "y"))
}

// TestExt4Like: any fsync commits every directory's entries.
func TestExt4Like(t *testing.T) {
	f := MountT(t, Options{Model: Ext4Like})
	m := f.Dir()
	mkdir(t, filepath.Join(m, "d"))
	writeFile(t, filepath.Join(m, "d", "tmp"), []byte("saved"), true)
	if err := os.Rename(filepath.Join(m, "d", "tmp"), filepath.Join(m, "d", "file")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(m, "unsynced"), []byte("data"), false)
	writeFile(t, filepath.Join(m, "other"), []byte("other"), true)
	writeFile(t, filepath.Join(m, "late"), []byte("late"), false)
	img := crash(t, f)
	wantFile(t, filepath.Join(img, "d", "file"), []byte("saved"))
	wantFile(t, filepath.Join(img, "other"), []byte("other"))
	wantFile(t, filepath.Join(img, "unsynced"), nil)
	wantGone(t, filepath.Join(img, "late"))
}

// TestFileOperations drives what the store does to its files: pwrite,
// O_APPEND, fallocate, a shared mapping and msync, flock, O_DIRECT.
func TestFileOperations(t *testing.T) {
	f := MountT(t, Options{})
	m := f.Dir()
	p := filepath.Join(m, "f")
	fd, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if err := syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock: %v", err)
	}
	fd2, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(fd2.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Errorf("second flock: %v, want EWOULDBLOCK", err)
	}
	fd2.Close()
	for _, s := range []string{"one ", "two ", "three"} {
		if _, err := fd.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	g, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.WriteAt([]byte("ONE"), 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(g.Fd()), 0, 0, 1<<20); err != nil {
		t.Fatalf("fallocate: %v", err)
	}
	if err := unix.Fallocate(int(g.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 4<<20); err != nil {
		t.Fatalf("fallocate KEEP_SIZE: %v", err)
	}
	if st, _ := g.Stat(); st.Size() != 1<<20 {
		t.Fatalf("size after fallocate %d", st.Size())
	}
	mm, err := unix.Mmap(int(g.Fd()), 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	copy(mm[500_000:], "mapped")
	if err := unix.Msync(mm, unix.MS_SYNC); err != nil {
		t.Fatalf("msync: %v", err)
	}
	copy(mm[600_000:], "not synced")
	if err := unix.Munmap(mm); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 1<<20)
	copy(want, "ONE two three")
	copy(want[500_000:], "mapped")
	if st, err := f.Stats(); err != nil || st.Fsyncs != 1 {
		t.Errorf("%d fsyncs after one msync (%v)", st.Fsyncs, err)
	}
	// O_DIRECT: opened (the kernel's FUSE does direct I/O) or refused
	// cleanly; either way a write through it is what reads back.
	d, err := os.OpenFile(p, os.O_WRONLY|syscall.O_DIRECT, 0)
	if err == nil {
		d.Close()
	} else {
		t.Logf("O_DIRECT open: %v", err)
	}
	syncDir(t, m)
	img := crash(t, f)
	wantFile(t, filepath.Join(img, "f"), want)
}

// TestRefuseDirectIO: the option refuses O_DIRECT opens as a file system
// without direct I/O does.
func TestRefuseDirectIO(t *testing.T) {
	f := MountT(t, Options{RefuseDirectIO: true})
	p := filepath.Join(f.Dir(), "f")
	writeFile(t, p, []byte("x"), false)
	if _, err := os.OpenFile(p, os.O_WRONLY|syscall.O_DIRECT, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("O_DIRECT open: %v, want EINVAL", err)
	}
}

// TestFrom: a file system started from a tree holds it durably.
func TestFrom(t *testing.T) {
	src := t.TempDir()
	mkdir(t, filepath.Join(src, "d"))
	writeFile(t, filepath.Join(src, "d", "a"), []byte("a"), false)
	if err := os.Link(filepath.Join(src, "d", "a"), filepath.Join(src, "b")); err != nil {
		t.Fatal(err)
	}
	f := MountT(t, Options{From: src})
	m := f.Dir()
	wantFile(t, filepath.Join(m, "b"), []byte("a"))
	writeFile(t, filepath.Join(m, "d", "a"), []byte("changed"), false)
	if err := os.Remove(filepath.Join(m, "b")); err != nil {
		t.Fatal(err)
	}
	img := crash(t, f)
	wantFile(t, filepath.Join(img, "d", "a"), []byte("a"))
	wantFile(t, filepath.Join(img, "b"), []byte("a"))
	var a, b syscall.Stat_t
	if syscall.Stat(filepath.Join(img, "d", "a"), &a) != nil || syscall.Stat(filepath.Join(img, "b"), &b) != nil || a.Ino != b.Ino {
		t.Errorf("d/a and b are not one file in the image")
	}
}

// TestXattrsFrom: user extended attributes of files and directories are
// durable at their fsync, written out by Materialize, and kept by a file
// system started From the image (a store keeps identities there: a
// deltafs live tree's files, and its probe of the live directory).
func TestXattrsFrom(t *testing.T) {
	get := func(p, name string) string {
		t.Helper()
		v := make([]byte, 64)
		n, err := unix.Getxattr(p, name, v)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(v[:n])
	}
	f := MountT(t, Options{})
	m := f.Dir()
	mkdir(t, filepath.Join(m, "d"))
	writeFile(t, filepath.Join(m, "d", "a"), []byte("a"), false)
	for _, p := range []string{filepath.Join(m, "d"), filepath.Join(m, "d", "a")} {
		if err := unix.Setxattr(p, "user.id", []byte("one"), 0); err != nil {
			t.Fatalf("setxattr %s: %v", p, err)
		}
	}
	fsyncPath(t, filepath.Join(m, "d", "a"))
	syncDir(t, filepath.Join(m, "d"))
	syncDir(t, m)
	// not durable: no fsync of the directory after it
	if err := unix.Setxattr(filepath.Join(m, "d"), "user.id", []byte("two"), 0); err != nil {
		t.Fatal(err)
	}
	img := crash(t, f)
	for _, p := range []string{filepath.Join(img, "d"), filepath.Join(img, "d", "a")} {
		if v := get(p, "user.id"); v != "one" {
			t.Errorf("image: %s: user.id %q, want %q", p, v, "one")
		}
	}
	g := MountT(t, Options{From: img})
	for _, p := range []string{filepath.Join(g.Dir(), "d"), filepath.Join(g.Dir(), "d", "a")} {
		if v := get(p, "user.id"); v != "one" {
			t.Errorf("started from the image: %s: user.id %q, want %q", p, v, "one")
		}
	}
	img2 := crash(t, g)
	if v := get(filepath.Join(img2, "d", "a"), "user.id"); v != "one" {
		t.Errorf("image of the image: user.id %q, want %q", v, "one")
	}
}
