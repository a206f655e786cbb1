package fs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The kernel keeps a file's listing of revisions (FOPEN_CACHE_DIR), so
// that an ls of an unchanged history costs the mount an OPENDIR and no
// READDIR: go-fuse makes garbage for every READDIR request (about 60
// requests and 26 KB for 10,000 revisions), and 200 listings of that
// grew the mount's heap, and so its RSS, by 8-11 MiB before the
// collector ran (issue 5's H1). A listing is still asked of History at
// every OPENDIR (waiting for the file's queued changes first): the cache
// only saves sending the same entries again.
//
// The kernel fills its cache from the READDIR replies of caching opens,
// and a reader of the cache uses it whole or not at all (a page missing
// resets it). go-fuse adds KEEP_CACHE to CACHE_DIR, so the kernel drops
// the cache only when told to (Inode.NotifyContent). A caching open
// opened before a change of the listing still serves, and may put into
// the cache, the listing of its open, up to its release (the kernel
// sends RELEASEDIR once the last getdents on it has returned). So a new
// open of a changed listing may use the cache only once no such older
// open is left and the cache has been dropped since the last of them:
//   - while an older caching open is open, new opens do not cache (they
//     read their own handle's listing);
//   - otherwise, if the listing changed since the cache was last dropped
//     (not clean), the open drops it before it replies, and caches: the
//     older opens, gone now, put nothing into the cache after that drop
//     (none were open then).
//
// Decisions and drops are serialized per directory (histFile.cacheMu),
// so that no open replies "cache" while another's drop is on its way.

// dirCache is what a histFile knows of the kernel's cache of its
// listing; it lives under the histFile's mu.
type dirCache struct {
	gen   uint64 // the listing's generation: bumped at each change of it
	opens int    // caching handles open
	old   int    // of them, opened on an older generation
	// clean: the kernel holds no listing older than gen's (false for a
	// new node: nothing is known of the kernel's cache).
	clean bool
}

// changed notes a new listing: every caching handle open is now older.
func (c *dirCache) changed() {
	c.gen++
	c.old = c.opens
	c.clean = false
}

// mayCache reports whether a new open may use the kernel's cache, and
// whether the cache must be dropped first.
func (c *dirCache) mayCache() (cache, drop bool) {
	if c.old > 0 {
		return false, false
	}
	return true, !c.clean
}

// opened notes an open of the current listing.
func (c *dirCache) opened(caching bool) {
	if caching {
		c.opens++
	}
}

// released notes the release of a handle opened on generation gen.
func (c *dirCache) released(caching bool, gen uint64) {
	if !caching {
		return
	}
	c.opens--
	if gen != c.gen {
		// What it put into the cache is older, but the change that made
		// it older already made the cache not clean, and no open has
		// dropped the cache since (none may while it is open).
		c.old--
	}
}

// dropKernelCache tells the kernel to drop f's cached listing; ok is
// false if it may still hold it. An ENOENT means the kernel has no inode
// for f, and so no cache.
func (f *histFile) dropKernelCache() bool {
	errno := f.NotifyContent(0, 0)
	if errno != 0 && errno != syscall.ENOENT {
		f.v.log.Warn("history: cannot drop the kernel's listing cache", "path", f.Path(f.v.root), "err", errno)
		return false
	}
	return true
}

// openFlags decides, at an open of f's current listing, whether it uses
// the kernel's cache (dropping an older one first), notes the open and
// returns its OPENDIR flags. The caller holds f.cacheMu, not f.mu.
func (f *histFile) openFlags(h *revListHandle) uint32 {
	f.mu.Lock()
	cache, drop := f.kc.mayCache()
	f.mu.Unlock()
	if drop && !f.dropKernelCache() {
		cache = false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if drop && cache {
		f.kc.clean = true
	}
	h.caching, h.gen = cache, f.kc.gen
	f.kc.opened(cache)
	if cache {
		return fuse.FOPEN_CACHE_DIR
	}
	return 0
}
