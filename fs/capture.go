package fs

import (
	"syscall"
	"time"
)

// Reading a small new file at its report. A Change normally carries its
// live file reopened read-only (/proc/self/fd, one path walk through
// procfs, and a close in the recorder later): an untar or git's loose
// objects pay that per file, for files of a few KiB that the recorder
// reads whole anyway (a new file has no previous revision to take ranges
// against). With Config.ReadSmallNew, the last release of a file created
// in the session reads it with one pread(2) instead, and the Change
// carries the bytes (Change.Data) and when they were read
// (Change.DataTime, the revision's time: see package mount).
//
// Create opens the live file read-write even when the caller asked for
// write-only, so that the release can read it; the caller's own access
// mode is the kernel's business (a passthrough writer's backing file is
// opened with the caller's flags, a cached handle's reads are refused by
// the kernel before they reach us).

// captureMax is the largest file read at its report: a read on the
// release's path, ~10 us for 64 KiB from the page cache.
const captureMax = 64 << 10

// captureBudget caps the bytes all pending Changes carry: a recorder far
// behind (an untar of 100,000 files) makes the rest carry their file
// again (then a reference, see maxContentFds).
const captureBudget = 32 << 20

// captureSmallNew gives c the content of fd, its live file, if c is a
// small new file's last report and fd is readable.
func (f *FS) captureSmallNew(c *Change, fd int) bool {
	if !f.readNew || !c.New || c.Fsync || c.Size > captureMax || c.Size < 0 {
		return false
	}
	if f.captured.Add(c.Size) > captureBudget {
		f.captured.Add(-c.Size)
		return false
	}
	at := time.Now()
	buf := make([]byte, c.Size+1) // one more: a file grown since its stat is not taken
	n, err := syscall.Pread(fd, buf, 0)
	if err != nil || int64(n) != c.Size {
		f.captured.Add(-c.Size)
		return false
	}
	c.Data, c.DataTime = buf[:n:n], at
	c.ref = &contentRef{data: &f.captured}
	return true
}

// createFlags returns the flags Create opens the live file with: read-
// write for a write-only caller when small new files are read at their
// report, so that the release can read it.
func (f *FS) createFlags(flags int) int {
	if f.readNew && flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	return flags
}
