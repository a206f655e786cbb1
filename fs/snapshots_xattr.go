package fs

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"

	"github.com/deltafs/deltafs/index"
	"golang.org/x/sys/unix"
)

// xattrs fills e.Xattrs with the user-visible extended attributes of the
// live node at path, deltafs's own left out.
func (w *walk) xattrs(path string, e *index.TreeEntry) error {
	names, err := listXattrs(path)
	if err = gone(err); err != nil {
		return fmt.Errorf("snapshot: list xattrs of %s: %w", path, err)
	}
	for _, name := range names {
		if isOurXattr(name) {
			continue
		}
		v, err := getXattr(path, name)
		if errors.Is(err, unix.ENODATA) {
			continue // removed meanwhile
		}
		if err = gone(err); err != nil {
			return fmt.Errorf("snapshot: xattr %s of %s: %w", name, path, err)
		}
		e.Xattrs = append(e.Xattrs, index.Xattr{Name: name, Value: v})
	}
	return nil
}

// listXattrs returns the xattr names of path (not following a symlink).
func listXattrs(path string) ([]string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Llistxattr(path, buf)
		if errors.Is(err, syscall.ERANGE) {
			sz, err := unix.Llistxattr(path, nil)
			if err != nil {
				return nil, err
			}
			buf = make([]byte, sz+64)
			continue
		}
		if errors.Is(err, syscall.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, b := range bytes.Split(buf[:n], []byte{0}) {
			if len(b) > 0 {
				names = append(names, string(b))
			}
		}
		return names, nil
	}
}

func getXattr(path, name string) ([]byte, error) {
	buf := make([]byte, 128)
	for {
		n, err := unix.Lgetxattr(path, name, buf)
		if errors.Is(err, syscall.ERANGE) {
			sz, err := unix.Lgetxattr(path, name, nil)
			if err != nil {
				return nil, err
			}
			buf = make([]byte, sz+64)
			continue
		}
		if err != nil {
			return nil, err
		}
		return bytes.Clone(buf[:n]), nil
	}
}
