package fs

import (
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// fstatStable stats the open live file fd and returns its attributes and
// the StableAttr that go-fuse's LoopbackNode.Lookup would give the same
// inode, so that a node made from a descriptor (Create) and one found by
// name later are one node.
func (f *FS) fstatStable(fd int) (syscall.Stat_t, gofs.StableAttr, error) {
	var x unix.Statx_t
	var st syscall.Stat_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x); err != nil {
		return st, gofs.StableAttr{}, err
	}
	if err := syscall.Fstat(fd, &st); err != nil {
		return st, gofs.StableAttr{}, err
	}
	gen := uint64(1)
	if x.Mask&unix.STATX_BTIME != 0 && (x.Btime.Sec != 0 || x.Btime.Nsec != 0) {
		gen = uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
	}
	// go-fuse mixes the device into the inode number, so that a tree
	// spanning file systems has no clashes; on the live directory's own
	// device the number is the live inode number.
	swap := func(d uint64) uint64 { return d<<32 | d>>32 }
	ino := swap(uint64(st.Dev)) ^ swap(f.loop.Dev) ^ st.Ino
	return st, gofs.StableAttr{Mode: st.Mode & syscall.S_IFMT, Ino: ino, Gen: gen}, nil
}
