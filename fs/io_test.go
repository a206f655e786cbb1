package fs_test

import (
	"bytes"
	"os"
	"os/exec"
	"reflect"
	"sync"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestSparseLargeFile writes 4 KiB past 5 GiB: the file is sparse, holes
// read as zeros, SEEK_DATA/SEEK_HOLE see them, and the report names only
// the bytes written (unless the new file's writer used passthrough: then
// it is Whole).
func TestSparseLargeFile(t *testing.T) {
	m := mountLive(t)
	const off = 5 << 30
	f, err := os.Create(m.path("sparse"))
	if err != nil {
		t.Fatal(err)
	}
	data := testutil.Bytes(4, 4096)
	writeAt(t, f, off, data)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	c := m.waitChanges(t, 1)[0]
	if c.Size != off+4096 || !c.Whole && !reflect.DeepEqual(c.Dirty, []fs.Range{{Off: off, Len: 4096}}) || !c.New {
		t.Fatalf("change %+v", c)
	}
	r, err := os.Open(m.path("sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make([]byte, 8192)
	if _, err := r.ReadAt(got, off-4096); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:4096], make([]byte, 4096)) || !bytes.Equal(got[4096:], data) {
		t.Fatal("hole or data read back wrong")
	}
	if d, err := unix.Seek(int(r.Fd()), 0, unix.SEEK_DATA); err != nil || d != off {
		t.Fatalf("SEEK_DATA = %d, %v; want %d", d, err, off)
	}
	if h, err := unix.Seek(int(r.Fd()), 0, unix.SEEK_HOLE); err != nil || h != 0 {
		t.Fatalf("SEEK_HOLE = %d, %v; want 0", h, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(m.path("sparse"), &st); err != nil || st.Blocks*512 > 1<<20 {
		t.Fatalf("%d blocks allocated: not sparse (%v)", st.Blocks, err)
	}
}

// mmapHelperEnv names the file TestMmapHelper writes through a mapping.
const mmapHelperEnv = "DELTAFS_TEST_MMAP_FILE"

// TestMmapHelper is not a test: TestMmapWrite runs it in a child process.
// A page fault on a mapping of our own mount blocks its thread inside the
// kernel, unseen by the Go scheduler; with GOMAXPROCS=1 the server could
// then never run to answer it.
func TestMmapHelper(t *testing.T) {
	p := os.Getenv(mmapHelperEnv)
	if p == "" {
		t.Skip("helper process for TestMmapWrite")
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, 64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(b[20000:], "mapped")
	if err := unix.Msync(b, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	if err := unix.Munmap(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMmapWrite changes a file through a shared mapping (in a child
// process): the report covers the page written.
func TestMmapWrite(t *testing.T) {
	m := mountLive(t)
	if err := os.WriteFile(m.path("map"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitChanges(t, 1)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMmapHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), mmapHelperEnv+"="+m.path("map"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mmap helper: %v\n%s", err, out)
	}
	changes := m.waitChanges(t, 1)
	c := changes[len(changes)-1]
	covered := false
	for _, r := range c.Dirty {
		covered = covered || r.Off <= 20000 && r.End() >= 20006
	}
	if !covered || c.Kept != 64<<10 {
		t.Fatalf("mmap write not covered: %+v", c)
	}
	got, err := os.ReadFile(m.live + "/map")
	if err != nil || string(got[20000:20006]) != "mapped" {
		t.Fatalf("live file lacks the mapped write: %v", err)
	}
}

// TestConcurrentReadersAndWriters runs writers of disjoint blocks and
// readers of the whole file at once; at the end every block holds its
// writer's last bytes and exactly one change covers them all.
func TestConcurrentReadersAndWriters(t *testing.T) {
	m := mountLive(t)
	const blocks, bs = 8, 64 << 10
	if err := os.WriteFile(m.path("shared"), make([]byte, blocks*bs), 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitChanges(t, 1)
	var wg sync.WaitGroup
	errs := make(chan error, 2*blocks)
	hold, err := os.OpenFile(m.path("shared"), os.O_WRONLY, 0) // keeps one session for all
	if err != nil {
		t.Fatal(err)
	}
	for i := range blocks {
		wg.Add(2)
		go func() {
			defer wg.Done()
			f, err := os.OpenFile(m.path("shared"), os.O_WRONLY, 0)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for round := range 20 {
				if _, err := f.WriteAt(bytes.Repeat([]byte{byte(i*20 + round)}, bs), int64(i*bs)); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 20 {
				if b, err := os.ReadFile(m.path("shared")); err != nil || len(b) != blocks*bs {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	hold.Close()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := os.ReadFile(m.path("shared"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range blocks {
		if want := byte(i*20 + 19); got[i*bs] != want || got[i*bs+bs-1] != want {
			t.Fatalf("block %d holds %d, want %d", i, got[i*bs], want)
		}
	}
	c := m.waitChanges(t, 1)[0]
	if !reflect.DeepEqual(c.Dirty, []fs.Range{{Off: 0, Len: blocks * bs}}) {
		t.Fatalf("change %+v", c)
	}
}

func TestStatfs(t *testing.T) {
	m := mountLive(t)
	var a, b syscall.Statfs_t
	if err := syscall.Statfs(m.mnt, &a); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Statfs(m.live, &b); err != nil {
		t.Fatal(err)
	}
	if a.Blocks != b.Blocks || a.Bsize != b.Bsize {
		t.Fatalf("statfs of the mount %+v differs from the live directory's %+v", a, b)
	}
}
