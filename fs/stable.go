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
	return f.statStableAt(fd, "", unix.AT_EMPTY_PATH)
}

// statStableAt is fstatStable of name in directory dfd (flags as
// statx(2) takes them).
func (f *FS) statStableAt(dfd int, name string, flags int) (syscall.Stat_t, gofs.StableAttr, error) {
	var x unix.Statx_t
	if err := unix.Statx(dfd, name, flags, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x); err != nil {
		return syscall.Stat_t{}, gofs.StableAttr{}, err
	}
	st := statFromStatx(&x)
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

// statFromStatx returns the stat(2) view of x (one statx instead of a
// statx and an fstat on every Create).
func statFromStatx(x *unix.Statx_t) syscall.Stat_t {
	ts := func(t unix.StatxTimestamp) syscall.Timespec {
		return syscall.Timespec{Sec: t.Sec, Nsec: int64(t.Nsec)}
	}
	return syscall.Stat_t{
		Dev:     unix.Mkdev(x.Dev_major, x.Dev_minor),
		Ino:     x.Ino,
		Nlink:   uint64(x.Nlink),
		Mode:    uint32(x.Mode),
		Uid:     x.Uid,
		Gid:     x.Gid,
		Rdev:    unix.Mkdev(x.Rdev_major, x.Rdev_minor),
		Size:    int64(x.Size),
		Blksize: int64(x.Blksize),
		Blocks:  int64(x.Blocks),
		Atim:    ts(x.Atime),
		Mtim:    ts(x.Mtime),
		Ctim:    ts(x.Ctime),
	}
}
