package fs

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// SnapshotsName is the reserved directory at the root of the mount.
const SnapshotsName = ".snapshots"

// Config configures a live tree.
type Config struct {
	// LiveDir is the plain directory holding the current content of
	// every file.
	LiveDir string
	// Recorder is told about changes; nil means NopRecorder.
	Recorder Recorder
	// Logger receives the log lines of failed operations; nil discards.
	Logger *slog.Logger
	// Passthrough lets read-only opens and Create use FUSE passthrough (kernel
	// reads straight from the live file). It needs root (or
	// CAP_SYS_ADMIN) and a kernel with CAP_PASSTHROUGH; go-fuse turns it
	// off by itself when registering a backing file fails.
	Passthrough bool
	// Snapshots serves .snapshots; nil leaves it an empty directory
	// that refuses entries.
	Snapshots Snapshots
	// Tree, if set, is told which directories change (see
	// snapshots_hooks.go).
	Tree *TreeBuilder
	// History serves the revisions listed in .history; nil shows every
	// file with no revision.
	History History
	// ReadSmallNew makes the report of a small new file carry its
	// content, read before the release returns (Change.Data), instead
	// of the file reopened for the recorder (see capture.go).
	ReadSmallNew bool
}

// FS is a live tree: a go-fuse node tree over Config.LiveDir.
type FS struct {
	live        string
	rec         Recorder
	log         *slog.Logger
	passthrough atomic.Bool
	loop        *gofs.LoopbackRoot
	root        *Node
	rootFd      int // O_PATH descriptor of the live directory
	dirFd       int // the live directory opened for reading: open_by_handle_at(2) refuses O_PATH
	rootIno     uint64
	snaps       Snapshots
	hist        History
	tree        *TreeBuilder
	writers     writing
	frozen      freeze        // held by changes, taken by snapshots (freeze.go)
	open        openWriters   // writable handles not released yet
	contentFds  atomic.Int64  // Changes holding an open descriptor (see maxContentFds)
	refs        refTable      // Changes holding a reference only, by inode (see keepRemoved)
	reports     atomic.Uint64 // Changes reported (Change.Report)
	quiet       bool          // rec takes no Removed and Linked events (QuietRecorder)
	unlinks     bool          // a quiet rec still takes Removed of regular files (UnlinkListener)
	readNew     bool          // Config.ReadSmallNew
	captured    atomic.Int64  // bytes of Change.Data not yet closed (see capture.go)
	closing     atomic.Int32  // writable handles closed but not released, all files (see history_wait.go)
	closedAt    atomic.Int64  // the latest FLUSH of a writable handle, Unix nanoseconds

	// serverReads counts reads served by this process for handles
	// meant for passthrough: zero when passthrough works.
	serverReads atomic.Int64
	// xattrAsks counts the GETXATTR requests of live nodes this process
	// answered: an ACL the kernel keeps (see Options) is not asked again.
	xattrAsks atomic.Int64
	// getattrs counts the GETATTR requests of live nodes this process
	// answered (see Options: who checks permissions).
	getattrs atomic.Int64
	// histPasses counts listings of a file's revisions served from their
	// first entry; the kernel's cache served the others (history_cache.go).
	histPasses atomic.Int64
}

// New checks cfg.LiveDir and returns the live tree over it.
func New(cfg Config) (*FS, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(cfg.LiveDir, &st); err != nil {
		return nil, fmt.Errorf("live directory %s: %w", cfg.LiveDir, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, fmt.Errorf("live directory %s: %w", cfg.LiveDir, syscall.ENOTDIR)
	}
	f := &FS{live: cfg.LiveDir, rec: cfg.Recorder, log: cfg.Logger, rootIno: st.Ino, snaps: cfg.Snapshots, hist: cfg.History, tree: cfg.Tree}
	f.writers.nodes = map[*Node]struct{}{}
	if f.tree != nil {
		f.tree.attachIDs(f.idGiven)
	}
	if f.rec == nil {
		f.rec = NopRecorder{}
	}
	f.readNew = cfg.ReadSmallNew
	if q, ok := f.rec.(QuietRecorder); ok {
		f.quiet = q.IgnoresRemovesAndLinks()
	}
	if u, ok := f.rec.(UnlinkListener); ok && f.quiet {
		f.unlinks = u.TakesUnlinks()
	}
	if f.log == nil {
		f.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f.passthrough.Store(cfg.Passthrough)
	fd, err := syscall.Open(cfg.LiveDir, unix.O_PATH|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("live directory %s: %w", cfg.LiveDir, err)
	}
	f.rootFd = fd
	if f.dirFd, err = syscall.Open(cfg.LiveDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("live directory %s: %w", cfg.LiveDir, err)
	}
	f.loop = &gofs.LoopbackRoot{Path: cfg.LiveDir, Dev: uint64(st.Dev), NewNode: f.newNode}
	f.root = f.newNode(f.loop, nil, "", &st).(*Node)
	f.loop.RootNode = f.root
	return f, nil
}

// Close releases the live directory; call it after unmounting.
func (f *FS) Close() error {
	_ = syscall.Close(f.dirFd)
	if err := syscall.Close(f.rootFd); err != nil {
		return fmt.Errorf("close live directory: %w", err)
	}
	return nil
}

// Root returns the root node to mount.
func (f *FS) Root() gofs.InodeEmbedder { return f.root }

// RootStableAttr is the root's gofs.Options.RootStableAttr: the live
// directory's inode number, which go-fuse's loopback numbering gives no
// other file (the same device's numbers pass unchanged), where go-fuse
// would report 0 (ls -id printed "?").
func (f *FS) RootStableAttr() *gofs.StableAttr { return &gofs.StableAttr{Ino: f.rootIno} }

// DisablePassthrough makes later read-only opens go through the server
// (the mount calls it when the kernel lacks CAP_PASSTHROUGH).
func (f *FS) DisablePassthrough() { f.passthrough.Store(false) }

// newNode makes the node of every live file and directory (go-fuse's
// loopback calls it on lookup and creation).
func (f *FS) newNode(_ *gofs.LoopbackRoot, _ *gofs.Inode, _ string, _ *syscall.Stat_t) gofs.InodeEmbedder {
	n := &Node{fsys: f}
	n.RootData = f.loop
	return n
}

// osFile wraps a descriptor; the name is for error messages only.
func osFile(fd int, name string) *os.File { return os.NewFile(uintptr(fd), name) }
