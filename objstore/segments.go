package objstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/deltafs/deltafs/index"
)

// segments manages the segment files. Reads may run concurrently with the
// single appender; the appender's fields are guarded by the store's writer
// mutex.
type segments struct {
	dir     string
	maxSize int64

	mu    sync.Mutex
	files map[uint32]*os.File

	cur     uint32 // segment being appended to
	curSize int64
	dirty   map[uint32]bool // written since the last sync
	joined  []byte          // append's buffer for joining a record's parts
}

// joinMax is the largest record append writes with one pwrite(2),
// joining its parts (header, payload, checksum) in a buffer first: a
// small file's record cost three writes, a third of what recording an
// untar's new files spent outside compression (a profile of 10,000
// small files: 8 of 60 us per file). A bigger record's parts are
// written as they are, not copied.
const joinMax = 256 << 10

func segName(n uint32) string { return fmt.Sprintf("%08d.seg", n) }

func openSegments(dir string, maxSize int64, tail index.Tail) *segments {
	s := &segments{dir: dir, maxSize: maxSize, files: map[uint32]*os.File{}, dirty: map[uint32]bool{}}
	s.cur, s.curSize = tail.Seg, int64(tail.End)
	if s.cur == 0 {
		s.cur = 1
	}
	return s
}

// list returns the segment numbers present on disk, ascending.
func listSegments(dir string) ([]uint32, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("objstore: list segments: %w", err)
	}
	var ns []uint32
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".seg")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(base, 10, 32)
		if err != nil {
			continue
		}
		ns = append(ns, uint32(n))
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
	return ns, nil
}

// file returns the open handle of segment n, opening it if needed.
func (s *segments) file(n uint32, create bool) (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.files[n]; f != nil {
		return f, nil
	}
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(filepath.Join(s.dir, segName(n)), flag, 0o600)
	if err != nil {
		return nil, fmt.Errorf("objstore: segment %d: %w", n, err)
	}
	s.files[n] = f
	return f, nil
}

// append writes the parts of a record, one after another, at the end of
// the current segment, rolling first if it would grow past maxSize. Not
// synced: see sync.
func (s *segments) append(parts ...[]byte) (seg uint32, off uint64, err error) {
	var n int64
	for _, p := range parts {
		n += int64(len(p))
	}
	f, err := s.roll(n)
	if err != nil {
		return 0, 0, err
	}
	at := s.curSize
	if len(parts) > 1 && n <= joinMax {
		s.joined = s.joined[:0]
		for _, p := range parts {
			s.joined = append(s.joined, p...)
		}
		parts = [][]byte{s.joined}
	}
	for _, p := range parts {
		if _, err := f.WriteAt(p, at); err != nil {
			// What was written (a full disk takes part of a record) is cut
			// off, as abortAppend does: nothing may lie past the tail.
			err = fmt.Errorf("objstore: write segment %d at %d: %w", s.cur, at, err)
			if terr := f.Truncate(s.curSize); terr != nil {
				err = fmt.Errorf("%w (cutting it off after: %w)", err, terr)
			}
			return 0, 0, err
		}
		at += int64(len(p))
	}
	seg, off = s.cur, uint64(s.curSize)
	s.curSize += n
	s.dirty[s.cur] = true
	return seg, off, nil
}

// roll moves to a new segment if a record of n bytes would grow the
// current one past maxSize, and returns the current segment's file.
func (s *segments) roll(n int64) (*os.File, error) {
	if s.curSize > 0 && s.curSize+n > s.maxSize {
		s.cur, s.curSize = s.cur+1, 0
	}
	fresh := s.curSize == 0
	f, err := s.file(s.cur, true)
	if err != nil {
		return nil, err
	}
	if fresh {
		// The new file's directory entry must be durable before any index
		// entry can point into it.
		if err := index.SyncDir(s.dir); err != nil {
			return nil, fmt.Errorf("objstore: sync segment dir: %w", err)
		}
	}
	return f, nil
}

// beginAppend starts a record of at most n bytes that its writer writes
// piece by piece (a streamed fulltext, put_stream.go): it rolls as
// append does and returns the current segment's file and where the
// record starts. The writer writes at and after that offset, then calls
// endAppend with the record's end, or abortAppend. Called with the
// store's writer mutex held throughout.
func (s *segments) beginAppend(n int64) (f *os.File, seg uint32, start int64, err error) {
	if f, err = s.roll(n); err != nil {
		return nil, 0, 0, err
	}
	return f, s.cur, s.curSize, nil
}

// endAppend ends a record begun by beginAppend at end; it is synced
// with the next group commit, like an appended one.
func (s *segments) endAppend(end int64) {
	s.curSize = end
	s.dirty[s.cur] = true
}

// abortAppend cuts off what was written since beginAppend returned
// start: nothing may lie past the tail that a later record does not
// overwrite (a shorter record would leave stale bytes after it).
func (s *segments) abortAppend(f *os.File, start int64) error {
	if err := f.Truncate(start); err != nil {
		return fmt.Errorf("objstore: cut off segment %d at %d: %w", s.cur, start, err)
	}
	return nil
}

// rewind cuts the segments back to t, the committed tail: what lies past
// it belongs to puts whose commit was refused (Store.takeBack). Called
// with the store's writer mutex held.
func (s *segments) rewind(t index.Tail) error {
	cur, end := t.Seg, int64(t.End)
	if cur == 0 {
		cur = 1 // as openSegments
	}
	for n := cur; n <= s.cur; n++ {
		at := int64(0)
		if n == cur {
			at = end
		}
		f, err := s.file(n, false)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := f.Truncate(at); err != nil {
			return fmt.Errorf("objstore: cut segment %d back to %d: %w", n, at, err)
		}
	}
	s.cur, s.curSize = cur, end
	clear(s.dirty)
	return nil
}

func (s *segments) tail() index.Tail { return index.Tail{Seg: s.cur, End: uint64(s.curSize)} }

// takeDirty returns and clears the set of segments written since last call.
func (s *segments) takeDirty() []uint32 {
	var ns []uint32
	for n := range s.dirty {
		ns = append(ns, n)
	}
	clear(s.dirty)
	return ns
}

// sync fsyncs the given segments.
func (s *segments) sync(ns []uint32) error {
	for _, n := range ns {
		f, err := s.file(n, false)
		if err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("objstore: fsync segment %d: %w", n, err)
		}
	}
	return nil
}

// errShort is returned by readAt when the segment ends early.
var errShort = errors.New("segment shorter than the index says")

// readAt reads n bytes of segment seg at off.
func (s *segments) readAt(seg uint32, off uint64, n int) ([]byte, error) {
	f, err := s.readFile(seg)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if err := readFull(f, seg, off, b); err != nil {
		return nil, err
	}
	return b, nil
}

// readInto fills b from segment seg at off, for a reader that recycles
// its buffer.
func (s *segments) readInto(seg uint32, off uint64, b []byte) error {
	f, err := s.readFile(seg)
	if err != nil {
		return err
	}
	return readFull(f, seg, off, b)
}

// readFile opens segment seg for a read of records the index names: a
// segment that is not there lost them (errShort: the reader reports
// the revision corrupt, an I/O error in the mount, not "no such file").
func (s *segments) readFile(seg uint32) (*os.File, error) {
	f, err := s.file(seg, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: segment %d is missing", errShort, seg)
	}
	return f, err
}

func readFull(f *os.File, seg uint32, off uint64, b []byte) error {
	m, err := f.ReadAt(b, int64(off))
	if m == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: read %d of %d bytes", errShort, m, len(b))
	}
	return fmt.Errorf("objstore: read segment %d at %d: %w", seg, off, err)
}

func (s *segments) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for n, f := range s.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
		delete(s.files, n)
	}
	return first
}

// recoverTail cuts off everything past the committed tail: bytes after
// tail.End in its segment and any later segment. Those bytes were appended
// by puts whose index commit never happened (a crash between write and
// commit), so nothing references them; a torn record is among them.
//
// A tail segment shorter than the committed tail (truncated behind the
// store's back: its committed records are lost) is left as it is and
// returned as damage (ErrSegmentShort): the records before its end
// still read.
func recoverTail(dir string, tail index.Tail, log func(msg string, args ...any)) (damage, err error) {
	ns, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		path := filepath.Join(dir, segName(n))
		switch {
		case n > tail.Seg || tail.End == 0 && n == tail.Seg:
			log("removing uncommitted segment", "segment", n)
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("objstore: recover: %w", err)
			}
		case n == tail.Seg:
			if damage, err = truncateTo(path, int64(tail.End), log); err != nil {
				return nil, err
			}
		}
	}
	return damage, index.SyncDir(dir)
}

func truncateTo(path string, end int64, log func(msg string, args ...any)) (damage, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("objstore: recover: %w", err)
	}
	if st.Size() < end {
		return fmt.Errorf("%s: %w (%d of %d bytes): the revisions stored past its end are lost (deltafs verify lists them)", path, ErrSegmentShort, st.Size(), end), nil
	}
	if st.Size() == end {
		return nil, nil
	}
	log("cutting uncommitted segment tail", "path", path, "bytes", st.Size()-end)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("objstore: recover: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(end); err != nil {
		return nil, fmt.Errorf("objstore: recover: %w", err)
	}
	return nil, f.Sync()
}
