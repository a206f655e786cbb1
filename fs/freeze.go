package fs

import "sync"

// Snapshots of one instant. Every operation that changes the live tree
// through the mount (a write, a truncation, an allocation, a copy into a
// file, an open with O_TRUNC, a create, mknod, mkdir, symlink, link,
// unlink, rmdir or rename, a chmod, chown or utimens, a set or removal of
// an xattr, the FileID given at a writable open) holds the live tree's
// freeze shared while it changes the live file system and notes what it
// did (its dirty marks, its session's ranges, its report); a snapshot
// holds it exclusively (Freeze) while it reads the live tree and the
// content of the files it records. So a snapshot falls between two
// operations, never inside one, and holds every operation that returned
// before it started and none that started after it returned: what a power
// cut at one instant would leave (crash-consistent, as a ZFS or btrfs
// snapshot is).
//
// The exception: a writer that opened the file while a reader of it was
// open (or a Create or O_TRUNC open while no cached handle was) writes
// through FUSE passthrough, straight into the live file, and those
// writes never reach the mount to be held; so does the writeback of a
// writable mapping made through such a handle. Writeback of a mapping
// made through a cached handle arrives as WRITE requests and is held.
//
// The cost: an uncontended shared hold is an atomic add and subtract
// (sync.RWMutex), and while a snapshot reads the live tree, the
// operations that would change it wait (a few milliseconds for a
// snapshot of a few changed files; as long as recording a big new or
// changed file takes, since a snapshot reads it whole while it holds
// the writers; and the first snapshot of a mount walks the whole tree,
// see TreeBuilder).
//
// Rules that keep it from deadlocking (sync.RWMutex lets no new shared
// holder in once a snapshot waits for the exclusive side):
//   - an operation takes the hold once, at its outermost method, and
//     calls no other method that takes it (Node.Setattr holds it for the
//     handle's Setattr it reaches through go-fuse's LoopbackNode);
//   - an operation waits for nothing while it holds it: its waits (for
//     the recorder to read or record a change, Node.waitRecorded,
//     Node.dirtying, keepRemoved; for handles closing,
//     waitChildReleases and awaitCachedMode) come before its hold. The
//     mount's snapshot holds the recorder's sink while it waits for the
//     exclusive side, so an operation waiting for the recorder under the
//     hold would wait for ever;
//   - what an operation calls under it takes only short locks (the
//     node's, the recorder's queue, the journal) that no one holds
//     while waiting for the freeze, and tells the kernel nothing but
//     attribute invalidations (NotifyContent(-1, 0), which wait for no
//     request in flight).
//
// Releases, flushes, fsyncs, reads and lookups change nothing in the live
// tree and take no hold: a snapshot may run between a close and its
// release, or while an fsync waits for its recording.
type freeze struct {
	mu sync.RWMutex
}

// hold marks the start of an operation that changes the live tree; unhold
// its end.
func (f *FS) hold()   { f.frozen.mu.RLock() }
func (f *FS) unhold() { f.frozen.mu.RUnlock() }

// Freeze waits until no operation is changing the live tree through the
// mount and keeps new ones waiting until thaw is called (more calls of
// thaw do nothing). A snapshot calls it once everything reported is
// recorded, reads the live tree, and thaws before it stores the result.
func (f *FS) Freeze() (thaw func()) {
	f.frozen.mu.Lock()
	var once sync.Once
	return func() { once.Do(f.frozen.mu.Unlock) }
}
