package fs

import (
	"context"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// liveTimeout is how long the kernel may keep the live tree's entries,
// negative entries and attributes; the mount-wide default (cacheTimeout,
// one second) stays for the .snapshots and .history views, whose names
// change behind the kernel's back (a snapshot taken by the CLI, a new
// revision).
//
// The live directory is this server's alone while it is mounted (see
// package mount), and every change to it arrives as a request through
// the kernel, which updates or invalidates its own cache for it: a
// create, link, unlink or rename replies with or drops the entry and
// invalidates the directory's attributes; an unlink or a rename over a
// file drops the victim's link count and ctime; a write (cached or
// passthrough), a truncation, a copy or an xattr change invalidates the
// file's size, times or ctime; a setattr replies with the new
// attributes. What this server changes on its own, it reports: the
// FileID xattr is set before Create's reply is taken, or with an
// attribute invalidation at a writable open (newSession); dropped
// setuid bits at a write (killpriv.go). A longer cache saves the
// LOOKUP and GETATTR of every revalidation: with go-fuse's one second,
// find, du, git's index refresh and rm -rf after an untar looked every
// name up again. An hour, not forever: a process that writes into the
// live directory behind the mount (which it must not) is seen within
// that time.
const liveTimeout = time.Hour

// liveEntry sets the timeouts of a reply naming a live node.
func liveEntry(out *fuse.EntryOut) {
	out.SetEntryTimeout(liveTimeout)
	out.SetAttrTimeout(liveTimeout)
}

// Getattr stats the live file (through the open handle f if any) and
// lets the kernel keep the result for liveTimeout.
func (n *Node) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	errno := n.LoopbackNode.Getattr(ctx, f, out)
	if errno == 0 {
		out.SetTimeout(liveTimeout)
	}
	return errno
}
