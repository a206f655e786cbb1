package fs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Privilege bits on write (FUSE_HANDLE_KILLPRIV_V2, see Options).
//
// A write or truncation by a caller without CAP_FSETID drops a regular
// file's setuid bit, and its setgid bit when the group may execute it
// (security.capability goes too, whoever writes). Without
// handle_killpriv_v2 the kernel does it, and to know whether there is
// anything to drop it asks us for security.capability before every write:
// a GETXATTR round trip per WRITE, which halved the rate of small writes.
// With it the kernel marks an inode that has nothing to drop (S_NOSEC)
// and asks no more until its attributes change, and leaves the dropping
// to us:
//   - security.capability: our own pwrite or truncate of the live file
//     drops it (the live file system does that for any writer);
//   - setuid and setgid: we run as root, whose writes keep them, so a
//     write (killPrivsBeforeWrite) or a truncation the kernel flags
//     (fattrKillSuidgid) by a caller without CAP_FSETID drops them here;
//   - a passthrough writer's writes never reach us, and the kernel drops
//     nothing for them under handle_killpriv_v2: so a writer without
//     CAP_FSETID of a file with those bits is opened in the cached mode
//     (its writes reach us), or, where the inode is already in
//     passthrough mode, drops them at open (earlier than a local file
//     system would, never later). Known gap: bits added by chmod while
//     such a passthrough writer is open survive its later writes.

// fattrKillSuidgid is FATTR_KILL_SUIDGID in SETATTR's valid mask (a size
// change by a caller without CAP_FSETID); go-fuse does not name it.
const fattrKillSuidgid = 1 << 11

// capFsetid is CAP_FSETID's bit in /proc/PID/status's CapEff.
const capFsetid = 4

// privBits reports whether mode has bits an unprivileged write drops.
func privBits(mode uint32) bool {
	if mode&syscall.S_IFMT != syscall.S_IFREG {
		return false
	}
	return mode&syscall.S_ISUID != 0 || mode&(syscall.S_ISGID|syscall.S_IXGRP) == syscall.S_ISGID|syscall.S_IXGRP
}

// dropPrivs clears the bits privBits looks at from a regular file's mode.
func dropPrivs(mode uint32) uint32 {
	mode &^= syscall.S_ISUID
	if mode&syscall.S_IXGRP != 0 {
		mode &^= syscall.S_ISGID
	}
	return mode & 0o7777
}

// callerHasFsetid reports whether the caller of ctx holds CAP_FSETID in
// its effective set, read from /proc; a caller that cannot be looked up
// (gone, another pid namespace) counts as privileged only if it is root.
func callerHasFsetid(ctx context.Context) bool {
	caller, ok := fuse.FromContext(ctx)
	if !ok {
		return true // our own request, not a user's
	}
	if capEff, err := procCapEff(caller.Pid); err == nil {
		return capEff&(1<<capFsetid) != 0
	}
	return caller.Uid == 0
}

// procCapEff reads the effective capability set of process pid.
func procCapEff(pid uint32) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return 0, err
	}
	_, rest, ok := bytes.Cut(b, []byte("\nCapEff:"))
	if !ok {
		return 0, fmt.Errorf("no CapEff in /proc/%d/status", pid)
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	return strconv.ParseUint(string(bytes.TrimSpace(line)), 16, 64)
}

// mustDropPrivs reports whether a write by the caller of ctx must drop
// the privilege bits of a file of mode.
func mustDropPrivs(ctx context.Context, mode uint32) bool {
	return privBits(mode) && !callerHasFsetid(ctx)
}

// killPrivsFd drops the privilege bits of the live file fd if it has any,
// and tells the kernel, whose cached mode would otherwise show them for
// up to an attribute timeout.
func (n *Node) killPrivsFd(fd int) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return n.fsys.errno("write: stat", err)
	}
	if !privBits(st.Mode) {
		return 0
	}
	if err := syscall.Fchmod(fd, dropPrivs(st.Mode)); err != nil {
		return n.fsys.errno("write: drop setuid", err)
	}
	n.touchSelf()
	_ = n.NotifyContent(-1, 0) // attributes only
	return 0
}

// killPrivsBeforeWrite drops the privilege bits of the live file fd
// before a write by the caller of ctx, as the kernel does for a local
// file. A file seen without such bits is not looked at again until a
// SETATTR (attrsChanged); one with them costs an fstat and a look at the
// caller's capabilities per write.
func (n *Node) killPrivsBeforeWrite(ctx context.Context, fd int) syscall.Errno {
	gen := n.attrGen.Load()
	if n.noPrivsAt.Load() == gen+1 {
		return 0
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return 0 // the write itself will report a broken descriptor
	}
	if !privBits(st.Mode) {
		n.noPrivsAt.Store(gen + 1) // stale at once if a SETATTR raced us
		return 0
	}
	if callerHasFsetid(ctx) {
		return 0
	}
	return n.killPrivsFd(fd)
}

// killPrivsFlagged drops the privilege bits after a size change the
// kernel flagged (fattrKillSuidgid), through fd or, if fd < 0, by path.
func (n *Node) killPrivsFlagged(in *fuse.SetAttrIn, fd int) syscall.Errno {
	if in.Valid&fattrKillSuidgid == 0 {
		return 0
	}
	if fd >= 0 {
		return n.killPrivsFd(fd)
	}
	pfd, err := n.openSelfAs(syscall.O_RDONLY | syscall.O_NONBLOCK) // no symlink on the way (safe_ops.go)
	if err != nil {
		return n.fsys.errno("truncate: drop setuid", err)
	}
	defer syscall.Close(pfd)
	return n.killPrivsFd(pfd)
}

// attrsChanged notes a SETATTR: the mode may have gained setuid or setgid.
func (n *Node) attrsChanged() { n.attrGen.Add(1) }
