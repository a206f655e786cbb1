package mount

import (
	"runtime/debug"
	"time"
)

// idleAfter is how long the store must go unused (no read, no recording:
// objstore.Store.CacheUses unchanged) before the mount gives back what it
// holds for work that has stopped: the store's text caches (up to
// CacheBytes+LatestBytes of texts, rebuilt from the segments if asked
// for again) and the heap the Go runtime keeps after a burst. An idle
// process runs no garbage collection of its own accord, and the runtime
// returns freed heap to the OS only slowly: a 9-minute workload left a
// mount at 474 MB RSS long after it ended (README), 246 MiB of it heap
// in use, 112 MiB freed but not returned (F1, bench/footprint.go).
const idleAfter = 30 * time.Second

// trimWhenIdle drops the store's caches and returns free memory to the
// OS once the store has gone unused for after, then again only after it
// has been used again; it returns when the mount closes. trimmed, if
// set, sees each trim's dropped cache bytes (tests).
func (m *running) trimWhenIdle(after time.Duration, trimmed func(int64)) {
	const checks = 3 // checks per idle period
	t := time.NewTicker(after / checks)
	defer t.Stop()
	last, quiet, done := m.st.CacheUses(), 0, false
	for {
		select {
		case <-m.closing:
			return
		case <-t.C:
		}
		if u := m.st.CacheUses(); u != last {
			last, quiet, done = u, 0, false
			continue
		}
		if quiet++; done || quiet < checks {
			continue
		}
		dropped := m.st.DropCaches()
		debug.FreeOSMemory()
		done = true
		if trimmed != nil {
			trimmed(dropped)
		}
	}
}
