package fs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// dirent is a directory entry as getdents gives it.
type dirent struct {
	name string
	ino  uint64
}

// readDirents lists a directory's entries with their inode numbers,
// without "." and "..".
func readDirents(dir string) ([]dirent, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	return readDirentsFd(fd, dir)
}

// readDirentsFd is readDirents of the open directory fd (dir names it in
// errors).
func readDirentsFd(fd int, dir string) ([]dirent, error) {
	var out []dirent
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "getdents", Path: dir, Err: err}
		}
		if n <= 0 {
			return out, nil
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return nil, fmt.Errorf("getdents %s: bad record length %d", dir, reclen)
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if s := string(name); s != "." && s != ".." {
				out = append(out, dirent{name: s, ino: binary.NativeEndian.Uint64(b[:8])})
			}
			b = b[reclen:]
		}
	}
}

// nameOfIno returns a name in directory dir whose inode number is ino,
// other than skip, from the directory's raw entries (readDirents: no
// stat of each); "" if there is none or dir cannot be read.
func nameOfIno(dir string, ino uint64, skip string) string {
	ents, err := readDirents(dir)
	if err != nil {
		return ""
	}
	return inoIn(ents, ino, skip)
}

// nameOfInoIn is nameOfIno of directory d's live directory, opened with
// no symlink on the way (safe_ops.go).
func (d *Node) nameOfInoIn(ino uint64, skip string) string {
	fd, err := d.openSelfAs(unix.O_RDONLY | unix.O_DIRECTORY)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	ents, err := readDirentsFd(fd, d.livePath())
	if err != nil {
		return ""
	}
	return inoIn(ents, ino, skip)
}

// inoIn returns the name of an entry of ents with inode number ino,
// other than skip, or "".
func inoIn(ents []dirent, ino uint64, skip string) string {
	for _, d := range ents {
		if d.ino == ino && d.name != skip {
			return d.name
		}
	}
	return ""
}
