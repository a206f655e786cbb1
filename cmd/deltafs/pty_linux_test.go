package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"
)

// openTTY opens a pseudo-terminal pair and returns its replica side, a
// real terminal for tests, and a function that closes both sides.
func openTTY(t *testing.T) (*os.File, func()) {
	t.Helper()
	_, pts, closeFn := openPTY(t)
	return pts, closeFn
}

// openPTY is openTTY that also returns the controlling side, from which
// a test reads what was written to the terminal.
func openPTY(t *testing.T) (ptm, pts *os.File, closeFn func()) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var n, unlock uint32
	if err := ioctl(ptm, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	if err := ioctl(ptm, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatalf("pty number: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptm.Close()
		t.Fatalf("open pty replica: %v", err)
	}
	return ptm, pts, func() { pts.Close(); ptm.Close() }
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}
