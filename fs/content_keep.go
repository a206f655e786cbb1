package fs

import (
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// maxKeptFds caps the descriptors opened for removed files (keepRemoved);
// past it, removing such a file waits until the recorder has read it.
const maxKeptFds = 4096

// refTable knows the pending Changes that reach their live file by
// reference only (no descriptor, see maxContentFds), by inode. A file's
// handle stops working once its last name is gone and nothing holds it
// open, so before a removal takes the last name of such a file,
// keepRemoved opens it for them: a file written, closed and deleted
// while the recorder is behind still gets its last revision.
type refTable struct {
	mu    sync.Mutex
	byIno map[uint64]map[*contentRef]struct{}
	kept  atomic.Int64 // descriptors opened by keepRemoved and not closed
}

func (t *refTable) add(ino uint64, r *contentRef) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byIno == nil {
		t.byIno = map[uint64]map[*contentRef]struct{}{}
	}
	set := t.byIno[ino]
	if set == nil {
		set = map[*contentRef]struct{}{}
		t.byIno[ino] = set
	}
	set[r] = struct{}{}
	r.ino, r.refs = ino, t
}

// drop forgets r and closes what keepRemoved opened for it, if unused.
func (t *refTable) drop(r *contentRef) {
	t.mu.Lock()
	if set := t.byIno[r.ino]; set != nil {
		delete(set, r)
		if len(set) == 0 {
			delete(t.byIno, r.ino)
		}
	}
	t.mu.Unlock()
	if f := r.kept.Swap(nil); f != nil {
		_ = f.Close()
	}
	if r.counted.Swap(false) {
		t.kept.Add(-1)
	}
}

// pending reports whether any Change holds only a reference to ino.
func (t *refTable) pending(ino uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byIno[ino]) > 0
}

// keepRemoved is called before path, the live file of inode ino and
// FileID id, loses its last name (unlink, or a rename over it). If
// pending Changes reach it by reference only, it opens the file for
// each of them; past maxKeptFds it waits instead until the recorder has
// read the file's reported changes, held ones included (ReleaseReader).
func (f *FS) keepRemoved(ctx context.Context, path string, ino uint64, id FileID) syscall.Errno {
	if ino == 0 || !f.refs.pending(ino) {
		return 0
	}
	if f.refs.kept.Load() >= maxKeptFds {
		// A change held back would be read after the name is gone:
		// have it read now.
		if rr, ok := f.rec.(ReleaseReader); ok {
			return f.errno("wait for recording", rr.ReleaseRead(ctx, id))
		}
		if rw, ok := f.rec.(ReadWaiter); ok {
			return f.errno("wait for recording", rw.WaitRead(ctx, id))
		}
		return f.errno("wait for recording", f.rec.Wait(ctx, id))
	}
	rel, inTree := strings.CutPrefix(path, f.live+"/")
	fd, err := withNoAtime(syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, func(flags int) (int, error) {
		if inTree {
			return f.openLive(rel, flags, 0) // no symlink on the way (safe_ops.go)
		}
		return syscall.Open(path, flags, 0)
	})
	if err != nil {
		f.log.Warn("cannot keep a removed file for its pending revision", "path", path, "err", err)
		return 0
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Ino != ino || !id.IsZero() && fdIDOnly(fd) != id {
		return 0 // another file now (a review: the inode number alone)
	}
	f.refs.mu.Lock()
	defer f.refs.mu.Unlock()
	for r := range f.refs.byIno[ino] {
		if r.kept.Load() != nil {
			continue
		}
		dup, err := syscall.Dup(fd)
		if err != nil {
			f.log.Warn("cannot keep a removed file for its pending revision", "path", path, "err", err)
			return 0
		}
		syscall.CloseOnExec(dup)
		r.kept.Store(os.NewFile(uintptr(dup), path))
		if !r.counted.Swap(true) {
			f.refs.kept.Add(1)
		}
	}
	return 0
}
