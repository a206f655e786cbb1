package objstore

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// A streamed put reads its source through a read-only shared mapping
// when it is a file: the reader hashes, the encoders encode and the
// appender copies each chunk straight from the page cache, without the
// read(2) copy into a buffer of the stream's (~0.14 s of CPU per GiB
// here, a fifth of M1's recording). A mapped page past the file's end
// (a source shorter than the size announced, or cut short under the
// stream) faults with SIGBUS: every goroutine that touches the mapping
// has the runtime turn that into a panic (debug.SetPanicOnFault), which
// guarded makes the stream's errStreamSize, so that the put falls
// back to reading the file whole, as for a source of another length.

// A FileReader is a source that reads a file and is not one: a wrapper
// that counts what is read, say. A streamed put maps the file and finds
// its holes as for a file source, and reports to Mapped each chunk it
// read through the mapping (n bytes), as the wrapper's ReadAt would
// have seen it read. (The mount's recorder wrapped every live file so:
// its big files were read with read(2), not mapped, and every hole of a
// sparse one was read.)
type FileReader interface {
	io.ReaderAt
	File() *os.File // nil: no file to map; read through ReadAt
	Mapped(n int64)
}

// sourceFile returns the file src reads (itself, or a FileReader's), or
// nil.
func sourceFile(src io.ReaderAt) *os.File {
	switch s := src.(type) {
	case *os.File:
		return s
	case FileReader:
		return s.File()
	}
	return nil
}

// mapSource maps size bytes of src if it reads a file of that size that
// can be mapped, or returns nil.
func mapSource(src io.ReaderAt, size int64) []byte {
	f := sourceFile(src)
	if f == nil || size <= 0 || int64(int(size)) != size || !sizeIs(f, size) {
		return nil
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	_ = unix.Madvise(m, unix.MADV_SEQUENTIAL) // advisory
	return m
}

// guarded runs fn, a goroutine of the stream of its own, with a fault on
// the mapping made the stream's errStreamSize; any other panic goes on.
func (st *streamer) guarded(fn func()) {
	defer func() {
		if err := st.faulted(recover()); err != nil {
			st.fail(err)
		}
	}()
	debug.SetPanicOnFault(true)
	fn()
}

// faulted turns r, recovered, into errStreamSize if it is a fault on
// the mapping; any other panic goes on.
func (st *streamer) faulted(r any) error {
	if r == nil {
		return nil
	}
	if _, fault := r.(interface{ Addr() uintptr }); !fault || st.mapped == nil {
		panic(r)
	}
	return fmt.Errorf("%w: mapped source cut short (%v)", errStreamSize, r)
}

// appendMapped is appendAll (on the caller's goroutine, whose panic on
// fault it restores) with a fault on the mapping made an error.
func (st *streamer) appendMapped(f *os.File, at int64) (out streamOut, err error) {
	defer func() {
		if ferr := st.faulted(recover()); ferr != nil {
			out, err = streamOut{}, ferr
			st.fail(ferr)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return st.appendAll(f, at)
}

// recycle keeps text, a chunk's buffer done with, for a later chunk;
// not a mapped one, nor the shared zeros. Called with mu held.
func (st *streamer) recycle(text []byte) {
	if st.mapped == nil && !st.sharedZero(text) {
		st.texts = append(st.texts, text)
	}
}

// sizeIs reports whether f is size bytes long. A mapped file cut short
// within its last page reads zeros there instead of faulting: the
// reader checks the size again once it has read every chunk.
func sizeIs(f *os.File, size int64) bool {
	fi, err := f.Stat()
	return err == nil && fi.Size() == size
}
