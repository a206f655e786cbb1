package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/deltafs/deltafs/delta"
	"github.com/klauspost/compress/zstd"
)

// deltaCodec names a way of encoding deltas with package delta.
type deltaCodec string

// The deltafs codecs the delta suite measures.
const (
	codecCopy  deltaCodec = "copy"  // delta.Encode, one shot
	codecIndex deltaCodec = "index" // delta.NewIndex(prev) + Index.Encode
	codecZstd2 deltaCodec = "zstd2" // delta.EncodeZstd level 2 (default)
	codecZstd4 deltaCodec = "zstd4" // delta.EncodeZstd level 4 (best)
)

func (c deltaCodec) encode(prev, cur []byte) ([]byte, error) {
	switch c {
	case codecCopy:
		return delta.Encode(prev, cur), nil
	case codecIndex:
		return delta.NewIndex(prev).Encode(cur), nil
	case codecZstd2:
		return delta.EncodeZstd(prev, cur, 2)
	case codecZstd4:
		return delta.EncodeZstd(prev, cur, 4)
	}
	return nil, fmt.Errorf("unknown codec %q", c)
}

// chainArgs are the arguments of the delta child operations.
type chainArgs struct {
	dir   string // revisions r000 (base) .. rNNN
	steps int
	codec deltaCodec
	save  string // encode: write the deltas here; apply: read them from here
	// sample, if above 0, measures only that many revisions, evenly
	// spaced, each against the revision file before it.
	sample int
}

// revisions lists the revisions to measure; chained reports whether each
// one's base is the previous revision measured (a full chain) or must be
// read from its file.
func (a chainArgs) revisions() (revs []int, chained bool) {
	if a.sample <= 0 || a.sample >= a.steps {
		return sampleSteps(a.steps, a.steps, false), true
	}
	return sampleSteps(a.steps, a.sample, true), false
}

// baseFor returns the base of revision n: prev when the chain is replayed
// in full, the revision file n-1 when it is sampled.
func (a chainArgs) baseFor(n int, prev []byte, chained bool) ([]byte, error) {
	if chained && prev != nil {
		return prev, nil
	}
	return os.ReadFile(revPath(a.dir, n-1))
}

func parseChainArgs(args []string) (chainArgs, error) {
	var a chainArgs
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	fs.StringVar(&a.dir, "dir", "", "revision directory")
	fs.IntVar(&a.steps, "steps", 1, "revisions after the base")
	fs.StringVar((*string)(&a.codec), "codec", string(codecCopy), "codec")
	fs.StringVar(&a.save, "deltas", "", "delta directory")
	fs.IntVar(&a.sample, "sample", 0, "measure only this many revisions, evenly spaced")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if a.dir == "" || a.save == "" {
		return a, errors.New("-dir and -deltas are required")
	}
	return a, nil
}

func revPath(dir string, n int) string   { return filepath.Join(dir, fmt.Sprintf("r%03d", n)) }
func deltaPath(dir string, n int) string { return filepath.Join(dir, fmt.Sprintf("d%03d", n)) }

// childEncode encodes each revision against the previous one, timing
// only the encoding, and writes the deltas for childApply and for the
// runner to size (sizing here would add the compressor's memory to the
// peak RSS being measured).
func childEncode(_ context.Context, args []string) (ChildResult, error) {
	a, err := parseChainArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	if err := os.MkdirAll(a.save, 0o755); err != nil {
		return ChildResult{}, err
	}
	var t Timer
	var total int64
	var prev []byte
	revs, chained := a.revisions()
	for _, n := range revs {
		if prev, err = a.baseFor(n, prev, chained); err != nil {
			return ChildResult{}, err
		}
		cur, err := os.ReadFile(revPath(a.dir, n))
		if err != nil {
			return ChildResult{}, err
		}
		t.Start()
		d, err := a.codec.encode(prev, cur)
		t.Stop()
		if err != nil {
			return ChildResult{}, fmt.Errorf("encode rev %d: %w", n, err)
		}
		if err := os.WriteFile(deltaPath(a.save, n), d, 0o644); err != nil {
			return ChildResult{}, err
		}
		total += int64(len(cur))
		prev = cur
	}
	return t.Result(total), nil
}

// storedSizes reports, per delta file of revs, its raw size ("raw"), its
// size as the store keeps it ("stored", see storePolicy) and its size
// compressed at zstd's best level whatever its size ("best"), the
// compressed form kept only when smaller.
func storedSizes(ddir string, revs []int) (map[string][]int64, error) {
	pol, err := newStorePolicy()
	if err != nil {
		return nil, err
	}
	defer pol.close()
	sizes := map[string][]int64{}
	for _, n := range revs {
		d, err := os.ReadFile(deltaPath(ddir, n))
		if err != nil {
			return nil, err
		}
		sizes["raw"] = append(sizes["raw"], int64(len(d)))
		sizes["stored"] = append(sizes["stored"], int64(pol.storedLen(d)))
		sizes["best"] = append(sizes["best"], int64(smaller(pol.best, d)))
	}
	return sizes, nil
}

// storePolicy mirrors how objstore stores a delta payload (objstore has no
// exported helper for it): a copy/insert delta is zstd-compressed, at
// SpeedBestCompression up to smallDelta bytes and at SpeedDefault above,
// without the frame CRC, and kept compressed only if smaller; payloads
// under 64 bytes stay raw; a CodecZstd delta is stored as it is. It
// mirrors objstore.(*Store).compress and compressWith in
// objstore/candidates.go and the encoder options of newEncoder in
// objstore/store.go; keep them in step.
type storePolicy struct {
	best, def *zstd.Encoder
}

// smallDelta is objstore's smallDelta.
const smallDelta = 64 << 10

func newStorePolicy() (storePolicy, error) {
	var p storePolicy
	var err error
	if p.best, err = storeEncoder(zstd.SpeedBestCompression); err != nil {
		return p, err
	}
	p.def, err = storeEncoder(zstd.SpeedDefault)
	return p, err
}

func storeEncoder(l zstd.EncoderLevel) (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true), zstd.WithEncoderCRC(false))
}

func (p storePolicy) close() {
	p.best.Close()
	if p.def != nil {
		p.def.Close()
	}
}

// storedLen is the payload length objstore stores for delta d.
func (p storePolicy) storedLen(d []byte) int {
	if c, _, _, err := delta.Header(d); err == nil && c == delta.CodecZstd {
		return len(d)
	}
	if len(d) <= smallDelta {
		return smaller(p.best, d)
	}
	return smaller(p.def, d)
}

// smaller is len(d) compressed by enc, or len(d) if that is not smaller
// (or d is under 64 bytes, which objstore never compresses).
func smaller(enc *zstd.Encoder, d []byte) int {
	if len(d) < 64 {
		return len(d)
	}
	return min(len(d), len(enc.EncodeAll(d, nil)))
}

// childApply replays the chain from the base: revision n is rebuilt from
// the rebuilt revision n-1 and delta n, into one of two reused buffers (as
// a store reading a chain would). Only delta.AppendApply is timed; every
// result is checked against the revision file.
func childApply(_ context.Context, args []string) (ChildResult, error) {
	a, err := parseChainArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	var prev []byte
	var bufs [2][]byte
	var t Timer
	var total int64
	revs, chained := a.revisions()
	for _, n := range revs {
		if prev, err = a.baseFor(n, prev, chained); err != nil {
			return ChildResult{}, err
		}
		d, err := os.ReadFile(deltaPath(a.save, n))
		if err != nil {
			return ChildResult{}, err
		}
		_, _, tlen, err := delta.Header(d)
		if err != nil {
			return ChildResult{}, fmt.Errorf("delta %d: %w", n, err)
		}
		buf := &bufs[n%2]
		if uint64(cap(*buf)) < tlen {
			*buf = prefaulted(int(tlen + tlen/8))
		}
		t.Start()
		out, err := delta.AppendApply((*buf)[:0], prev, d)
		t.Stop()
		if err != nil {
			return ChildResult{}, fmt.Errorf("apply delta %d: %w", n, err)
		}
		if err := sameAsFile(revPath(a.dir, n), out); err != nil {
			return ChildResult{}, err
		}
		*buf, prev = out, out
		total += int64(len(out))
	}
	return t.Result(total), nil
}

// sameAsFile checks that data equals the file at path, streaming the file
// so that the check adds little to the peak RSS being measured.
func sameAsFile(path string, data []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	chunk := make([]byte, 1<<16)
	for off := 0; ; {
		n, err := io.ReadFull(r, chunk)
		if n > 0 && (off+n > len(data) || !bytes.Equal(chunk[:n], data[off:off+n])) {
			return fmt.Errorf("%s: output differs near byte %d", path, off)
		}
		off += n
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if off != len(data) {
				return fmt.Errorf("%s: output has %d bytes, want %d", path, len(data), off)
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// prefaulted returns an empty buffer of capacity n whose pages are already
// mapped, so that a timed apply measures the decoder rather than the
// kernel's first-touch page faults (about 2 us per 4 KiB page on this kind
// of VM, as much as the whole apply of a 16 MiB target).
func prefaulted(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return b[:0]
}
