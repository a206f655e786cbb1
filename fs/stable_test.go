package fs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStatFromStatxMatchesFstat: Create builds the stat it returns from
// one statx; it must say what fstat(2) says, device numbers included.
func TestStatFromStatxMatchesFstat(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("some bytes"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p, filepath.Dir(p), "/dev/null"} {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		var x unix.Statx_t
		var want syscall.Stat_t
		if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS, &x); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Fstat(fd, &want); err != nil {
			t.Fatal(err)
		}
		syscall.Close(fd)
		if got := statFromStatx(&x); got != want {
			t.Errorf("%s: statx gives %+v, fstat %+v", path, got, want)
		}
	}
}
