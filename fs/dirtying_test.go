package fs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
)

// TestDirtiedOncePerSessionBeforeTheChange checks the journal hook:
// Dirtied comes once per session that changes content, before the
// change reaches the live file, and never for reads or an unused
// writable open.
func TestDirtiedOncePerSessionBeforeTheChange(t *testing.T) {
	m := mountLive(t)
	p := m.path("a")
	expect := func(what string, want ...string) {
		t.Helper()
		m.waitChanges(t, countOf(want, "changed"))
		if got := m.rec.takeLog(); !slices.Equal(got, want) {
			t.Fatalf("%s: calls %q, want %q", what, got, want)
		}
	}
	if err := os.WriteFile(p, testutil.Bytes(3, 8000), 0o644); err != nil {
		t.Fatal(err)
	}
	expect("create and write", "dirtied", "changed")

	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	livePath := filepath.Join(m.live, "a")
	var seen []byte
	m.rec.mu.Lock()
	m.rec.onDirtied = func(id fs.FileID, path string) {
		var err error
		if seen, err = os.ReadFile(livePath); err != nil {
			t.Error(err)
		}
	}
	m.rec.mu.Unlock()
	for i := range 3 {
		writeAt(t, f, int64(1000*i), []byte("xyz"))
	}
	if err := f.Sync(); err != nil { // the kernel may hold the writes until here
		t.Fatal(err)
	}
	m.rec.mu.Lock()
	m.rec.onDirtied = nil
	if bytes.Contains(seen, []byte("xyz")) || len(seen) != 8000 {
		t.Fatalf("at Dirtied the live file held %d bytes, want the 8000 before the writes", len(seen))
	}
	m.rec.mu.Unlock()
	writeAt(t, f, 5000, []byte("abc"))
	f.Close()
	expect("three writes, fsync, a write, close", "dirtied", "changed", "dirtied", "changed")

	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	expect("truncate by path", "dirtied", "changed")

	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	m.awaitReleased(t, "a") // the open below is not a passthrough writer
	g, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	expect("a read and an unused writable open")

	g, err = os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	expect("O_TRUNC", "dirtied", "changed")
}

func countOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// TestFsyncWithNothingNewWaitsForTheEarlierReport: an fsync retried
// after EINTR finds nothing new to report, but must still wait until the
// change the interrupted fsync reported is recorded.
func TestFsyncWithNothingNewWaitsForTheEarlierReport(t *testing.T) {
	m := mountLive(t)
	f, err := os.Create(m.path("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writeAt(t, f, 0, []byte("data"))
	for range 2 {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	c := m.waitChanges(t, 1)[0]
	m.rec.mu.Lock()
	waits := slices.Clone(m.rec.waits)
	m.rec.mu.Unlock()
	if len(waits) != 2 || waits[0] != c.ID || waits[1] != c.ID {
		t.Fatalf("two fsyncs, one report: waited for %v, want twice for %v", waits, c.ID)
	}
}
