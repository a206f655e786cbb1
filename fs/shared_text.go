package fs

import (
	"context"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// freeBigText is the size from which dropping a text hands its memory
// back to the OS at once. The Go runtime returns freed heap only slowly
// (and an idle mount triggers no collection at all): a read of a 512 MiB
// revision left the mount at 834 MB RSS after the reader was gone.
// Forcing a collection costs a few milliseconds, nothing next to reading
// a text this big.
const freeBigText = 32 << 20

// sharedText is the content of a read-only file (a revision in .history,
// a file in a snapshot): read at the first read of the current opens,
// shared by all of them, dropped when the last is released. Opens of one
// file hold one copy, and a file no one has open holds none.
type sharedText struct {
	mu    sync.Mutex
	opens int
	data  []byte   // the content while opens > 0 and it has been read
	file  *os.File // or the content spilled to an unlinked file (spill.go)
}

// open counts an open.
func (t *sharedText) open() {
	t.mu.Lock()
	t.opens++
	t.mu.Unlock()
}

// get returns the content, reading it with read at the first call of the
// current opens; size is the content's expected length (0: nothing to read).
func (t *sharedText) get(ctx context.Context, size uint64, read func(context.Context) ([]byte, error)) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.data != nil || size == 0 {
		return t.data, nil
	}
	b, err := read(ctx)
	if err != nil {
		return nil, err
	}
	t.data = b
	return b, nil
}

// release counts a release, and drops the content with the last.
func (t *sharedText) release() {
	t.mu.Lock()
	t.opens--
	var dropped int
	if t.opens == 0 {
		dropped = len(t.data)
		t.data = nil
		if t.file != nil {
			t.file.Close()
			t.file = nil
		}
	}
	t.mu.Unlock()
	if dropped >= freeBigText {
		freeSoon()
	}
}

// freeSoon hands freed heap back to the OS in the background.
func freeSoon() {
	if freeing.CompareAndSwap(false, true) {
		go func() {
			defer freeing.Store(false)
			debug.FreeOSMemory()
		}()
	}
}

// freeing is set while a FreeOSMemory runs: big texts dropped together
// share one forced collection instead of starting one each.
var freeing atomic.Bool
