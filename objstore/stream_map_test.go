package objstore

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sys/unix"
)

// TestStreamMapFault: a mapped source cut short under the stream faults
// (SIGBUS) where it is read; in a stream's goroutine that is the
// stream's errStreamSize (its put falls back to reading the file
// whole), not a crash of the process; and a source of another size than
// announced is not mapped at all.
func TestStreamMapFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(path, make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m := mapSource(f, 64<<10+1); m != nil {
		unix.Munmap(m)
		t.Fatal("a source one byte shorter than announced was mapped")
	}
	m := mapSource(f, 64<<10)
	if m == nil {
		t.Fatal("source not mapped")
	}
	defer unix.Munmap(m)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	st := &streamer{mapped: m}
	st.cond = sync.NewCond(&st.mu)
	var wg sync.WaitGroup
	wg.Go(func() { st.guarded(func() { xxhash.Sum64(m) }) })
	wg.Wait()
	if !errors.Is(st.err, errStreamSize) {
		t.Fatalf("hashing a mapping cut short: stream error %v, want errStreamSize", st.err)
	}
	if st.faulted(nil) != nil {
		t.Fatal("no panic made an error")
	}
	defer func() {
		if r := recover(); r != "not a fault" {
			t.Fatalf("a panic that is no fault: recovered %v", r)
		}
	}()
	st.guarded(func() { panic("not a fault") })
}
