package fs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"
)

// modelPaths are the names the model test plays with: few, so that
// operations collide (rename over, rmdir of a full directory, ...).
var modelPaths = []string{"a", "b", "c", "d", "d/a", "d/b", "d/e", "d/e/a", "e"}

// twin applies every operation to the mount and to a plain directory.
type twin struct {
	mnt, ref string
	live     string // the mount's live directory of mnt
}

// errnoOf reduces an error to its errno, for comparison.
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if err == nil {
		return 0
	}
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

// both runs op on the two trees and fails if the outcomes differ.
func (w *twin) both(t *rapid.T, name string, op func(root string) (string, error)) {
	r1, e1 := op(w.mnt)
	r2, e2 := op(w.ref)
	if errnoOf(e1) != errnoOf(e2) || r1 != r2 {
		t.Fatalf("%s: mount gave (%q, %v), plain directory (%q, %v)", name, r1, e1, r2, e2)
	}
}

func TestModel(t *testing.T) {
	m := mountLive(t)
	k := newContract()
	m.rec.setCheck(k.check)
	refRoot := t.TempDir()
	run := 0
	rapid.Check(t, func(t *rapid.T) {
		run++
		sub := fmt.Sprintf("run%d", run)
		w := &twin{mnt: m.path(sub), ref: filepath.Join(refRoot, sub), live: filepath.Join(m.live, sub)}
		for _, d := range []string{w.mnt, w.ref} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		pick := rapid.SampledFrom(modelPaths)
		for i, n := 0, rapid.IntRange(1, 40).Draw(t, "ops"); i < n; i++ {
			w.step(t, pick)
			w.compare(t)
			if v, _ := k.report(); len(v) > 0 {
				t.Fatalf("change reports break their contract: %v", v)
			}
		}
	})
	if _, n := k.report(); n == 0 {
		t.Fatal("no change was checked against the contract")
	}
}

// step draws and applies one operation.
func (w *twin) step(t *rapid.T, pick *rapid.Generator[string]) {
	p, q := pick.Draw(t, "path"), pick.Draw(t, "other")
	j := func(root, rel string) string { return filepath.Join(root, rel) }
	switch op := rapid.IntRange(0, 13).Draw(t, "op"); op {
	case 0: // create or overwrite
		data := bytes.Repeat([]byte{byte('a' + len(p))}, rapid.IntRange(0, 20_000).Draw(t, "len"))
		w.both(t, "write "+p, func(r string) (string, error) { return "", os.WriteFile(j(r, p), data, 0o644) })
	case 1: // write at an offset
		off := rapid.Int64Range(0, 30_000).Draw(t, "off")
		data := bytes.Repeat([]byte{'w'}, rapid.IntRange(1, 5000).Draw(t, "n"))
		w.both(t, "pwrite "+p, func(r string) (string, error) {
			f, err := os.OpenFile(j(r, p), os.O_WRONLY, 0)
			if err != nil {
				return "", err
			}
			_, err = f.WriteAt(data, off)
			return "", errors.Join(err, f.Close())
		})
	case 2:
		size := rapid.Int64Range(0, 25_000).Draw(t, "size")
		w.both(t, "truncate "+p, func(r string) (string, error) { return "", os.Truncate(j(r, p), size) })
	case 3:
		w.both(t, "rename "+p+" "+q, func(r string) (string, error) { return "", os.Rename(j(r, p), j(r, q)) })
	case 4:
		w.both(t, "unlink "+p, func(r string) (string, error) { return "", syscall.Unlink(j(r, p)) })
	case 5:
		w.both(t, "mkdir "+p, func(r string) (string, error) { return "", syscall.Mkdir(j(r, p), 0o755) })
	case 6:
		w.both(t, "rmdir "+p, func(r string) (string, error) { return "", syscall.Rmdir(j(r, p)) })
	case 7:
		w.both(t, "symlink "+p, func(r string) (string, error) { return "", os.Symlink(q, j(r, p)) })
	case 8:
		w.both(t, "link "+p+" "+q, func(r string) (string, error) { return "", syscall.Link(j(r, p), j(r, q)) })
	case 9:
		mode := uint32(rapid.SampledFrom([]int{0o600, 0o644, 0o755, 0o400}).Draw(t, "mode"))
		w.both(t, "chmod "+p, func(r string) (string, error) { return "", syscall.Chmod(j(r, p), mode) })
	case 10:
		w.both(t, "read "+p, func(r string) (string, error) {
			b, err := os.ReadFile(j(r, p))
			return string(b), err
		})
	case 11: // a linker's output: O_TRUNC (a passthrough writer), then mmap
		size := rapid.IntRange(1, 20_000).Draw(t, "size")
		w.both(t, "mmap write "+p, func(r string) (string, error) { return "", mmapWrite(j(r, p), size) })
	case 12: // a regular file made without a writer (no FileID from a session)
		w.both(t, "mknod "+p, func(r string) (string, error) { return "", syscall.Mknod(j(r, p), syscall.S_IFREG|0o644, 0) })
	case 13:
		w.both(t, "create read-only "+p, func(r string) (string, error) {
			fd, err := syscall.Open(j(r, p), syscall.O_CREAT|syscall.O_RDONLY, 0o644)
			if err == nil {
				err = syscall.Close(fd)
			}
			return "", err
		})
	}
}

// mmapWrite rewrites the file at p through a shared mapping.
func mmapWrite(p string, size int) error {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		return err
	}
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	// A stat now has the kernel cache the attributes (mmap invalidated
	// the atime) that the writes below leave behind, a clock tick later
	// (a write within the tick of the truncation keeps its times).
	if _, err := os.Stat(p); err != nil {
		return err
	}
	time.Sleep(10 * time.Millisecond)
	for i := range b {
		b[i] = 'm'
	}
	if err := unix.Munmap(b); err != nil {
		return err
	}
	return f.Close()
}

// compare checks that the kernel's cached attributes of the mount are
// those of the live files (the live tree lets the kernel cache them for
// an hour), then walks both trees and fails on the first difference.
// Attributes first: describe's reads invalidate the kernel's atime,
// and with it every cached attribute.
func (w *twin) compare(t *rapid.T) {
	// An invalidation at a writer's RELEASE, which the kernel sends
	// after close(2) returns, takes a moment to arrive.
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		a, b := statTree(t, w.mnt), statTree(t, w.live)
		if a == b {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel's attributes are stale:\nmount:\n%s\nlive directory:\n%s", a, b)
		}
	}
	if a, b := describe(t, w.mnt), describe(t, w.ref); a != b {
		t.Fatalf("trees differ:\nmount:\n%s\nplain directory:\n%s", a, b)
	}
}

// statTree lists a tree's attributes that the kernel caches (all but
// the access time, which the recorder's reads move in the live
// directory).
func statTree(t *rapid.T, root string) string {
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		lines = append(lines, fmt.Sprintf("%s ino=%d mode=%o nlink=%d uid=%d gid=%d size=%d mtime=%d ctime=%d",
			rel, st.Ino, st.Mode, st.Nlink, st.Uid, st.Gid, st.Size, st.Mtim.Nano(), st.Ctim.Nano()))
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// describe lists a tree: path, type, permissions, size, links, content
// or symlink target.
func describe(t *rapid.T, root string) string {
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		line := fmt.Sprintf("%s %o", rel, st.Mode)
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil && st.Mode&0o400 != 0 {
				return err
			}
			line += fmt.Sprintf(" size=%d nlink=%d sum=%x", st.Size, st.Nlink, checksum(b))
		case syscall.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func checksum(b []byte) uint32 {
	var h uint32 = 2166136261
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}
