package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/deltafs/deltafs/internal/testutil"
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
		testutil.SkipOrFail(t, "no pseudo-terminals here: %v", err)
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

// runOnTerminal runs the command line args with a terminal as its
// standard output, expects it to succeed, and returns the lines it
// wrote there (the terminal's carriage returns removed). The commands
// buffer their output, so one read takes it whole.
func runOnTerminal(t *testing.T, args ...string) []string {
	t.Helper()
	ptm, pts, closeTTY := openPTY(t)
	defer closeTTY()
	var errOut bytes.Buffer
	if code := run(args, strings.NewReader(""), pts, &errOut); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
	}
	buf := make([]byte, 4096)
	n, err := ptm.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(strings.ReplaceAll(string(buf[:n]), "\r", "")), "\n")
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}
