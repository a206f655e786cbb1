package mount

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A snapshot is of one instant: the operations that change the live
// tree through the mount wait while a snapshot reads it (fs.FS.Freeze),
// so every snapshot holds what a power cut at one moment would leave.

// seqWidth is the width of the sequence numbers the tests write.
const seqWidth = 20

func seqBytes(i int) []byte { return fmt.Appendf(nil, "%0*d\n", seqWidth-1, i) }

// seqAt reads the sequence number at off of the file at p.
func seqAt(t *testing.T, p string, off int64) int {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, seqWidth)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatalf("%s at %d: %v", p, off, err)
	}
	i, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s at %d: %q", p, off, b)
	}
	return i
}

// openCached makes the file at p holding content and reopens it for
// in-place writes once the creating handle's passthrough mode is over,
// so that its writes go through the mount (fs's cached I/O mode): after
// the creating handle's release (which reports the new file; the kernel
// sends it after close returns) and fs's ioModeGrace. No other file's
// report may be due then: it counts the reports.
func openCached(t *testing.T, l *live, p string, content []byte) *os.File {
	t.Helper()
	l.rec.mu.Lock()
	n := l.rec.reports
	l.rec.mu.Unlock()
	mustDo(t, os.WriteFile(p, content, 0o644))
	l.reported(t, n+1)
	time.Sleep(50 * time.Millisecond) // past ioModeGrace
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	mustDo(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// TestSnapshotWritesOneInstant: a writer writes sequence number i into
// file a, then into file b, then into the start and then the end of
// file c, in place, while snapshots are taken; in every snapshot a holds
// b's number or the next, and so does c's start to its end. (Before the
// snapshot held the writers, the build read a, b and c one after another
// while the writes went on: b ran ahead of a in most snapshots.)
func TestSnapshotWritesOneInstant(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	m := l.mnt
	const cSize = 8 << 20
	cEnd := int64(cSize - seqWidth)
	c0 := make([]byte, cSize)
	copy(c0, seqBytes(0))
	copy(c0[cEnd:], seqBytes(0))
	fa, fb := openCached(t, l, m+"/a", seqBytes(0)), openCached(t, l, m+"/b", seqBytes(0))
	fc := openCached(t, l, m+"/c", c0)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			b := seqBytes(i)
			for _, w := range []struct {
				f   *os.File
				off int64
			}{{fa, 0}, {fb, 0}, {fc, 0}, {fc, cEnd}} {
				if _, err := w.f.WriteAt(b, w.off); err != nil {
					t.Errorf("write %d: %v", i, err)
					return
				}
			}
			written.Store(int64(i))
			if i%500 == 0 {
				_ = fa.Sync() // reports for the recorder to read meanwhile
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	bad := 0
	const snaps = 15
	for k := range snaps {
		for before := written.Load(); written.Load() < before+20; {
			time.Sleep(time.Millisecond)
		}
		name := fmt.Sprintf("s%d", k)
		mustDo(t, os.Mkdir(m+"/.snapshots/"+name, 0o755))
		s := m + "/.snapshots/" + name
		a, b := seqAt(t, s+"/a", 0), seqAt(t, s+"/b", 0)
		cs, ce := seqAt(t, s+"/c", 0), seqAt(t, s+"/c", cEnd)
		if a != b && a != b+1 {
			bad++
			t.Errorf("%s: a holds %d, b %d: not one instant", name, a, b)
		}
		if cs != ce && cs != ce+1 {
			bad++
			t.Errorf("%s: c's start holds %d, its end %d: not one instant", name, cs, ce)
		}
		if b < cs || b > cs+1 {
			bad++
			t.Errorf("%s: b holds %d, c's start %d: not one instant", name, b, cs)
		}
	}
	if bad > 0 {
		t.Logf("%d of %d checks failed", bad, 3*snaps)
	}
}

// TestSnapshotNamesOneInstant: a file renamed back and forth between two
// directories is in every snapshot exactly once, and of a pair of
// directories, d1/p made before d2/p and removed after it, d2/p is never
// in a snapshot without d1/p, while a big file written in place between
// them in the build's order (d1/zbig) makes the build slow there.
func TestSnapshotNamesOneInstant(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	m := l.mnt
	mustDo(t, os.Mkdir(m+"/d1", 0o755))
	mustDo(t, os.Mkdir(m+"/d2", 0o755))
	mustDo(t, os.WriteFile(m+"/d1/f", []byte("f"), 0o644))
	l.reported(t, 1) // before openCached counts its own report
	big := openCached(t, l, m+"/d1/zbig", make([]byte, 4<<20))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	loop := func(fn func(i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := fn(i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	loop(func(i int) error { // the mover
		from, to := m+"/d1/f", m+"/d2/f"
		if i%2 == 1 {
			from, to = to, from
		}
		return os.Rename(from, to)
	})
	loop(func(i int) error { // the pair: d1/p made first, removed last
		// (directories: a file made and removed in a loop this tight
		// would leave the recorder a backlog for every snapshot to wait
		// for, each new file at a vacated path recorded alone)
		if i%2 == 0 {
			if err := os.Mkdir(m+"/d1/p", 0o755); err != nil {
				return err
			}
			return os.Mkdir(m+"/d2/p", 0o755)
		}
		if err := os.Remove(m + "/d2/p"); err != nil {
			return err
		}
		return os.Remove(m + "/d1/p")
	})
	loop(func(i int) error { // the big file, rewritten in place
		_, err := big.WriteAt(seqBytes(i), int64(i*4096)%(4<<20-seqWidth))
		return err
	})
	defer func() { close(stop); wg.Wait() }()

	exists := func(p string) bool {
		_, err := os.Lstat(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		return err == nil
	}
	bad := 0
	const snaps = 20
	for k := range snaps {
		time.Sleep(5 * time.Millisecond)
		name := fmt.Sprintf("s%d", k)
		mustDo(t, os.Mkdir(m+"/.snapshots/"+name, 0o755))
		s := m + "/.snapshots/" + name
		in1, in2 := exists(s+"/d1/f"), exists(s+"/d2/f")
		if in1 == in2 {
			bad++
			t.Errorf("%s: f in d1 %v, in d2 %v: want exactly one", name, in1, in2)
		}
		// d1/p is made before d2/p and removed after it: d1/p alone is
		// a state between, d2/p alone never one.
		if p1, p2 := exists(s+"/d1/p"), exists(s+"/d2/p"); p2 && !p1 {
			bad++
			t.Errorf("%s: d2/p without d1/p", name)
		}
	}
	if bad > 0 {
		t.Logf("%d of %d checks failed", bad, 2*snaps)
	}
}

// TestSnapshotHoldNoDeadlock takes snapshots, two at a time and over the
// control socket too, while writers write, truncate (by handle, by path,
// by O_TRUNC), fsync, rename, link, unlink files they hold open, change
// attributes and xattrs, and make and remove directories: every snapshot
// and every operation finishes (a deadlock fails the test with every
// goroutine's stack instead of hanging it).
func TestSnapshotHoldNoDeadlock(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	m := l.mnt
	mustDo(t, os.MkdirAll(m+"/w/sub", 0o755))
	mustDo(t, os.MkdirAll(m+"/v", 0o755))
	held := openCached(t, l, m+"/w/held", make([]byte, 1<<20))

	done := make(chan struct{})
	timer := time.AfterFunc(3*time.Minute, func() {
		select {
		case <-done:
			return
		default:
		}
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		panic("TestSnapshotHoldNoDeadlock: snapshots and writers still running after 3 minutes: deadlock")
	})
	defer timer.Stop()
	defer close(done)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ops atomic.Int64
	loop := func(what string, fn func(r *rand.Rand, i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(len(what)), 7))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := fn(r, i); err != nil {
					t.Errorf("%s: %v", what, err)
					return
				}
				ops.Add(1)
			}
		}()
	}
	loop("in-place writer", func(r *rand.Rand, i int) error {
		if _, err := held.WriteAt(seqBytes(i), r.Int64N(1<<20)); err != nil {
			return err
		}
		switch i % 50 {
		case 10:
			return held.Sync()
		case 20:
			return held.Truncate(r.Int64N(1 << 20))
		case 30:
			return unix.Fallocate(int(held.Fd()), 0, 0, 1<<20)
		}
		return nil
	})
	loop("rewriter", func(r *rand.Rand, i int) error {
		p := fmt.Sprintf("%s/w/sub/r%d", m, i%4)
		if err := os.WriteFile(p, seqBytes(i), 0o644); err != nil { // O_TRUNC
			return err
		}
		switch i % 5 {
		case 1:
			return os.Truncate(p, int64(i%seqWidth))
		case 2:
			return os.Chmod(p, 0o600|os.FileMode(i%2)<<6)
		case 3:
			return unix.Setxattr(p, "user.n", seqBytes(i), 0)
		case 4:
			now := time.Now()
			return os.Chtimes(p, now, now)
		}
		return nil
	})
	loop("unlinker of open files", func(r *rand.Rand, i int) error {
		p := fmt.Sprintf("%s/v/u%d", m, i%3)
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write(seqBytes(i)); err != nil {
			return err
		}
		if i%2 == 0 {
			if err := f.Sync(); err != nil {
				return err
			}
		}
		if err := os.Remove(p); err != nil {
			return err
		}
		_, err = f.WriteAt(seqBytes(i), 4096)
		return err
	})
	loop("namer", func(r *rand.Rand, i int) error {
		a, b := m+"/w/n", m+"/v/n"
		switch i % 6 {
		case 0:
			return os.WriteFile(a, seqBytes(i), 0o644)
		case 1:
			return os.Rename(a, b)
		case 2:
			return os.Link(b, a)
		case 3:
			return os.Rename(a, b) // over its own link: a no-op rename
		case 4:
			if err := os.Symlink("n", m+"/v/s"); err != nil {
				return err
			}
			return os.Mkdir(m+"/v/d", 0o755)
		case 5:
			for _, p := range []string{m + "/v/s", m + "/v/d", a, b} {
				if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
		}
		return nil
	})

	ctx := context.Background()
	c, closeFn, err := Connect(ctx, store, false, quiet())
	mustDo(t, err)
	defer closeFn()
	var snapWG sync.WaitGroup
	for g := range 2 {
		snapWG.Add(1)
		go func() {
			defer snapWG.Done()
			for k := range 8 {
				time.Sleep(time.Duration(k%3) * 3 * time.Millisecond)
				name := fmt.Sprintf("g%d-%d", g, k)
				var err error
				if g == 0 {
					err = os.Mkdir(m+"/.snapshots/"+name, 0o755)
				} else {
					_, err = c.CreateSnapshot(ctx, name)
				}
				if err != nil {
					t.Errorf("snapshot %s: %v", name, err)
				}
			}
		}()
	}
	snapWG.Wait()
	close(stop)
	wg.Wait()
	if n := ops.Load(); n < 100 {
		t.Errorf("only %d operations ran beside the snapshots", n)
	}
	if err := syscall.Access(m+"/.snapshots/g1-7/w/held", 0); err != nil {
		t.Errorf("the last snapshot: %v", err)
	}
}
