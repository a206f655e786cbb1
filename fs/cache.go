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

// dirStream is what go-fuse's loopback directory handle serves.
type dirStream interface {
	gofs.FileReaddirenter
	gofs.FileSeekdirer
	gofs.FileReleasedirer
	gofs.FileFsyncdirer
}

// liveDir is the handle of a live directory other than the root: the
// loopback's stream, whose READDIRPLUS sends a plain entry (no lookup,
// no lstat) for a child the kernel knows already. go-fuse holds a node
// for a name exactly as long as the kernel holds its inode, and the
// kernel keeps the entry and attributes for liveTimeout since it last
// heard of them: find, du and rm -rf after an untar, or git's walk of
// a tree it just checked out, would otherwise have every name looked up
// again. A child whose entry or attributes the kernel let go is looked
// up or stat'ed by itself, one request each, as in a plain READDIR.
type liveDir struct {
	dirStream
	n *Node
}

var _ = (gofs.FileLookuper)((*liveDir)(nil))

// Lookup declines (a plain entry) for a known child, else looks name up.
func (d *liveDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if d.n.GetChild(name) != nil {
		return nil, syscall.ENOENT
	}
	return d.n.Lookup(ctx, name, out)
}
