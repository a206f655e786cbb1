package mount

import (
	"errors"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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

// A recording can be refused with room to spare by the index's measure:
// Room wants the index's reserve, and a big file's data then fills the
// rest (a 58 MiB file with 80 MiB free). Resuming as soon as Room
// passed retried that file every half second for ever (a review: 4 s of
// CPU and 1.2 GB written per 10 s). A pause now resumes when space is
// freed (spaceFreed more than when it began) or, failing that, after
// its backoff: spaceBackoff at first, doubled at each pause that comes
// within spaceQuiet of the last resume, up to spaceBackoffMax.
const (
	spaceFreed      = 1 << 20
	spaceBackoff    = 5 * time.Second
	spaceBackoffMax = 5 * time.Minute
	spaceQuiet      = time.Minute
)

// spaceWait resumes recording once the store has room again.
type spaceWait struct {
	room    func() error          // the store's Room
	free    func() (int64, error) // the bytes free on the store's file system
	resume  func() int            // queues the redo of every pending file; how many
	closing <-chan struct{}
	log     *slog.Logger

	mu      sync.Mutex
	paused  bool
	refused int           // recordings refused since the pause began
	backoff time.Duration // the current pause's
	resumed time.Time     // when recording last resumed
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
	if w.backoff == 0 || time.Since(w.resumed) > spaceQuiet {
		w.backoff = spaceBackoff
	} else {
		w.backoff = min(2*w.backoff, spaceBackoffMax)
	}
	free := int64(-1)
	if w.free != nil {
		if f, err := w.free(); err == nil {
			free = f
		}
	}
	w.log.Error("the store's file system is full: recording paused; changes stay pending and are recorded once space is freed (or by the next mount)", "err", first, "retry", w.backoff)
	go w.poll(free, w.backoff)
}

// poll waits for room, and for free to grow or wait to pass, then queues
// the redo of what is pending.
func (w *spaceWait) poll(free int64, wait time.Duration) {
	t := time.NewTicker(spacePoll)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-w.closing:
			return
		case <-t.C:
		}
		if w.room() != nil || !w.freed(free) && time.Since(start) < wait {
			continue
		}
		w.mu.Lock()
		refused := w.refused
		w.paused, w.refused, w.resumed = false, 0, time.Now()
		w.mu.Unlock()
		n := w.resume()
		w.log.Warn("the store has room again: recording what is pending", "files", n, "refused", refused)
		return
	}
}

// freed says whether more than spaceFreed bytes were freed since the
// file system had free bytes (-1: unknown, and then only the backoff
// resumes, as it does when a statfs fails).
func (w *spaceWait) freed(free int64) bool {
	if free < 0 || w.free == nil {
		return false
	}
	f, err := w.free()
	return err == nil && f > free+spaceFreed
}

// freeBytes returns the bytes an unprivileged writer may still use on
// the file system of dir.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}
