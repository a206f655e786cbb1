package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

// A history store: one file (histTarget) with many revisions among many
// other files with fewer, and snapshots taken along the way, built with
// objstore directly (a FUSE write per revision would take hours) and
// laid out as a mount leaves a store: live/ holding each file's current
// content with its live identity in the xattr user.deltafs.id, and
// live.ids mapping live identities to store files (24-byte records:
// 16-byte live id, 8-byte big-endian store FileID; see mount/storesink.go).

// histTarget is the file whose history is listed.
const histTarget = "notes.txt"

// histShape says what a history store holds.
type histShape struct {
	targetRevs int // revisions of histTarget
	others     int // other files, 100 to a directory
	otherRevs  int // revisions of each other file
	snaps      int // snapshots, spread evenly over the building
}

// histPutters is how many puts run at once: the store's group commit
// then makes one fsync serve many of them.
const histPutters = 64

// histBuilder builds a history store.
type histBuilder struct {
	st    *objstore.Store
	shape histShape
	fids  []index.FileID // [0] histTarget, then the others
	last  []index.RevID  // newest revision of each
	size  []uint64
	revs  []int            // revisions put so far, per file
	dirs  []index.TreeHash // the tree of each directory of others, as last encoded
	dirty []bool
	snaps int
}

// otherPath is the live path of other file i.
func otherPath(i int) string { return fmt.Sprintf("o%03d/f%03d", i/100, i%100) }

// histText is revision r of file i: a few hundred bytes of text with one
// line changed per revision, so that each revision is a small delta.
func histText(i, r int) []byte {
	var b strings.Builder
	lines := 12
	if i == 0 {
		lines = 60
	}
	for l := range lines {
		if l == r%lines {
			fmt.Fprintf(&b, "file %d line %d: revision %d\n", i, l, r)
		} else {
			fmt.Fprintf(&b, "file %d line %d: unchanged text of this line\n", i, l)
		}
	}
	return []byte(b.String())
}

// buildHistStore creates the store in dir; progress is called now and
// then with a line to log.
func buildHistStore(ctx context.Context, dir string, shape histShape, progress func(string, ...any)) error {
	st, err := objstore.Open(dir, objstore.Config{Create: true, Holder: "bench history store"})
	if err != nil {
		return err
	}
	defer st.Close()
	n := shape.others + 1
	b := &histBuilder{st: st, shape: shape, fids: make([]index.FileID, n), last: make([]index.RevID, n),
		size: make([]uint64, n), revs: make([]int, n), dirs: make([]index.TreeHash, (shape.others+99)/100), dirty: make([]bool, (shape.others+99)/100)}
	for i := range n {
		name := histTarget
		if i > 0 {
			name = otherPath(i - 1)
		}
		if b.fids[i], err = st.NewFile(name); err != nil {
			return err
		}
	}
	// Rounds: each gives every other file one revision, in chunks of files
	// with a snapshot after each chunk; the target's revisions are spread
	// over the chunks.
	chunks := max(shape.snaps/shape.otherRevs, 1)
	t0 := time.Now()
	for r := range shape.otherRevs {
		for c := range chunks {
			lo, hi := 1+c*shape.others/chunks, 1+(c+1)*shape.others/chunks
			step := r*chunks + c
			tlo, thi := step*shape.targetRevs/(shape.otherRevs*chunks), (step+1)*shape.targetRevs/(shape.otherRevs*chunks)
			if err := b.putChunk(ctx, lo, hi, thi-tlo); err != nil {
				return err
			}
			if b.snaps < shape.snaps {
				if err := b.snapshot(ctx); err != nil {
					return err
				}
			}
		}
		if r%10 == 9 {
			progress("history store %d files: round %d/%d, %d snapshots, %s", n, r+1, shape.otherRevs, b.snaps, time.Since(t0).Round(time.Second))
		}
	}
	return b.writeLive(filepath.Join(dir, "live"), filepath.Join(dir, "live.ids"))
}

// putChunk puts the next revision of others [lo, hi) and the next k
// revisions of the target, histPutters at a time.
func (b *histBuilder) putChunk(ctx context.Context, lo, hi, k int) error {
	work := make(chan int)
	errs := make(chan error, histPutters+1)
	var wg sync.WaitGroup
	for range histPutters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := b.put(ctx, i); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // the target's revisions go one after another
		defer wg.Done()
		for range k {
			if err := b.put(ctx, 0); err != nil {
				errs <- err
				return
			}
		}
	}()
	for i := lo; i < hi; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for i := lo; i < hi; i++ {
		b.dirty[(i-1)/100] = true
	}
	return <-errs
}

// put stores the next revision of file i (each file is put by one
// goroutine at a time).
func (b *histBuilder) put(ctx context.Context, i int) error {
	data := histText(i, b.revs[i])
	e, err := b.st.Put(ctx, objstore.PutRequest{File: b.fids[i], Data: data, P1: b.last[i]})
	if err != nil {
		return err
	}
	b.last[i], b.size[i] = e.ID(), uint64(len(data))
	b.revs[i]++
	return nil
}

// snapshot records a snapshot of the files as they are, re-encoding only
// the directories whose files changed since the previous one.
func (b *histBuilder) snapshot(ctx context.Context) error {
	now := time.Now().UnixNano()
	trees := map[index.TreeHash][]byte{}
	root := &index.Tree{}
	for d := range b.dirs {
		if b.dirty[d] || b.dirs[d].IsZero() {
			t := &index.Tree{}
			for i := d * 100; i < min((d+1)*100, b.shape.others); i++ {
				t.Entries = append(t.Entries, b.fileEntry(fmt.Sprintf("f%03d", i%100), i+1, now))
			}
			enc, h, err := t.Encode()
			if err != nil {
				return err
			}
			trees[h], b.dirs[d], b.dirty[d] = enc, h, false
		}
		root.Entries = append(root.Entries, index.TreeEntry{Name: fmt.Sprintf("o%03d", d), Mode: syscall.S_IFDIR | 0o755,
			Nlink: 2, Ino: uint64(1_000_000 + d), Mtime: now, Ctime: now, Tree: b.dirs[d]})
	}
	root.Entries = append(root.Entries, b.fileEntry(histTarget, 0, now))
	root.Sort()
	enc, h, err := root.Encode()
	if err != nil {
		return err
	}
	trees[h] = enc
	req := objstore.SnapshotRequest{Name: fmt.Sprintf("snap%05d", b.snaps), Time: time.Unix(0, now), Trees: trees,
		Root: index.TreeEntry{Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Ino: 1, Mtime: now, Ctime: now, Tree: h}}
	if _, err := b.st.CreateSnapshot(ctx, req); err != nil {
		return err
	}
	b.snaps++
	return nil
}

// fileEntry is file i's entry in a snapshot tree.
func (b *histBuilder) fileEntry(name string, i int, now int64) index.TreeEntry {
	return index.TreeEntry{Name: name, Mode: syscall.S_IFREG | 0o644, Nlink: 1, Ino: uint64(10 + i),
		Size: b.size[i], Mtime: now, Ctime: now, Rev: b.last[i]}
}

// writeLive writes each file's newest content into live/ with a fresh
// live identity, and the map from those identities to the store's.
func (b *histBuilder) writeLive(live, idsPath string) error {
	ids := make([]byte, 0, 24*len(b.fids))
	for i := range b.fids {
		rel := histTarget
		if i > 0 {
			rel = otherPath(i - 1)
		}
		p := filepath.Join(live, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, histText(i, b.revs[i]-1), 0o644); err != nil {
			return err
		}
		id := fs.NewFileID()
		if err := unix.Setxattr(p, fs.XattrID, id[:], 0); err != nil {
			return fmt.Errorf("%s: set live id: %w", p, err)
		}
		ids = binary.BigEndian.AppendUint64(append(ids, id[:]...), uint64(b.fids[i]))
	}
	return os.WriteFile(idsPath, ids, 0o600)
}
