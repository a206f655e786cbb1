package mount

import (
	"errors"
	"log/slog"
	"sync"
	"syscall"
	"time"
)

// A full disk. The store shares its file system with the live files, so
// a user who fills it through the mount leaves no room for revisions:
// the store refuses a put (ENOSPC) before it writes anything
// (index/space.go says why the index must refuse early), the user's own
// writes get ENOSPC from the kernel, and the mount goes on serving. A
// refused recording leaves its file pending in the journal, as a
// killed mount would; spaceWait then says once that recording is paused
// and polls the store's room, and once there is room again (the user
// removed something) it queues a redo of every pending file, the same
// redo a mount runs for what a killed mount left: each file is compared
// with its newest revision and recorded when they differ. An unmount
// meanwhile leaves them to the next mount.

// spacePoll is how often a paused recording looks for room: a statfs.
const spacePoll = 250 * time.Millisecond

// spaceWait resumes recording once the store has room again.
type spaceWait struct {
	room    func() error // the store's Room
	resume  func() int   // queues the redo of every pending file; how many
	closing <-chan struct{}
	log     *slog.Logger

	mu      sync.Mutex
	paused  bool
	refused int // recordings refused since the pause began
}

// isNoSpace reports whether err is a refusal for want of space.
func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// failed takes note of the errors of recordings: one refused for want of
// space pauses recording until there is room.
func (w *spaceWait) failed(errs []error) {
	if w == nil {
		return
	}
	n := 0
	var first error
	for _, err := range errs {
		if isNoSpace(err) {
			if n == 0 {
				first = err
			}
			n++
		}
	}
	if n == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refused += n
	if w.paused {
		return
	}
	w.paused = true
	w.log.Error("the store's file system is full: recording paused; changes stay pending and are recorded once space is freed (or by the next mount)", "err", first)
	go w.poll()
}

// poll waits for room, then queues the redo of what is pending.
func (w *spaceWait) poll() {
	t := time.NewTicker(spacePoll)
	defer t.Stop()
	for {
		select {
		case <-w.closing:
			return
		case <-t.C:
		}
		if w.room() != nil {
			continue
		}
		w.mu.Lock()
		refused := w.refused
		w.paused, w.refused = false, 0
		w.mu.Unlock()
		n := w.resume()
		w.log.Warn("the store has room again: recording what is pending", "files", n, "refused", refused)
		return
	}
}
