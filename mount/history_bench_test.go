package mount

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

// logStore builds, offline, a store whose live file notes.txt has revs
// revisions and snaps snapshots spread over them (each holding the
// revision of its moment), laid out as a mount leaves it.
func logStore(b *testing.B, revs, snaps int) string {
	b.Helper()
	dir := b.TempDir()
	ctx := context.Background()
	st, err := objstore.Open(dir, objstore.Config{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	f, err := st.NewFile("notes.txt")
	if err != nil {
		b.Fatal(err)
	}
	var prev index.RevID
	for r := range revs {
		e, err := st.Put(ctx, objstore.PutRequest{File: f, Data: []byte(fmt.Sprint("line one\nrevision ", r, "\n")), P1: prev})
		if err != nil {
			b.Fatal(err)
		}
		prev = e.ID()
		if (r+1)%(revs/snaps) != 0 {
			continue
		}
		tr := &index.Tree{Entries: []index.TreeEntry{{Name: "notes.txt", Mode: syscall.S_IFREG | 0o644, Nlink: 1, Rev: prev}}}
		enc, h, err := tr.Encode()
		if err != nil {
			b.Fatal(err)
		}
		req := objstore.SnapshotRequest{Name: fmt.Sprintf("snap%05d", r), Time: time.Now(), Trees: map[index.TreeHash][]byte{h: enc},
			Root: index.TreeEntry{Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Tree: h}}
		if _, err := st.CreateSnapshot(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	p := filepath.Join(dir, liveDir, "notes.txt")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("live"), 0o644); err != nil {
		b.Fatal(err)
	}
	id := fs.NewFileID()
	if err := unix.Setxattr(p, fs.XattrID, id[:], 0); err != nil {
		b.Fatal(err)
	}
	ids := binary.BigEndian.AppendUint64(append([]byte{}, id[:]...), uint64(f))
	if err := os.WriteFile(filepath.Join(dir, idsFile), ids, 0o600); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkLogRows is the mount's side of "deltafs log" (the rows of a
// file of 2,000 revisions, 200 snapshots holding them) on a read-only
// offline store: its allocations per call are what the mount's heap
// grows by between collections.
func BenchmarkLogRows(b *testing.B) {
	dir := logStore(b, 2000, 200)
	o, err := OpenOffline(dir, true, quiet())
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	ctx := context.Background()
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l, data, err := o.hist.logRows(ctx, Target{Path: "notes.txt"}, buf[:0])
		if err != nil || l.File == 0 {
			b.Fatal(l, err)
		}
		buf = data
	}
	b.ReportMetric(float64(len(buf)), "row-bytes")
}

// BenchmarkHistoryListing is "ls MOUNT/.history/notes.txt/" of a file of
// 10,000 revisions on a real mount: open, getdents64 to the end with one
// buffer, close. The allocations it reports (the whole process's, nearly
// all the mount's) are the garbage one listing adds to the mount's heap:
// what H1's RSS growth over 200 listings is made of (26 KB and 810
// allocations a listing when every listing sent its ~60 READDIR
// replies; about 2 KB and 52 allocations, the OPENDIR's, since the
// kernel's cache lists an unchanged history).
func BenchmarkHistoryListing(b *testing.B) {
	const revs = 10_000
	l := start(b, logStore(b, revs, 10))
	dir := filepath.Join(l.mnt, ".history", "notes.txt")
	buf := make([]byte, 32<<10)
	list := func() int {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
		n := 0
		for {
			k, err := unix.Getdents(fd, buf)
			if err != nil {
				b.Fatal(err)
			}
			if k == 0 {
				return n
			}
			for off := 0; off < k; off += int(binary.NativeEndian.Uint16(buf[off+16:])) {
				n++
			}
		}
	}
	if n := list(); n != revs { // the first listing reads the index
		b.Fatalf("%d entries, want %d", n, revs)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if n := list(); n != revs {
			b.Fatalf("%d entries, want %d", n, revs)
		}
	}
}
