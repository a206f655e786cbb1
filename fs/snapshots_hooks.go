package fs

import (
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Dirty tracking for snapshots: the live tree's operations tell the
// TreeBuilder (Config.Tree) which directories changed, so that a snapshot
// re-serialises only those (see TreeBuilder). Every operation that adds,
// removes or renames an entry touches its directory (and names the child,
// for hard links); every change of a node's attributes or content
// touches the directory holding it. Files open for writing change size
// and times with every write, which would cost a touch per write: the
// live tree lists them instead (Writers) and the builder treats them as
// touched.

// writing is the set of nodes with writable handles open.
type writing struct {
	mu    sync.Mutex
	nodes map[*Node]struct{}
}

// liveIno returns n's inode number in the live directory (go-fuse numbers
// the root 1).
func (n *Node) liveIno() uint64 {
	if n.isRoot() {
		return n.fsys.rootIno
	}
	return n.StableAttr().Ino
}

// touchChild marks directory n as changed in its entry for a child with
// live inode number ino (0 if unknown or gone).
func (n *Node) touchChild(ino uint64) {
	if t := n.fsys.tree; t != nil {
		t.Touch(Touch{Dir: n.liveIno(), Node: ino})
	}
}

// touchSelf marks the directory holding n (and, through the builder's
// record of hard links, any other directory holding it).
func (n *Node) touchSelf() {
	t := n.fsys.tree
	if t == nil {
		return
	}
	t.Touch(Touch{Dir: n.parentIno(), Node: n.liveIno()})
}

// parentIno returns the live inode number of n's parent, 0 for the root
// or a node without a name.
func (n *Node) parentIno() uint64 {
	if _, p := n.Parent(); p != nil {
		if pn, ok := p.Operations().(*Node); ok {
			return pn.liveIno()
		}
	}
	return 0
}

// childIno returns the live inode number of name in directory n, or 0.
func (n *Node) childIno(name string) uint64 {
	var st syscall.Stat_t
	if syscall.Lstat(n.childPath(name), &st) != nil {
		return 0
	}
	return st.Ino
}

// startedWriting and stoppedWriting keep the set of open writers, with
// n.mu held.
func (n *Node) startedWriting() {
	if n.fsys.tree == nil {
		return
	}
	w := &n.fsys.writers
	w.mu.Lock()
	w.nodes[n] = struct{}{}
	w.mu.Unlock()
}

// stoppedWriting marks the file's directory before it leaves the set: a
// snapshot reads the set and then takes the marks (mount's snapshotter,
// then TreeBuilder.Build), so a release running meanwhile is seen in
// one or the other.
func (n *Node) stoppedWriting() {
	if n.fsys.tree == nil {
		return
	}
	n.touchSelf()
	w := &n.fsys.writers
	w.mu.Lock()
	delete(w.nodes, n)
	w.mu.Unlock()
}

// Writers returns the files open for writing, as the TreeBuilder takes
// them: their sizes and times change with every write. A snapshot takes
// them under the freeze (Freeze), before the build takes the marks.
func (f *FS) Writers() []Touch {
	w := &f.writers
	w.mu.Lock()
	nodes := make([]*Node, 0, len(w.nodes))
	for n := range w.nodes {
		nodes = append(nodes, n)
	}
	w.mu.Unlock()
	out := make([]Touch, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, Touch{Dir: n.parentIno(), Node: n.liveIno()})
	}
	return out
}

// fill gives .snapshots its attributes for a lookup at the root.
func (d *SnapshotsDir) fill(a *fuse.Attr) {
	a.Mode = syscall.S_IFDIR | 0o755
	a.Nlink = 2
	a.Ino = snapshotsIno
}

// touchNewDir marks directory n (a new entry) and the new directory ino
// itself: its inode number may be a recycled one that the builder
// remembers with another directory's tree.
func (n *Node) touchNewDir(ino uint64) {
	if t := n.fsys.tree; t != nil {
		t.Touch(Touch{Dir: n.liveIno(), Node: ino})
		t.Touch(Touch{Dir: ino})
	}
}
