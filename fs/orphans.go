package fs

import (
	"os"
	"sync"
)

// Writable handles the kernel may never release. close(2) returns after
// FLUSH; the RELEASE that ends the handle follows asynchronously, and an
// unmount aborts the connection with whatever requests the server has not
// read yet, RELEASEs included. A close that returned just before an
// unmount would then never be reported, and its change never recorded.
// So the live tree keeps its writable handles, and the mount, once the
// server has stopped, releases those left (ReleaseOrphans) as the kernel
// would have.

// openWriters is the set of writable handles not yet released, by live fd.
type openWriters struct {
	mu  sync.Mutex
	fds map[int]openWriter
}

type openWriter struct {
	n           *Node
	passthrough bool
	// file owns the fd (the handle's LoopbackFile wraps it): closing the
	// fd by number instead would leave file to close it again from its
	// finalizer, once garbage, whatever the number names by then.
	file *os.File
}

// added registers writable handle fd of n; n.mu may be held.
func (w *openWriters) added(fd int, n *Node, passthrough bool, file *os.File) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fds == nil {
		w.fds = map[int]openWriter{}
	}
	w.fds[fd] = openWriter{n: n, passthrough: passthrough, file: file}
}

// removed forgets fd; n.mu may be held.
func (w *openWriters) removed(fd int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.fds, fd)
}

// ReleaseOrphans releases every writable handle the kernel has not
// released, reporting its file's change as the last release would, and
// closes its live file. Call it only once the server has stopped (no
// request can arrive any more), before the Recorder is synced and closed.
// It returns how many handles it released.
func (f *FS) ReleaseOrphans() int {
	f.open.mu.Lock()
	left := f.open.fds
	f.open.fds = nil
	f.open.mu.Unlock()
	for fd, w := range left {
		w.n.released(fd, w.passthrough, true)
		_ = w.file.Close()
	}
	if len(left) > 0 {
		f.log.Info("handles the kernel never released recorded at shutdown", "handles", len(left))
	}
	return len(left)
}
