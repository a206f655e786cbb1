package fs

import (
	"bytes"
	"encoding/binary"
	"syscall"
)

// nameOfIno returns a name in directory dir whose inode number is ino,
// other than skip, read from the directory's raw entries (no stat of
// each); "" if there is none or dir cannot be read.
func nameOfIno(dir string, ino uint64, skip string) string {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer syscall.Close(fd)
	buf := make([]byte, 32<<10)
	for {
		n, err := syscall.Getdents(fd, buf)
		if err != nil || n <= 0 {
			return ""
		}
		if name := scanDirents(buf[:n], ino, skip); name != "" {
			return name
		}
	}
}

// scanDirents looks through raw linux_dirent64 records (inode number 8
// bytes, offset 8, record length 2, type 1, then the name, NUL ended)
// for ino under a name other than skip.
func scanDirents(b []byte, ino uint64, skip string) string {
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			return ""
		}
		if binary.NativeEndian.Uint64(b[0:8]) == ino {
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if s := string(name); s != skip && s != "." && s != ".." {
				return s
			}
		}
		b = b[reclen:]
	}
	return ""
}
