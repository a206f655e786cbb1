package mount

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFileLocks: fcntl and flock locks behave as on a local file system
// everywhere in the mount: two descriptions of a live file exclude each
// other's write locks, flock and fcntl locks are independent of each
// other (Linux's rule), and the files of .snapshots and .history take
// read locks (sqlite3 opens a database read-only with F_SETLK F_RDLCK).
func TestFileLocks(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	m := l.mnt
	mustDo(t, os.WriteFile(m+"/db", []byte("v1\n"), 0o644))
	mustDo(t, os.Mkdir(m+"/.snapshots/s", 0o755))

	open := func(p string, flag int) *os.File {
		t.Helper()
		f, err := os.OpenFile(p, flag, 0)
		mustDo(t, err)
		t.Cleanup(func() { f.Close() })
		return f
	}
	lock := func(f *os.File, typ int16) error {
		lk := unix.Flock_t{Type: typ, Whence: 0, Start: 0, Len: 0}
		return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
	}

	a, b := open(m+"/db", os.O_RDWR), open(m+"/db", os.O_RDWR)
	if err := lock(a, unix.F_WRLCK); err != nil {
		t.Fatalf("write lock of a live file: %v", err)
	}
	if err := lock(b, unix.F_WRLCK); !errors.Is(err, syscall.EAGAIN) {
		t.Errorf("second write lock of a locked live file: %v, want EAGAIN", err)
	}
	var probe unix.Flock_t
	probe.Type = unix.F_RDLCK
	mustDo(t, unix.FcntlFlock(b.Fd(), unix.F_OFD_GETLK, &probe))
	if probe.Type != unix.F_WRLCK {
		t.Errorf("F_OFD_GETLK of a locked live file reports type %d, want F_WRLCK", probe.Type)
	}
	if err := unix.Flock(int(b.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Errorf("flock of a live file that holds an fcntl lock: %v (they are independent)", err)
	}
	c := open(m+"/db", os.O_RDONLY)
	if err := unix.Flock(int(c.Fd()), unix.LOCK_SH|unix.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Errorf("flock LOCK_SH against another description's LOCK_EX: %v, want EWOULDBLOCK", err)
	}
	mustDo(t, lock(a, unix.F_UNLCK))
	if err := lock(b, unix.F_WRLCK); err != nil {
		t.Errorf("write lock once the other is released: %v", err)
	}

	hist := m + "/.history/db"
	var rev string
	for end := time.Now().Add(10 * time.Second); rev == "" && time.Now().Before(end); {
		if ents, err := os.ReadDir(hist); err == nil && len(ents) > 0 {
			rev = hist + "/" + ents[0].Name()
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if rev == "" {
		t.Fatalf("%s lists no revision", hist)
	}
	for _, p := range []string{m + "/.snapshots/s/db", rev} {
		f := open(p, os.O_RDONLY)
		if err := lock(f, unix.F_RDLCK); err != nil {
			t.Errorf("read lock of %s: %v", p, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
			t.Errorf("flock LOCK_SH of %s: %v", p, err)
		}
		var lk unix.Flock_t
		lk.Type = unix.F_RDLCK
		if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
			t.Errorf("F_SETLK F_RDLCK of %s: %v", p, err)
		}
	}
}
