package fs_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
)

// keeper is a Recorder that falls behind: it keeps every change, with
// whatever descriptor it carries, until the test records it.
type keeper struct {
	fs.NopRecorder
	mu      sync.Mutex
	changes []fs.Change
	quiet   bool // takes no Removed and Linked events, as the mount's recorder
}

func (k *keeper) IgnoresRemovesAndLinks() bool { return k.quiet }

func (k *keeper) Changed(c fs.Change) {
	k.mu.Lock()
	k.changes = append(k.changes, c)
	k.mu.Unlock()
}

func (k *keeper) wait(t *testing.T, n int) []fs.Change {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		k.mu.Lock()
		got := len(k.changes)
		k.mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d changes reported, want %d", got, n)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.changes
}

func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// A recorder far behind does not make the live tree hold a descriptor per
// pending change: past a cap, changes carry a reference that Open resolves
// when the recorder gets to them, to the right file after a rename too,
// and to a file whose last name was removed (unlinked or renamed over).
// Run with a recorder that takes Removed events and with one that takes
// none (fs.QuietRecorder: unlink gathers nothing for it).
func TestPendingChangesHoldBoundedDescriptors(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		t.Run(fmt.Sprintf("quiet=%v", quiet), func(t *testing.T) { testPendingChangesHoldBoundedDescriptors(t, quiet) })
	}
}

func testPendingChangesHoldBoundedDescriptors(t *testing.T, quiet bool) {
	testutil.RequireFUSE(t)
	live := filepath.Join(t.TempDir(), "live")
	if err := os.Mkdir(live, 0o755); err != nil {
		t.Fatal(err)
	}
	k := &keeper{quiet: quiet}
	f, err := fs.New(fs.Config{LiveDir: live, Recorder: k, Passthrough: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mnt, _ := testutil.Mount(t, f.Root(), fs.Options(false))

	const n = 1500
	before := openFds(t)
	content := func(i int) []byte { return []byte(fmt.Sprintf("file %d\n", i)) }
	for i := range n {
		if err := os.WriteFile(filepath.Join(mnt, fmt.Sprint(i)), content(i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	changes := k.wait(t, n)
	if grew := openFds(t) - before; grew > 600 {
		t.Fatalf("%d pending changes hold %d more descriptors", n, grew)
	}
	var withFd int
	for _, c := range changes {
		if c.Content != nil {
			withFd++
		}
	}
	if withFd == 0 || withFd == n {
		t.Fatalf("%d of %d changes carry a descriptor, want some but not all", withFd, n)
	}
	// the last change carries no descriptor: move its file before it is
	// opened
	last := changes[n-1]
	if last.Content != nil {
		t.Fatal("the last change carries a descriptor")
	}
	if err := os.Rename(filepath.Join(mnt, last.Path), filepath.Join(mnt, "moved")); err != nil {
		t.Fatal(err)
	}
	// two more lose their last name before they are opened: one
	// unlinked, one renamed over; their changes still read their bytes
	for _, c := range changes[n-4 : n-1] {
		if c.Content != nil {
			t.Fatalf("change of %s carries a descriptor", c.Path)
		}
	}
	if err := os.Remove(filepath.Join(mnt, changes[n-2].Path)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, changes[n-3].Path), filepath.Join(mnt, changes[n-4].Path)); err != nil {
		t.Fatal(err)
	}
	for i := range changes {
		c := &changes[i]
		var want int
		if _, err := fmt.Sscan(c.Path, &want); err != nil {
			t.Fatalf("change of %q", c.Path)
		}
		lf, err := c.Open()
		if err != nil {
			t.Fatalf("%s: %v", c.Path, err)
		}
		got, err := io.ReadAll(io.NewSectionReader(lf, 0, 1<<20))
		if err != nil || !bytes.Equal(got, content(want)) {
			t.Fatalf("change of %s: read %q (%v), want %q", c.Path, got, err, content(want))
		}
		c.Close()
	}
	if grew := openFds(t) - before; grew > 8 {
		t.Fatalf("%d descriptors still open after every change was closed", grew)
	}
	// every descriptor given back: new changes carry one again
	if err := os.WriteFile(filepath.Join(mnt, "after"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := k.wait(t, n+1)[n]; c.Content == nil {
		t.Fatal("a change made after the backlog was recorded carries no descriptor")
	}
}
