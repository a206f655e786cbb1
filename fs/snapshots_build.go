package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"github.com/deltafs/deltafs/index"
	"golang.org/x/sys/unix"
)

// Revisions gives the content of live regular files as stored revisions,
// for snapshots. The mount implements it over its recorder and store.
type Revisions interface {
	// Revision returns the revision holding the current content of the
	// live regular file at path (absolute), whose FileID is id (zero if
	// it has none: it may give it one, see checkIDGiven) and whose size
	// is size, and the size of that content, which the tree entry
	// records: it reads no more than size bytes (a file being appended
	// to grows meanwhile), fewer if it shrank. It may record the content
	// now when no revision holds it; an empty file may give the null
	// RevID. A file too large to record gives the null RevID and its
	// size: the snapshot lists it, and an open of it fails (EFBIG).
	// If the file was removed, or replaced by another node, since the
	// build's stat of it, the error matches ErrVanished.
	Revision(ctx context.Context, id FileID, path string, size int64) (index.RevID, int64, error)
}

// Touch says that directory Dir must be serialised again at the next
// snapshot because an entry of it was added, removed or renamed, or the
// content or attributes of its child Node changed (Node may be 0).
type Touch struct {
	Dir, Node uint64 // live inode numbers
}

// TreeBuilder turns the live directory into snapshot trees, serialising
// only the directories that changed since the last snapshot it built.
//
// Dirty tracking: the live tree calls Touch after every operation that
// changes a directory's listing or a child's content or attributes (and
// marks a new directory itself, so that a recycled inode number never
// reuses a stale tree). At a build, the marked directories and their
// ancestors (found through the parent of each directory as of the last
// build: a directory moved since then was marked in its new parent too,
// and that parent's chain covers it) are serialised again; every other
// directory keeps its tree hash. A file with several links marks every
// directory that held it at the last build, since its link count and
// ctime show in each. Files open for writing are passed to Build, whose
// sizes and times change without a Touch per write.
//
// A mounted live tree's snapshot freezes it (FS.Freeze) before it calls
// Build and takes the writers, and thaws it in commit, before it stores
// the result: Build takes the marks first, so that the build and the
// marks left for the next one split the changes at the freeze.
//
// The first build of a TreeBuilder walks the whole tree: the cache of
// directory hashes lives in memory, so the first snapshot after a mount
// costs a full walk.
type TreeBuilder struct {
	live string

	mu    sync.Mutex // guards the marks
	dirty map[uint64]struct{}
	nodes map[uint64]struct{}

	build sync.Mutex // one build at a time; guards what follows
	cache map[uint64]cachedDir
	links map[uint64][]uint64 // multi-link file inode -> directories holding it
	root  uint64
	// recent holds trees the last builds encoded, decoded, by hash
	// (see keepRecent): the directories on the way to a change are
	// serialised again at every snapshot, and read their previous tree
	// from here rather than from the store.
	recent map[index.TreeHash]*index.Tree

	idGiven func(rel string) // see attachIDs; guarded by mu

	// testAfterStat, in tests, is called with an entry's path relative
	// to the live tree right after the build statted it.
	testAfterStat func(rel string)
}

// cachedDir is a directory as serialised by the last committed build.
type cachedDir struct {
	hash   index.TreeHash
	parent uint64
	birth  int64 // btime in ns, 0 if unknown: guards against recycled inodes
}

// NewTreeBuilder returns a builder over the live directory.
func NewTreeBuilder(liveDir string) *TreeBuilder {
	return &TreeBuilder{live: liveDir, dirty: map[uint64]struct{}{}, nodes: map[uint64]struct{}{},
		cache: map[uint64]cachedDir{}, links: map[uint64][]uint64{}}
}

// Touch marks what t names.
func (b *TreeBuilder) Touch(t Touch) {
	b.mu.Lock()
	if t.Dir != 0 {
		b.dirty[t.Dir] = struct{}{}
	}
	if t.Node != 0 {
		b.nodes[t.Node] = struct{}{}
	}
	b.mu.Unlock()
}

// BuildStats says what a build did.
type BuildStats struct {
	Serialised int // directories read and encoded again
	Reused     int // unchanged directories whose tree was kept
	Entries    int // entries statted
	Kept       int // of those, unchanged entries taken from the previous tree
	Recent     int // previous trees read from the last build's, not the store
	Listed     int // directories serialised again whose names came from getdents
}

// Built is a snapshot tree ready to be stored.
type Built struct {
	Root  index.TreeEntry
	Trees map[index.TreeHash][]byte // trees encoded by this build
	// Decoded holds every tree of Trees as a Tree, and the previous
	// trees the build read, by hash: a commit comparing this snapshot
	// with the previous one reads them here instead of decoding them.
	// The trees are shared: read them, never modify them.
	Decoded map[index.TreeHash]*index.Tree
	Stats   BuildStats
}

// Build serialises the changed directories of the live tree and calls
// commit with the result; only if commit succeeds does the builder adopt
// it as the base of the next build. Marks made while it runs are kept for
// the next build.
func (b *TreeBuilder) Build(ctx context.Context, revs Revisions, writers []Touch, commit func(*Built) error) error {
	b.build.Lock()
	defer b.build.Unlock()
	dirty, nodes := b.takeMarks()
	for _, w := range writers {
		dirty[w.Dir], nodes[w.Node] = struct{}{}, struct{}{}
	}
	need := b.needs(dirty, nodes) // adds to dirty the directories of marked links
	w := &walk{b: b, ctx: ctx, revs: revs, needs: need, dirty: dirty, marked: nodes,
		cache: map[uint64]cachedDir{}, links: map[uint64][]uint64{}, out: &Built{Trees: map[index.TreeHash][]byte{}, Decoded: map[index.TreeHash]*index.Tree{}}}
	err := w.buildRoot()
	if err == nil {
		err = commit(w.out)
	}
	if err != nil {
		b.restoreMarks(dirty, nodes)
		return err
	}
	b.adopt(w)
	return nil
}

func (b *TreeBuilder) takeMarks() (dirty, nodes map[uint64]struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	dirty, nodes = b.dirty, b.nodes
	b.dirty, b.nodes = map[uint64]struct{}{}, map[uint64]struct{}{}
	return dirty, nodes
}

func (b *TreeBuilder) restoreMarks(dirty, nodes map[uint64]struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range dirty {
		b.dirty[k] = struct{}{}
	}
	for k := range nodes {
		b.nodes[k] = struct{}{}
	}
}

// needs returns the directories to serialise: the marked ones, those
// holding a marked multi-link file, and all their ancestors.
func (b *TreeBuilder) needs(dirty, nodes map[uint64]struct{}) map[uint64]bool {
	need := map[uint64]bool{}
	for n := range nodes {
		for _, d := range b.links[n] {
			dirty[d] = struct{}{}
		}
	}
	for d := range dirty {
		for d != 0 && !need[d] {
			need[d] = true
			d = b.cache[d].parent
		}
	}
	return need
}

// adopt makes w's directories the cache of the next build.
func (b *TreeBuilder) adopt(w *walk) {
	for ino, c := range w.cache {
		b.cache[ino] = c
	}
	for ino, dirs := range w.links {
		// Union: a directory this build kept unchanged may hold the
		// file too. Stale extras only cost an extra serialisation.
		for _, d := range dirs {
			if !slices.Contains(b.links[ino], d) {
				b.links[ino] = append(b.links[ino], d)
			}
		}
	}
	b.root = w.root
	b.keepRecent(w.out)
}

// walk is one build.
type walk struct {
	b     *TreeBuilder
	ctx   context.Context
	revs  Revisions
	needs map[uint64]bool
	dirty map[uint64]struct{} // the directories marked: their listings changed
	// marked holds the nodes touched since the last build (and the open
	// writers): their entries are described afresh, never kept.
	marked map[uint64]struct{}
	cache  map[uint64]cachedDir // directories seen by this build
	links  map[uint64][]uint64  // multi-link files seen by this build
	root   uint64
	out    *Built
}

func (w *walk) buildRoot() error {
	var x unix.Statx_t
	if err := statx(w.b.live, &x); err != nil {
		return fmt.Errorf("snapshot: live directory: %w", err)
	}
	e := entryOf("", &x)
	w.root = x.Ino
	if err := w.xattrs(w.b.live, &e); err != nil {
		return err
	}
	h, err := w.dir("", x.Ino, 0, birth(&x))
	if err != nil {
		return err
	}
	e.Tree = h
	w.out.Root = e
	return nil
}

// dir returns the tree hash of the directory at rel, serialising it if it
// changed.
func (w *walk) dir(rel string, ino, parent uint64, born int64) (index.TreeHash, error) {
	if err := w.ctx.Err(); err != nil {
		return index.TreeHash{}, err
	}
	c, cached := w.b.cache[ino]
	cached = cached && c.birth == born
	if cached && !w.needs[ino] {
		if c.parent != parent {
			c.parent = parent
			w.cache[ino] = c
		}
		w.out.Stats.Reused++
		return c.hash, nil
	}
	var prev *index.Tree
	if cached {
		prev = w.prevTree(c.hash)
	}
	ents, err := w.names(rel, ino, prev)
	if err != nil {
		return index.TreeHash{}, err
	}
	cur := prevCursor{t: prev}
	t := &index.Tree{Entries: make([]index.TreeEntry, 0, len(ents))}
	for _, d := range ents {
		name := d.name
		if rel == "" && (name == SnapshotsName || name == HistoryName) {
			continue // never inside a snapshot
		}
		o := cur.find(name)
		if e, ok := w.unstatted(o, d, ino); ok {
			t.Entries = append(t.Entries, e)
			continue
		}
		e, ok, err := w.entry(rel, name, ino, o)
		if err != nil {
			return index.TreeHash{}, err
		}
		if ok {
			t.Entries = append(t.Entries, e)
		}
	}
	enc, h, err := t.Encode() // refuses entries out of order
	if err != nil {
		return index.TreeHash{}, fmt.Errorf("snapshot: /%s: %w", rel, err)
	}
	w.out.Trees[h], w.out.Decoded[h] = enc, t
	w.out.Stats.Serialised++
	w.cache[ino] = cachedDir{hash: h, parent: parent, birth: born}
	return h, nil
}

// entry describes rel/name; ok is false if it vanished meanwhile. prev is
// its entry in the directory's previous tree, nil if none or unknown.
//
// A node removed or replaced between the directory's listing and the
// system calls that describe it (its stat, xattrs, link target, listing,
// content: see ErrVanished) is described again from a fresh stat, as if
// the snapshot had reached it a moment later; one whose name no longer
// exists is left out. Either way its directory is marked for the next
// build, whose listing of it must not be this build's.
func (w *walk) entry(rel, name string, dirIno uint64, prev *index.TreeEntry) (index.TreeEntry, bool, error) {
	for try := 1; ; try++ {
		e, ok, err := w.describe(rel, name, dirIno, prev)
		if err == nil && ok {
			return e, true, nil
		}
		if err != nil && !errors.Is(err, ErrVanished) {
			return e, false, err
		}
		w.b.Touch(Touch{Dir: dirIno})
		if !ok && err == nil || try == vanishedTries {
			return index.TreeEntry{}, false, nil
		}
	}
}

// vanishedTries bounds how often entry describes a node replaced under
// it again: a name replaced at every try (a tight rename loop) is left
// out rather than holding the snapshot.
const vanishedTries = 3

// ErrVanished marks the failure of a system call on a live node that
// was removed or replaced meanwhile (ENOENT, ESTALE, ENOTDIR, or a node
// of another type than the stat found): a Revisions returns it when the
// file it must read is gone, and the build then leaves the entry out or
// describes it again (see walk.entry).
var ErrVanished = errors.New("vanished during the snapshot")

// gone marks err as ErrVanished if it says that the live node it was
// about no longer exists under its name (or is no longer a directory).
func gone(err error) error {
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESTALE) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: %w", ErrVanished, err)
	}
	return err
}

// describe is one try of entry; ok is false, with no error, if the name
// no longer exists.
func (w *walk) describe(rel, name string, dirIno uint64, prev *index.TreeEntry) (index.TreeEntry, bool, error) {
	path := filepath.Join(w.b.live, rel, name)
	var x unix.Statx_t
	if err := statx(path, &x); errors.Is(gone(err), ErrVanished) {
		return index.TreeEntry{}, false, nil
	} else if err != nil {
		return index.TreeEntry{}, false, fmt.Errorf("snapshot: stat /%s: %w", filepath.Join(rel, name), err)
	}
	if w.b.testAfterStat != nil {
		w.b.testAfterStat(filepath.Join(rel, name))
	}
	w.out.Stats.Entries++
	e := entryOf(name, &x)
	if w.keep(prev, &e) {
		return w.kept(rel, dirIno, &x, e)
	}
	if err := w.xattrs(path, &e); err != nil {
		return e, false, err
	}
	var err error
	switch {
	case e.IsDir():
		e.Tree, err = w.dir(filepath.Join(rel, name), x.Ino, dirIno, birth(&x))
	case e.IsSymlink():
		e.Target, err = readlink(path)
	case e.IsRegular():
		if x.Nlink > 1 {
			w.links[x.Ino] = append(w.links[x.Ino], dirIno)
		}
		id := readID(path)
		var size int64
		e.Rev, size, err = w.revs.Revision(w.ctx, id, path, int64(x.Size))
		e.Size = uint64(size)
		if id.IsZero() { // given one even if the revision then failed
			w.b.checkIDGiven(path, filepath.Join(rel, name))
		}
	}
	if err != nil {
		return e, false, fmt.Errorf("snapshot: /%s: %w", filepath.Join(rel, name), err)
	}
	return e, true, nil
}

// readlink is os.Readlink of a node the stat found a symlink: EINVAL
// says it was replaced by another type of node meanwhile.
func readlink(path string) (string, error) {
	target, err := os.Readlink(path)
	if errors.Is(err, syscall.EINVAL) {
		return "", fmt.Errorf("%w: %w", ErrVanished, err)
	}
	return target, gone(err)
}

func statx(path string, x *unix.Statx_t) error {
	return unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS|unix.STATX_BTIME, x)
}

func birth(x *unix.Statx_t) int64 {
	if x.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return x.Btime.Sec*1e9 + int64(x.Btime.Nsec)
}

func entryOf(name string, x *unix.Statx_t) index.TreeEntry {
	ns := func(t unix.StatxTimestamp) int64 { return t.Sec*1e9 + int64(t.Nsec) }
	return index.TreeEntry{
		Name: name, Mode: uint32(x.Mode), UID: x.Uid, GID: x.Gid, Nlink: x.Nlink, Ino: x.Ino,
		Rdev: unix.Mkdev(x.Rdev_major, x.Rdev_minor), Size: x.Size,
		Atime: ns(x.Atime), Mtime: ns(x.Mtime), Ctime: ns(x.Ctime),
	}
}
