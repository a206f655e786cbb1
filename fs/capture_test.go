package fs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
)

// mountReadingNew mounts a live tree with Config.ReadSmallNew over a
// keeper that holds every change until the test closes it.
func mountReadingNew(t *testing.T) (string, *keeper) {
	t.Helper()
	testutil.RequireFUSE(t)
	live := filepath.Join(t.TempDir(), "live")
	if err := os.Mkdir(live, 0o755); err != nil {
		t.Fatal(err)
	}
	k := &keeper{}
	f, err := fs.New(fs.Config{LiveDir: live, Recorder: k, Passthrough: os.Getenv("NOPT") == "", ReadSmallNew: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mnt, _ := testutil.Mount(t, f.Root(), fs.Options(false))
	return mnt, k
}

// The last release of a small new file reports its content read then
// (Data, DataTime), without a descriptor; a big one, a later session and
// an fsync report carry the file as before.
func TestSmallNewFileReportCarriesItsContent(t *testing.T) {
	mnt, k := mountReadingNew(t)
	small := bytes.Repeat([]byte("small new file\n"), 100)
	big := bytes.Repeat([]byte("b"), 64<<10+1)
	before := time.Now()
	if err := os.WriteFile(filepath.Join(mnt, "small"), small, 0o644); err != nil { // O_WRONLY
		t.Fatal(err)
	}
	c := k.wait(t, 1)[0]
	if !bytes.Equal(c.Data, small) || c.Content != nil || c.DataTime.Before(before) || c.DataTime.After(time.Now()) {
		t.Fatalf("small new file: Data %d bytes (want %d), Content %v, DataTime %v", len(c.Data), len(small), c.Content, c.DataTime)
	}
	if _, err := c.Open(); err == nil {
		t.Fatal("Open of a change carrying Data succeeded")
	}
	// the caller's write-only descriptor still cannot read
	f, err := os.OpenFile(filepath.Join(mnt, "wo"), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("read through a write-only descriptor: %v, want EBADF", err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(mnt, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "small"), []byte("again"), 0o644); err != nil { // not new
		t.Fatal(err)
	}
	f, err = os.Create(filepath.Join(mnt, "synced"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("synced")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// By path: the kernel sends a RELEASE after close(2) returns, so wo's
	// report may come after big's (seen under CI's load).
	changes := k.wait(t, 5)
	for _, c := range changes[1:5] {
		if wantData := c.Path == "wo"; (c.Data != nil) != wantData || (c.Content == nil) != wantData {
			t.Fatalf("%s (new %v, fsync %v, %d bytes): Data %d bytes, Content %v", c.Path, c.New, c.Fsync, c.Size, len(c.Data), c.Content)
		}
	}
	for i := range changes {
		changes[i].Close()
	}
}

// Pending changes carry at most 32 MiB of Data: past it a small new
// file carries its descriptor again, and closing changes gives the
// bytes back.
func TestSmallNewFileDataIsBounded(t *testing.T) {
	mnt, k := mountReadingNew(t)
	block := bytes.Repeat([]byte("d"), 64<<10)
	const fit = 32 << 20 / (64 << 10)
	for i := range fit + 1 {
		if err := os.WriteFile(filepath.Join(mnt, "f"+string(rune('a'+i%26))+string(rune('a'+i/26))), block, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Counted, not by position: a RELEASE may come after the next file's
	// (the kernel sends it after close(2) returns), and the budget is
	// spent in the order of the reports.
	changes := k.wait(t, fit+1)
	with := 0
	for i, c := range changes {
		switch len(c.Data) {
		case len(block):
			with++
		case 0:
			if c.Content == nil {
				t.Fatalf("change %d carries neither Data nor its file", i)
			}
		default:
			t.Fatalf("change %d: Data %d bytes, want %d or none", i, len(c.Data), len(block))
		}
	}
	if with != fit {
		t.Fatalf("%d of %d changes carry Data, want %d (the budget's)", with, len(changes), fit)
	}
	for i := range changes {
		changes[i].Close()
	}
	if err := os.WriteFile(filepath.Join(mnt, "after"), block, 0o644); err != nil {
		t.Fatal(err)
	}
	if c := k.wait(t, fit+2)[fit+1]; len(c.Data) != len(block) {
		t.Fatalf("after the changes were closed: Data %d bytes, want %d", len(c.Data), len(block))
	}
}
