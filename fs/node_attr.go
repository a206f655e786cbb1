package fs

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Setattr changes attributes. A size change through an open handle is
// the handle's business; a truncate(2) by path is a content change of
// its own, reported at once unless a writer is open (then it joins that
// writer's session). The kernel keeps the attributes of the reply for
// liveTimeout.
//
// A size change first dirties the file and waits for the recorder
// (beforeResize); the change itself then holds the freeze (freeze.go),
// for the handle's Setattr too, which go-fuse's LoopbackNode calls.
func (n *Node) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	sz, hasSize := in.GetSize()
	before := int64(-1) // the size before a truncate(2) by path
	if hasSize {
		var errno syscall.Errno
		if before, errno = n.beforeResize(ctx, f, int64(sz)); errno != 0 {
			return errno
		}
	}
	n.fsys.hold()
	defer n.fsys.unhold()
	errno := n.setattr(ctx, f, in, out, before)
	if errno == 0 {
		out.SetTimeout(liveTimeout)
		n.sent.note(&out.Attr)
	}
	return errno
}

// beforeResize dirties n before a size change to size, through handle f
// or by path, and waits until the recorder has read n's changes reported
// before (see truncateOpened). For a change by path it returns the size
// the file had. A truncation through a handle to the size the file has
// is no change (see setattrOpen).
func (n *Node) beforeResize(ctx context.Context, f gofs.FileHandle, size int64) (int64, syscall.Errno) {
	if h, ok := f.(fdHolder); ok {
		if st := fstat(h.liveFd()); st != nil && st.Size == size {
			return -1, 0
		}
		return -1, n.dirtying(ctx)
	}
	var before syscall.Stat_t
	if err := syscall.Lstat(n.livePath(), &before); err != nil {
		return -1, n.fsys.errno("setattr", err)
	}
	if before.Size != size {
		n.dirtyingPath() // first: see truncateOpened
	}
	return before.Size, n.waitRecorded(ctx)
}

// setattr is Setattr under the freeze; before is the size a truncate(2)
// by path found, and a truncation to it changes no byte.
func (n *Node) setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut, before int64) syscall.Errno {
	defer n.touchSelf()
	defer n.attrsChanged()
	sz, hasSize := in.GetSize()
	_, isHandle := f.(fdHolder)
	switch {
	case isHandle:
		// the handle notes the size, or wraps the call itself (setattrOpen)
		return n.setattrLive(ctx, f, in, out)
	case !hasSize:
		return n.setattrMeta(ctx, f, in, out)
	}
	if errno := n.killPrivsFlagged(in, -1); errno != 0 {
		return errno
	}
	if before == int64(sz) { // no byte changes: see sessionSetattr
		return n.setattrMeta(ctx, f, in, out)
	}
	if errno := n.setattrLive(ctx, f, in, out); errno != 0 {
		return errno
	}
	if n.truncatedByPath(before, int64(sz)) {
		// the report gave the file its FileID after out was taken: the
		// xattr moved its ctime
		return n.getattrLive(ctx, nil, out)
	}
	return 0
}

// setattrMeta changes attributes by path with no byte of the file
// changing (see sessionSetattr).
func (n *Node) setattrMeta(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return n.sessionSetattr(out, func() syscall.Errno { return n.setattrLive(ctx, f, in, out) })
}

// sessionSetattr runs setattr, which changes no byte of the file (a
// chmod, utimens, or a truncation to the size the file has) but may move
// its mtime, by path or through a handle, keeping an open passthrough
// writer's change detection right (session.aroundSetattr): otherwise
// the moved mtime would be taken for a write, and a revision recorded
// with nothing changed.
func (n *Node) sessionSetattr(out *fuse.AttrOut, setattr func() syscall.Errno) syscall.Errno {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sess == nil {
		return setattr()
	}
	return n.sess.aroundSetattr(n.livePath(), out, setattr)
}

// truncatedByPath notes a truncate(2) from size old to size. It reports
// whether it gave the file a FileID (see newSession). A truncation to
// the size the file had is no change, with a writer open or not: the
// kernel may send a closed writer's release after the truncate(2) of
// `truncate -s` that followed it (setattr goes to sessionSetattr then).
func (n *Node) truncatedByPath(old, size int64) (assigned bool) {
	if old == size {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sess != nil {
		n.dirtyingLocked()
		n.sess.truncated(size)
		return false
	}
	fd, err := n.openSelfAs(syscall.O_RDONLY | syscall.O_NONBLOCK) // no symlink on the way (safe_ops.go)
	if err != nil {
		n.fsys.log.Warn("truncate: cannot open the live file to report it", "path", n.livePath(), "err", err)
		return false
	}
	defer syscall.Close(fd)
	s, assigned := newSession(fd, false, nil, FileID{})
	s.kept, s.changed = min(old, size), true
	s.whole, n.wholeNext = n.wholeNext, false // see session.ptInPlace
	c := s.report(fstat(fd), n.relPath(), false)
	n.fsys.attachContent(&c, fd)
	n.fsys.rec.Changed(c)
	n.reported = s.id
	return assigned
}

// Getxattr hides deltafs's own attributes.
//
// It answers security.capability of a file known to have none without
// asking the live file: the kernel asks for it at the first write of a
// new file and at each chown (to know whether there is a capability to
// drop), so an untar sent two such requests per file, each a lookup of
// the live path and a getxattr. A file is known to have none from its
// exclusive creation (Create with O_EXCL) until a Setxattr of it: a live
// file gains attributes only through Setxattr.
//
// An absent SELinux label is answered as absentXattr says.
func (n *Node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	n.fsys.xattrAsks.Add(1)
	if isOurXattr(attr) || attr == xattrCapability && n.noCap.Load() {
		return 0, syscall.ENODATA
	}
	var sz int
	errno := gofs.ToErrno(n.inDir(func(p string) (err error) {
		sz, err = unix.Lgetxattr(p, attr, dest)
		return err
	}))
	if errno == syscall.ENODATA {
		errno = absentXattr(attr)
	}
	return uint32(sz), errno
}

// xattrSELinux is the attribute holding a file's SELinux label.
const xattrSELinux = "security.selinux"

// absentXattr is the answer for an attribute attr a node has not:
// ENODATA, but EOPNOTSUPP for an SELinux label on a host without
// SELinux. ls -l (coreutils 9.1, through libselinux's lgetfilecon) asks
// every file it lists for its label, and no kernel cache keeps the
// answer (the kernel keeps ACLs with --allow-other only, see Options;
// with SELinux on, SELinux answers labels itself and these requests
// never come): ls -l of a directory of 50,000 files sent 50,000 GETXATTR
// round trips at every listing. ls takes EOPNOTSUPP for "this file
// system has no labels" and stops asking for the rest of the device, as
// it does on file systems without a security xattr handler (NFS without
// labels). A label a live file has is answered as ever (set through the
// mount, or kept from elsewhere), and setting one still works.
func absentXattr(attr string) syscall.Errno {
	if attr == xattrSELinux && !selinuxOn() {
		return syscall.EOPNOTSUPP
	}
	return syscall.ENODATA
}

// selinuxOn reports whether the host runs SELinux: its file system is
// mounted, or the kernel lists it among its active security modules.
// With SELinux on, the kernel may read a FUSE file's label from the
// server to label its inode (fs_use_xattr), and EOPNOTSUPP there would
// fail that: absent labels stay ENODATA.
var selinuxOn = sync.OnceValue(func() bool {
	if _, err := os.Stat("/sys/fs/selinux"); err == nil {
		return true
	}
	lsm, _ := os.ReadFile("/sys/kernel/security/lsm")
	return bytes.Contains(lsm, []byte("selinux"))
})

// xattrCapability is the attribute holding a file's capabilities.
const xattrCapability = "security.capability"

// Setxattr refuses deltafs's own attributes.
func (n *Node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if isOurXattr(attr) {
		return syscall.EPERM
	}
	if attr == xattrCapability {
		n.noCap.Store(false) // before the file has it: Getxattr asks the file from now on
	}
	n.fsys.hold()
	defer n.fsys.unhold()
	defer n.touchSelf()
	errno := gofs.ToErrno(n.inDir(func(p string) error { return unix.Lsetxattr(p, attr, data, int(flags)) }))
	n.aclChanged(attr, errno)
	return errno
}

// Removexattr refuses deltafs's own attributes.
func (n *Node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if isOurXattr(attr) {
		return syscall.EPERM
	}
	n.fsys.hold()
	defer n.fsys.unhold()
	defer n.touchSelf()
	errno := gofs.ToErrno(n.inDir(func(p string) error { return unix.Lremovexattr(p, attr) }))
	n.aclChanged(attr, errno)
	return errno
}

// aclChanged tells the kernel that n's attributes changed after a
// successful set or removal of its access ACL, which sets the mode's
// group bits (the mask; with a minimal ACL all of them): cp -a and mv
// set a copy's final mode that way. A kernel that handles ACLs (a mount
// with --allow-other, see Options) forgets the node's attributes itself;
// one that does not takes the ACL for an opaque xattr, marks only the
// ctime stale, and answered stat and ls from the mode it had cached (for
// liveTimeout).
func (n *Node) aclChanged(attr string, errno syscall.Errno) {
	if errno == 0 && attr == xattrACLAccess {
		_ = n.NotifyContent(-1, 0) // attributes only
	}
}

// xattrACLAccess is the xattr of a file's POSIX access ACL.
const xattrACLAccess = "system.posix_acl_access"

// Listxattr lists the live file's attributes but deltafs's own.
func (n *Node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	var buf []byte
	var sz int
	err := n.inDir(func(p string) (err error) {
		if sz, err = unix.Llistxattr(p, nil); err != nil {
			return err
		}
		buf = make([]byte, sz)
		sz, err = unix.Llistxattr(p, buf)
		return err
	})
	if err != nil {
		return 0, n.fsys.errno("listxattr", err)
	}
	list := listedTo(ctx, filterXattrs(buf[:sz]))
	if len(dest) == 0 {
		return uint32(len(list)), 0
	}
	if len(dest) < len(list) {
		return 0, syscall.ERANGE
	}
	return uint32(copy(dest, list)), 0
}

// filterXattrs drops deltafs's names from a NUL-separated list.
func filterXattrs(list []byte) []byte {
	return dropXattrs(list, isOurXattr)
}

// dropXattrs returns the NUL-separated list without the names drop
// reports, in a new slice.
func dropXattrs(list []byte, drop func(string) bool) []byte {
	out := list[:0:0]
	for len(list) > 0 {
		i := 0
		for i < len(list) && list[i] != 0 {
			i++
		}
		name := list[:i]
		list = list[min(i+1, len(list)):]
		if !drop(string(name)) {
			out = append(append(out, name...), 0)
		}
	}
	return out
}

// listedTo returns the xattr names of list the caller of ctx may see:
// trusted.* names only to root. The server reads every xattr of the live
// files (and a snapshot keeps them), as root; a local file system lists
// trusted.* to privileged callers only, and the kernel refuses their
// values to others itself, but not their names in a listing. The caller's
// capabilities do not reach the server: root stands for them.
func listedTo(ctx context.Context, list []byte) []byte {
	if caller, ok := fuse.FromContext(ctx); ok && caller.Uid == 0 {
		return list
	}
	return dropXattrs(list, func(name string) bool { return strings.HasPrefix(name, "trusted.") })
}

func isOurXattr(name string) bool {
	return len(name) >= len(xattrPrefix) && name[:len(xattrPrefix)] == xattrPrefix
}
