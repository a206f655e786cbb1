package objstore

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/deltafs/deltafs/index"
	"golang.org/x/sys/unix"
	"pgregory.net/rapid"
)

// plainReader hides a file's type: the stream can neither map it nor
// ask it for holes, and reads every chunk.
type plainReader struct{ io.ReaderAt }

// checkSparsePut puts src (whose text is want) streamed into s and
// checks that it stored at most limit bytes, reads back byte for byte,
// hashes as its text and verifies; fast says whether chunks may be
// stored raw to save time (FlagFastZstd).
func checkSparsePut(t testing.TB, s *Store, name string, src io.ReaderAt, want []byte, limit uint32, fast bool) index.Entry {
	t.Helper()
	e := putFrom(t, s, name, src, int64(len(want)), PutRequest{})
	if e.Kind != index.KindFull || e.Flags&index.FlagChunked == 0 || e.Stored > limit ||
		!fast && e.Flags&index.FlagFastZstd != 0 {
		t.Fatalf("%s: kind %v flags %v, %d bytes stored for %d (want at most %d)", name, e.Kind, e.Flags, e.Stored, e.Size, limit)
	}
	if e.Hash != s.cfg.hash(want) {
		t.Fatalf("%s: hash %x, want the text's %x", name, e.Hash, s.cfg.hash(want))
	}
	if !bytes.Equal(mustGet(t, s, e.ID()), want) {
		t.Fatalf("%s: reads back different bytes", name)
	}
	return e
}

// TestPutFromSparse: a 256 MiB sparse file with three random 4 KiB
// blocks (truncate -s, then dd conv=notrunc) is stored in KiBs whether
// encoders get to its chunks or the appender takes every one (encoders
// -1: before, 268 MB raw), as a file or as a plain reader; it reads back
// exactly, hashes as its text, and verifies after a reopen.
func TestPutFromSparse(t *testing.T) {
	const size = 256 << 20
	blocks := []int64{size / 7, size / 2, size - 3<<12}
	src := sparseFile(t, filepath.Join(t.TempDir(), "sparse"), size, blocks)
	want, err := ReadAll(src, size)
	if err != nil {
		t.Fatal(err)
	}
	for _, enc := range []int{-1, 0} {
		s, dir := openNew(t, Config{encoders: enc})
		e1 := checkSparsePut(t, s, "file", src, want, 64<<10, false)
		// same text again would be a dedup: another file of it, changed
		want[0] = 1
		e2 := checkSparsePut(t, s, "plain", plainReader{bytes.NewReader(want)}, want, 64<<10, false)
		want[0] = 0
		verifyClean(t, s)
		s.Close()
		s, err := Open(dir, Config{CacheBytes: 1, LatestBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mustGet(t, s, e1.ID()), want) {
			t.Fatalf("encoders %d: sparse file reads back different bytes after a reopen", enc)
		}
		if got := mustGet(t, s, e2.ID()); got[0] != 1 || !bytes.Equal(got[1:], want[1:]) {
			t.Fatalf("encoders %d: plain reader's text reads back different bytes after a reopen", enc)
		}
		verifyClean(t, s)
		if segs := segmentsSize(t, dir); segs > 1<<20 {
			t.Fatalf("encoders %d: segments hold %d bytes for two sparse texts", enc, segs)
		}
		s.Close()
	}
}

// TestStreamLeavesHolesUnread: the chunks of a file source that are
// wholly holes are not read: the stream counts them, and none of their
// pages is in the page cache after it (a mapped hole read faults a page
// in); the chunks with data are read and stored in a few KiB.
func TestStreamLeavesHolesUnread(t *testing.T) {
	const n = 12
	path := filepath.Join(t.TempDir(), "sparse")
	src := sparseFile(t, path, n*chunkSize, []int64{chunkSize + 5, 6*chunkSize - 4096, 11 * chunkSize})
	seg, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	for _, enc := range []int{-1, 1} {
		out, err := streamChunked(context.Background(), src, n*chunkSize, seg, 0, enc)
		if err != nil {
			t.Fatal(err)
		}
		if out.holes != n-3 || out.fast != 0 || out.n > 64<<10 {
			t.Fatalf("encoders %d: %d holes (want %d), %d fast, %d bytes", enc, out.holes, n-3, out.fast, out.n)
		}
	}
	m, err := unix.Mmap(int(src.Fd()), 0, n*chunkSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, n*chunkSize/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	// chunks 1, 5 and 11 hold data; the reader's readahead (the mapping
	// is MADV_SEQUENTIAL) brings in the chunk after each and a few pages
	for _, c := range []int{0, 4, 8, 9, 10} {
		per := chunkSize / os.Getpagesize()
		for p := c * per; p < (c+1)*per; p++ {
			if vec[p]&1 != 0 {
				t.Fatalf("page %d of hole chunk %d is in the page cache: the stream read it", p, c)
			}
		}
	}
}

// TestPutFromWrittenZeros: zeros written, not holes (cp without
// --sparse, a VM image zeroed), take a few KiB as well, the appender
// taking every chunk (encoders -1) or not.
func TestPutFromWrittenZeros(t *testing.T) {
	size := bigFull + 2*chunkSize + 100
	want := make([]byte, size)
	r := rand.New(rand.NewPCG(7, 7))
	for _, off := range []int{0, chunkSize + 3, size - 8192} {
		for i := off; i < off+4096; i++ {
			want[i] = byte(r.Uint32())
		}
	}
	src := srcFile(t, want)
	if d, err := unix.Seek(int(src.Fd()), 4096, unix.SEEK_DATA); err != nil || d != 4096 {
		t.Fatalf("the written zeros are a hole (data at %d, %v): the test tests nothing", d, err)
	}
	for _, enc := range []int{-1, 0} {
		s, _ := openNew(t, Config{encoders: enc})
		checkSparsePut(t, s, "zeros", src, want, 64<<10, false)
		verifyClean(t, s)
		s.Close()
	}
}

// TestPutFromSparseLayouts: files of random layouts of holes, written
// zeros, text and random bytes (extents at and across chunk boundaries,
// a short last chunk, holes at either end), streamed with or without
// encoders, as files or plain readers, read back exactly, hash as their
// text and store no more than their non-zero pages (and chunks under
// half zeros) take.
func TestPutFromSparseLayouts(t *testing.T) {
	// Each check streams and reads back up to 44 MiB: 30 checks unless
	// -rapid.checks asks for more.
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		f.Value.Set("30")
		defer f.Value.Set(f.DefValue)
	}
	text := genText(rand.New(rand.NewPCG(5, 5)), 1<<20)
	dir := t.TempDir()
	stores := map[int]*Store{}
	for _, enc := range []int{-1, 0, 1} {
		stores[enc], _ = openNew(t, Config{encoders: enc})
	}
	k := 0
	rapid.Check(t, func(rt *rapid.T) {
		k++
		size := bigFull + rapid.IntRange(0, 3*chunkSize).Draw(rt, "extra")
		want := make([]byte, size)
		path := filepath.Join(dir, fmt.Sprint("layout", k))
		f, err := os.Create(path)
		if err != nil {
			rt.Fatal(err)
		}
		defer os.Remove(path)
		defer f.Close()
		if err := f.Truncate(int64(size)); err != nil {
			rt.Fatal(err)
		}
		for e := range rapid.IntRange(0, 8).Draw(rt, "extents") {
			off := rapid.IntRange(0, size-1).Draw(rt, fmt.Sprint("off", e))
			if rapid.Bool().Draw(rt, fmt.Sprint("atBoundary", e)) {
				off = max(0, min(size-1, off/chunkSize*chunkSize+rapid.IntRange(-4096, 4096).Draw(rt, fmt.Sprint("delta", e))))
			}
			n := min(size-off, rapid.IntRange(1, 2*chunkSize).Draw(rt, fmt.Sprint("len", e)))
			b := want[off : off+n]
			switch rapid.IntRange(0, 2).Draw(rt, fmt.Sprint("kind", e)) {
			case 0:
				clear(b)
			case 1:
				for i := range b {
					b[i] = text[(off+i)%len(text)]
				}
			default:
				r := rand.New(rand.NewPCG(uint64(off), uint64(n)))
				for i := 0; i < n; i += 8 {
					v := r.Uint64()
					for j := i; j < min(i+8, n); j++ {
						b[j], v = byte(v), v>>8
					}
				}
			}
			if _, err := f.WriteAt(b, int64(off)); err != nil {
				rt.Fatal(err)
			}
		}
		enc := rapid.SampledFrom([]int{-1, 0, 1}).Draw(rt, "encoders")
		var src io.ReaderAt = f
		if rapid.Bool().Draw(rt, "plain") {
			src = plainReader{f}
		}
		// bound: non-zero pages of a chunk half zeros or more, else the chunk
		limit := recOverhead + chunkHeaderLen + chunkEntryLen*(size/chunkSize+1)
		for c := 0; c < size; c += chunkSize {
			chunk := want[c:min(c+chunkSize, size)]
			zero, pages := zeroPages(chunk)
			if zero*2 >= pages {
				limit += (pages-zero)*dioAlign*101/100 + 1024
			} else {
				limit += len(chunk)
			}
		}
		s := stores[enc]
		file, err := s.NewFile(path)
		if err != nil {
			rt.Fatal(err)
		}
		e, commit, err := s.PutFrom(context.Background(), PutRequest{File: file}, src, int64(size), nil)
		if err == nil {
			err = commit()
		}
		if err != nil {
			rt.Fatal(err)
		}
		if e.Hash != s.cfg.hash(want) || e.Size != uint64(size) || int(e.Stored) > limit {
			rt.Fatalf("%s: hash %x (text's %x), %d bytes of %d, %d stored (want at most %d)", path, e.Hash, s.cfg.hash(want), e.Size, size, e.Stored, limit)
		}
		if got, err := s.Get(context.Background(), e.ID()); err != nil || !bytes.Equal(got, want) {
			rt.Fatalf("%s: reads back different bytes (%v)", path, err)
		}
	})
	for _, s := range stores {
		verifyClean(t, s)
	}
}

// sparseFile creates a file of size bytes at path, a hole but for a
// 4 KiB block of random bytes at each offset of blocks, and returns it
// open for reading.
func sparseFile(t testing.TB, path string, size int64, blocks []int64) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(uint64(size), uint64(len(blocks))))
	for _, off := range blocks {
		b := make([]byte, 4<<10)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if _, err := f.WriteAt(b[:min(int64(len(b)), size-off)], off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f, err = os.Open(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
