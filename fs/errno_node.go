package fs

import "syscall"

// errno turns the error of a live-tree operation into its errno, with
// the file system's logger (see toErrno).
func (f *FS) errno(op string, err error) syscall.Errno {
	return toErrno(f.log, op, err)
}
