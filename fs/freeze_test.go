package fs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"golang.org/x/sys/unix"
)

// An operation that waits for the recorder (its file's previous change
// is queued, not yet read) does not hold the live tree's freeze while it
// waits: a snapshot holds the recorder's sink while it waits for the
// freeze, so such an operation would wait for ever (fs/freeze.go). Each
// operation here waits (lateReader), Freeze must return meanwhile, and
// the operation must not go on before the thaw.
func TestFreezeNotHeldWhileWaitingForTheRecorder(t *testing.T) {
	ops := map[string]func(db *os.File, path string) error{
		"write":     func(db *os.File, _ string) error { _, err := db.WriteAt([]byte("c"), 4096); return err },
		"ftruncate": func(db *os.File, _ string) error { return db.Truncate(100) },
		"fallocate": func(db *os.File, _ string) error { return unix.Fallocate(int(db.Fd()), 0, 0, 16384) },
		"truncate":  func(_ *os.File, path string) error { return os.Truncate(path, 100) },
		"open O_TRUNC": func(_ *os.File, path string) error {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
			if err == nil {
				err = f.Close()
			}
			return err
		},
		"copy_file_range": func(db *os.File, path string) error {
			src, err := os.Open(filepath.Join(filepath.Dir(path), "src"))
			if err != nil {
				return err
			}
			defer src.Close()
			off := int64(4096)
			_, err = unix.CopyFileRange(int(src.Fd()), nil, int(db.Fd()), &off, 10, 0)
			return err
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			rec := &lateReader{read: make(chan struct{})}
			var fsys *fs.FS
			db := mountLateWith(t, rec, &fsys)
			path := db.Name()
			if err := os.WriteFile(filepath.Join(filepath.Dir(path), "src"), []byte("0123456789"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := db.WriteAt(bytes.Repeat([]byte("b"), 4096), 0); err != nil {
				t.Fatal(err)
			}
			if err := db.Sync(); err != nil { // reported; the recorder has not read it
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- op(db, path) }()
			time.Sleep(50 * time.Millisecond) // the operation waits for the read
			frozen := make(chan func(), 1)
			go func() { frozen <- fsys.Freeze() }()
			var thaw func()
			select {
			case thaw = <-frozen:
			case <-time.After(5 * time.Second):
				rec.readAll(t) // let it go, or the cleanup hangs
				t.Fatal("Freeze waited for an operation that waits for the recorder")
			}
			rec.readAll(t)
			select {
			case err := <-done:
				t.Fatalf("the operation went on while frozen (err %v)", err)
			case <-time.After(50 * time.Millisecond):
			}
			thaw()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
