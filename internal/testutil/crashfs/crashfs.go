// Package crashfs is a FUSE file system that simulates a power cut: it
// keeps, beside the current state of every file and directory, the state
// a disk would still hold if the power went out now, and writes that
// durable state out as a real directory tree after a Crash.
//
// The kernel here has no device-mapper (dm-flakey, dm-log-writes), nbd
// or ublk, so a power cut cannot be simulated at the block level; a FUSE
// file system sees every write, fsync and directory fsync instead, which
// is what a power-cut model needs.
//
// # Model
//
// Strict (the default) is POSIX taken at its word:
//
//   - a regular file's content, size, mode and extended attributes become
//     durable at an fsync or fdatasync of the file (an msync reaches FUSE
//     as writes of the dirty pages followed by an FSYNC; a shared
//     mapping's writeback reaches it as WRITE, durable only at the next
//     fsync). Both take everything: the model does not tell fdatasync's
//     "data and size" from fsync's "and the rest", and it does not tear
//     writes: a write is all there or not at all (its last fsync's);
//   - a directory's entries (a create, mkdir, link, unlink, rmdir, or
//     either side of a rename) and its extended attributes become
//     durable only at an fsync of that directory (FSYNCDIR). A file
//     fsynced in a directory never fsynced since its creation is gone
//     after a crash; a rename whose two
//     directories were not fsynced reverts; a rename between two
//     directories of which only one was fsynced leaves the file under
//     both names or neither (each directory is durable on its own);
//   - a file never fsynced but named by a durable entry is empty (with the
//     mode it was created with): the worst a journaling file system with
//     delayed allocation leaves (Options.TornSeed keeps some unsynced
//     writes as well, torn at random);
//   - a new directory starts durable and empty; its name is durable at
//     its parent's fsync.
//
// Ext4Like is a laxer model of ext4 (data=ordered): its journal commits
// every metadata change so far at once, so an fsync of any file or
// directory makes every directory's entries durable, besides the fsynced
// file's data. A store that is safe under Strict is safe under Ext4Like;
// a store that forgets a directory fsync usually passes Ext4Like and
// fails Strict, which is the point of Strict.
//
// Crash freezes the durable state (a power cut at that instant) and makes
// every later change fail with EIO, so the process under test cannot
// acknowledge anything after the cut without the test seeing that it was
// not durable. Reads keep working, from the state the process saw:
// the store maps files (badger's tables and log), and a page fault on a
// FUSE connection that fails would be a SIGBUS that kills the test
// binary; aborting the connection is therefore not what Crash does.
// Materialize then writes the durable state into a real directory, where
// the store is opened again as after a reboot.
//
// Supported: regular files and directories, pread/pwrite, O_APPEND (the
// kernel passes the offset), truncate, fallocate (mode 0, KEEP_SIZE,
// PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE), shared mmap (the kernel's page cache:
// no direct_io), flock and fcntl locks (kept by the kernel: the mount does
// not take them over), O_DIRECT (unless Options.RefuseDirectIO, which
// refuses such opens with EINVAL as some file systems do), extended
// attributes, rename (with RENAME_NOREPLACE and RENAME_EXCHANGE), hard
// links, statfs (a large free space). Not supported: symlinks, device
// nodes, times (they are reported, not kept durable).
//
// Current state is kept in memory, in pages of 64 KiB, so that an fsync
// copies only the pages written since the last one.
package crashfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Model is when directory entries become durable.
type Model int

const (
	// Strict: a directory's entries at an fsync of that directory.
	Strict Model = iota
	// Ext4Like: every directory's entries at any fsync.
	Ext4Like
)

// Options configure Mount.
type Options struct {
	Model Model
	// RefuseDirectIO fails opens with O_DIRECT (EINVAL), as a file system
	// without direct I/O does.
	RefuseDirectIO bool
	// From, if set, is a directory whose tree the file system starts
	// with, all of it durable (a disk after a reboot; Materialize's
	// output, to cut the power again during recovery). Regular files
	// and directories only; hard links stay links; user extended
	// attributes are kept, of files and directories.
	From string
	// TornSeed, if not zero, tears writes at a crash: some of what was
	// written since a file's last fsync is durable too, chosen at random
	// from this seed (see fsys.tear). The strict and Ext4Like models
	// keep none of it.
	TornSeed uint64
	// Debug logs every FUSE request.
	Debug bool
}

const pageSize = 64 << 10

type page = []byte

// obj is one inode: a regular file or a directory.
type obj struct {
	ino   uint64
	dir   bool
	mode  uint32 // permission bits
	nlink int    // current names
	mtime time.Time

	// regular file, current
	size  int64
	pages []page // nil page: zeros
	dirty map[int]bool
	cut   int               // pages from here on were truncated away since the last sync; -1 none
	xattr map[string][]byte // a file's or a directory's

	// regular file, durable
	dsize  int64
	dpages []page
	dmode  uint32
	dxattr map[string][]byte

	// directory (its durable extended attributes are dxattr too, made
	// durable at its fsync with its entries)
	ents  map[string]*obj
	dents map[string]*obj
}

// Stats count what the file system was asked to do.
type Stats struct {
	Fsyncs, DirFsyncs, Writes, Renames int
	// TornSectors counts the unsynced sectors a crash kept
	// (Options.TornSeed), TornSizes the files whose unsynced growth it
	// kept.
	TornSectors, TornSizes int
}

// fsys is the file system, served in a child process (see serve.go).
type fsys struct {
	dir    string
	server *fuse.Server
	opt    Options

	mu      sync.Mutex
	crashed bool
	nextIno uint64
	root    *obj
	dirs    map[*obj]bool // every directory ever made (Ext4Like syncs them all)
	stats   Stats
}

// New returns an unmounted file system (see Mount); its root directory
// is durable and empty.
func newFS(opt Options) *fsys {
	f := &fsys{opt: opt, nextIno: 2, dirs: map[*obj]bool{}}
	f.root = f.newDir(0o755)
	f.root.ino = 1
	f.root.nlink = 1
	return f
}

func (f *fsys) newDir(mode uint32) *obj {
	o := &obj{ino: f.nextIno, dir: true, mode: mode & 0o7777, ents: map[string]*obj{}, dents: map[string]*obj{}, mtime: time.Now()}
	f.nextIno++
	f.dirs[o] = true
	return o
}

func (f *fsys) newFile(mode uint32) *obj {
	o := &obj{ino: f.nextIno, mode: mode & 0o7777, dmode: mode & 0o7777, dirty: map[int]bool{}, cut: -1, mtime: time.Now()}
	f.nextIno++
	return o
}

// Materialize writes the durable state into dir (which must exist and be
// empty) as a real directory tree: what a reboot after Crash would show.
// It may be called without Crash too (the durable state of a live file
// system).
func (f *fsys) materializeAll(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	written := map[*obj]string{}
	return f.materialize(f.root, dir, written, map[*obj]bool{f.root: true})
}

func (f *fsys) materialize(d *obj, path string, written map[*obj]string, onPath map[*obj]bool) error {
	names := make([]string, 0, len(d.dents))
	for name := range d.dents {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		o, p := d.dents[name], filepath.Join(path, name)
		if o.dir {
			if onPath[o] || written[o] != "" {
				// A directory durable under two names (a rename
				// between directories, each fsynced at a different
				// time) is written once; a loop is cut.
				continue
			}
			if err := os.Mkdir(p, os.FileMode(o.mode&0o777)|0o700); err != nil {
				return err
			}
			written[o] = p
			onPath[o] = true
			if err := f.materialize(o, p, written, onPath); err != nil {
				return err
			}
			delete(onPath, o)
			for name, v := range o.dxattr {
				if err := unix.Setxattr(p, name, v, 0); err != nil {
					return err
				}
			}
			if err := os.Chmod(p, os.FileMode(o.mode&0o777)); err != nil {
				return err
			}
			continue
		}
		if first, ok := written[o]; ok {
			if err := os.Link(first, p); err != nil {
				return err
			}
			continue
		}
		if err := writeDurable(o, p); err != nil {
			return err
		}
		written[o] = p
	}
	return nil
}

func writeDurable(o *obj, p string) error {
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	for i, pg := range o.dpages {
		if pg == nil {
			continue
		}
		n := min(int64(len(pg)), o.dsize-int64(i)*pageSize)
		if n <= 0 {
			break
		}
		if _, err := out.WriteAt(pg[:n], int64(i)*pageSize); err != nil {
			out.Close()
			return err
		}
	}
	err = out.Truncate(o.dsize)
	for name, v := range o.dxattr {
		if err == nil {
			err = unix.Fsetxattr(int(out.Fd()), name, v, 0)
		}
	}
	if err == nil {
		err = out.Chmod(os.FileMode(o.dmode & 0o777))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// load reads the tree under dir into d, current and durable.
func (f *fsys) load(d *obj, dir string, inos map[uint64]*obj) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		var o *obj
		switch {
		case fi.IsDir():
			o = f.newDir(uint32(fi.Mode().Perm()))
			if o.xattr, err = loadXattrs(p); err != nil {
				return err
			}
			if err := f.load(o, p, inos); err != nil {
				return err
			}
		case !fi.Mode().IsRegular():
			return fmt.Errorf("crashfs: load %s: not a regular file or directory", p)
		case inos[st.Ino] != nil:
			o = inos[st.Ino]
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			o = f.newFile(uint32(fi.Mode().Perm()))
			o.writeAt(b, 0)
			o.resize(fi.Size())
			if o.xattr, err = loadXattrs(p); err != nil {
				return err
			}
			f.syncFile(o)
			inos[st.Ino] = o
		}
		o.nlink++
		d.ents[e.Name()] = o
	}
	f.syncDir(d)
	return nil
}

// loadXattrs reads the user extended attributes of the file or
// directory at p (a store may keep identities there: deltafs's live
// files do). Other namespaces (security.*, a host's labels) are not the
// store's and are left out.
func loadXattrs(p string) (map[string][]byte, error) {
	sz, err := unix.Llistxattr(p, nil)
	if err != nil || sz == 0 {
		return nil, err
	}
	buf := make([]byte, sz)
	if sz, err = unix.Llistxattr(p, buf); err != nil {
		return nil, err
	}
	m := map[string][]byte{}
	for _, name := range strings.Split(strings.TrimSuffix(string(buf[:sz]), "\x00"), "\x00") {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		n, err := unix.Lgetxattr(p, name, nil)
		if err != nil {
			return nil, err
		}
		v := make([]byte, n)
		if n, err = unix.Lgetxattr(p, name, v); err != nil {
			return nil, err
		}
		m[name] = v[:n]
	}
	return m, nil
}

// syncFile makes o's current content durable.
func (f *fsys) syncFile(o *obj) {
	f.stats.Fsyncs++
	n := len(o.pages)
	old := o.dpages
	d := make([]page, n)
	for i := range n {
		switch {
		case o.dirty[i] || i >= len(old) || o.cut >= 0 && i >= o.cut:
			if o.pages[i] != nil {
				d[i] = slices.Clone(o.pages[i])
			}
		default:
			d[i] = old[i]
		}
	}
	o.dpages, o.dsize, o.dmode = d, o.size, o.mode
	o.dxattr = cloneXattr(o.xattr)
	clear(o.dirty)
	o.cut = -1
}

// syncDir makes d's current entries and extended attributes durable.
func (f *fsys) syncDir(d *obj) {
	d.dents = maps(d.ents)
	d.dxattr = cloneXattr(d.xattr)
}

func maps(m map[string]*obj) map[string]*obj {
	c := make(map[string]*obj, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func cloneXattr(m map[string][]byte) map[string][]byte {
	if len(m) == 0 {
		return nil
	}
	c := make(map[string][]byte, len(m))
	for k, v := range m {
		c[k] = slices.Clone(v)
	}
	return c
}

// writeAt writes data at off into o's current content.
func (o *obj) writeAt(data []byte, off int64) {
	end := off + int64(len(data))
	if end > o.size {
		o.resize(end)
	}
	for len(data) > 0 {
		i := int(off / pageSize)
		in := int(off % pageSize)
		if o.pages[i] == nil {
			o.pages[i] = make([]byte, pageSize)
		}
		k := copy(o.pages[i][in:], data)
		o.dirty[i] = true
		data, off = data[k:], off+int64(k)
	}
}

// zero zeroes [off, off+n) within the current size.
func (o *obj) zero(off, n int64) {
	end := min(off+n, o.size)
	for off < end {
		i := int(off / pageSize)
		in := off % pageSize
		k := min(pageSize-in, end-off)
		if o.pages[i] != nil {
			clear(o.pages[i][in : in+k])
			o.dirty[i] = true
		}
		off += k
	}
}

// resize sets the size, zeroing what a shrink cuts off.
func (o *obj) resize(size int64) {
	n := int((size + pageSize - 1) / pageSize)
	if size < o.size {
		// zero the tail of the last page kept, drop the rest
		if in := size % pageSize; in != 0 && o.pages[n-1] != nil {
			clear(o.pages[n-1][in:])
			o.dirty[n-1] = true
		}
		for i := n; i < len(o.pages); i++ {
			o.pages[i] = nil
		}
		if o.cut < 0 || n < o.cut {
			o.cut = n
		}
	}
	if n <= len(o.pages) {
		o.pages = o.pages[:n]
	} else {
		o.pages = append(o.pages, make([]page, n-len(o.pages))...)
	}
	o.size = size
	o.mtime = time.Now()
}

func (o *obj) readAt(dest []byte, off int64) int {
	if off >= o.size {
		return 0
	}
	n := int(min(int64(len(dest)), o.size-off))
	dest = dest[:n]
	for len(dest) > 0 {
		i := int(off / pageSize)
		in := int(off % pageSize)
		var k int
		if o.pages[i] == nil {
			k = min(len(dest), pageSize-in)
			clear(dest[:k])
		} else {
			k = copy(dest, o.pages[i][in:])
		}
		dest, off = dest[k:], off+int64(k)
	}
	return n
}

func (o *obj) fillAttr(out *fuse.Attr) {
	out.Ino = o.ino
	if o.dir {
		out.Mode = syscall.S_IFDIR | o.mode
		out.Nlink = uint32(2)
		out.Size = 4096
	} else {
		out.Mode = syscall.S_IFREG | o.mode
		out.Nlink = uint32(max(o.nlink, 0))
		out.Size = uint64(o.size)
		out.Blocks = (uint64(o.size) + 511) / 512
	}
	out.Blksize = 4096
	out.SetTimes(nil, &o.mtime, &o.mtime)
}
