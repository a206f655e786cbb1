package fs

import (
	"context"
	"strconv"
	"syscall"

	"github.com/deltafs/deltafs/index"
)

// XattrExclusiveBytes is the extended attribute of a snapshot's directory
// (MOUNTPOINT/.snapshots/NAME) whose value is, in decimal, the bytes only
// that snapshot holds: what deleting it would free (see
// objstore.SnapshotUsage). It is computed on demand, not stored, so it is
// not listed, as other file systems' computed attributes are not: a
// snapshot's own xattrs stay exactly as they were, and a copy of a
// snapshot with its attributes (cp --preserve=xattr, rsync -X) does not
// carry a stale figure away, nor fail copying it back into the mount,
// which refuses user.deltafs.* names.
const XattrExclusiveBytes = "user.deltafs.exclusive_bytes"

// SnapshotSizer is implemented by a Snapshots that can say what each
// snapshot alone holds.
type SnapshotSizer interface {
	ExclusiveBytes(ctx context.Context, id index.SnapshotID) (uint64, error)
}

// exclusiveXattr answers XattrExclusiveBytes on a snapshot's root; ok is
// false for any other attribute or node.
func (n *viewNode) exclusiveXattr(ctx context.Context, attr string, dest []byte) (sz uint32, errno syscall.Errno, ok bool) {
	if attr != XattrExclusiveBytes || !n.isSnapshotRoot() {
		return 0, 0, false
	}
	sizer, can := n.v.snaps.(SnapshotSizer)
	if !can {
		return 0, syscall.ENODATA, true
	}
	b, err := sizer.ExclusiveBytes(ctx, n.snap)
	if err != nil {
		return 0, snapErrno(n.v.log, "exclusive bytes", err), true
	}
	v := strconv.AppendUint(nil, b, 10)
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE, true
	}
	return uint32(copy(dest, v)), 0, true
}

// isSnapshotRoot reports whether n is a snapshot's directory in
// .snapshots.
func (n *viewNode) isSnapshotRoot() bool {
	_, parent := n.Parent()
	if parent == nil {
		return false
	}
	_, ok := parent.Operations().(*SnapshotsDir)
	return ok
}
