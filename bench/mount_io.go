package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/deltafs/deltafs/bench/workload"
	"github.com/deltafs/deltafs/delta"
)

// ioArgs are the arguments of the mount suite's workload children.
type ioArgs struct {
	dir       string
	size      int64
	block     int
	ops       int
	syncEvery int
	saves     int
	seed      uint64
	chain     workload.Chain
}

func parseIOArgs(args []string) (ioArgs, error) {
	var a ioArgs
	fs := flag.NewFlagSet("io child", flag.ContinueOnError)
	fs.StringVar(&a.dir, "dir", "", "directory to work in")
	fs.Int64Var(&a.size, "size", 1<<30, "file size")
	fs.IntVar(&a.block, "block", 1<<20, "I/O size")
	fs.IntVar(&a.ops, "ops", 16384, "random I/Os")
	fs.IntVar(&a.syncEvery, "sync-every", 0, "fsync after every N writes (0: once at the end)")
	fs.IntVar(&a.saves, "saves", 200, "atomic saves")
	fs.Uint64Var(&a.seed, "seed", 41, "workload seed")
	fs.Uint64Var(&a.chain.Seed, "chain-seed", 31, "M6: chain seed")
	fs.IntVar(&a.chain.BaseSize, "chain-size", 8<<20, "M6: chain file size")
	fs.IntVar(&a.chain.Steps, "chain-steps", 599, "M6: chain revisions after the first")
	fs.IntVar(&a.chain.Edits.Count, "chain-edits", 5, "M6: most edits per revision")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if a.dir == "" {
		return a, errors.New("-dir is required")
	}
	a.chain.Name, a.chain.CountMin = "M6", 1
	a.chain.Edits.MinLen, a.chain.Edits.MaxLen = 10, 500
	return a, nil
}

// ioFile is the file the I/O workloads use.
const ioFile = "data"

// pattern is 16 MiB of text the writers cycle through: generated once,
// outside any timed region, and not a multiple of common block sizes'
// alignment in content (a compressor sees text, not zeros).
func pattern(seed uint64) []byte { return workload.NewText(seed).Fill(16 << 20) }

// writeAll writes size bytes of p (cycled) to f in blocks.
func writeAll(f *os.File, p []byte, size int64, block int) error {
	for off := int64(0); off < size; {
		n := min(int64(block), size-off)
		start := off % int64(len(p)-block)
		if _, err := f.Write(p[start : start+n]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// childSeqWrite (M1, and the fill of M2): create the file, write -size
// bytes in -block blocks, fsync, close. All of it is timed.
func childSeqWrite(_ context.Context, args []string) (ChildResult, error) {
	a, err := parseIOArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	p := pattern(a.seed)
	var t Timer
	t.Start()
	f, err := os.Create(filepath.Join(a.dir, ioFile))
	if err != nil {
		return ChildResult{}, err
	}
	err = writeAll(f, p, a.size, a.block)
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	t.Stop()
	return t.Result(a.size), err
}

// childSeqRead (M1): read the whole file in -block blocks.
func childSeqRead(_ context.Context, args []string) (ChildResult, error) {
	a, err := parseIOArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	buf := make([]byte, a.block)
	var t Timer
	var total int64
	t.Start()
	f, err := os.Open(filepath.Join(a.dir, ioFile))
	if err != nil {
		return ChildResult{}, err
	}
	defer f.Close()
	for {
		n, err := f.Read(buf)
		total += int64(n)
		if n == 0 || err != nil {
			break
		}
	}
	t.Stop()
	if total != a.size {
		return ChildResult{}, fmt.Errorf("read %d bytes, want %d", total, a.size)
	}
	return t.Result(total), nil
}

// offsets are -ops random 4 KiB-aligned offsets within -size.
func (a ioArgs) offsets() []int64 {
	r := workload.NewRand(a.seed)
	offs := make([]int64, a.ops)
	for i := range offs {
		offs[i] = r.Int64N(a.size/4096) * 4096
	}
	return offs
}

// childRandRead (M2): -ops 4 KiB preads at random offsets.
func childRandRead(_ context.Context, args []string) (ChildResult, error) {
	a, err := parseIOArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	offs := a.offsets()
	buf := make([]byte, 4096)
	var t Timer
	t.Start()
	f, err := os.Open(filepath.Join(a.dir, ioFile))
	if err != nil {
		return ChildResult{}, err
	}
	defer f.Close()
	for _, off := range offs {
		if _, err := f.ReadAt(buf, off); err != nil {
			return ChildResult{}, err
		}
	}
	t.Stop()
	return t.Result(int64(len(offs)) * 4096), nil
}

// childRandWrite (M2): -ops 4 KiB pwrites at random offsets, an fsync
// after every -sync-every writes (if set) and at the end, close. Timed
// from open to close.
func childRandWrite(_ context.Context, args []string) (ChildResult, error) {
	a, err := parseIOArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	offs := a.offsets()
	p := workload.NewText(a.seed + 1).Fill(1 << 20)
	r := rand.New(rand.NewPCG(a.seed, 3))
	var t Timer
	t.Start()
	f, err := os.OpenFile(filepath.Join(a.dir, ioFile), os.O_RDWR, 0)
	if err != nil {
		return ChildResult{}, err
	}
	for i, off := range offs {
		src := r.IntN(len(p) - 4096)
		if _, err := f.WriteAt(p[src:src+4096], off); err != nil {
			f.Close()
			return ChildResult{}, err
		}
		if a.syncEvery > 0 && (i+1)%a.syncEvery == 0 {
			if err := f.Sync(); err != nil {
				f.Close()
				return ChildResult{}, err
			}
		}
	}
	err = errors.Join(f.Sync(), f.Close())
	t.Stop()
	return t.Result(int64(len(offs)) * 4096), err
}

// childSaves (M5): an editor's atomic save, -saves times: the file with a
// few small edits is written to a temporary file, closed and renamed over
// the original. Only the saves are timed. Sizes "delta" holds, per save,
// the size objstore would store for the delta from the previous version.
func childSaves(_ context.Context, args []string) (ChildResult, error) {
	a, err := parseIOArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	pol, err := newStorePolicy()
	if err != nil {
		return ChildResult{}, err
	}
	defer pol.close()
	tx := workload.NewText(a.seed)
	text := tx.Fill(int(a.size))
	path := filepath.Join(a.dir, "notes.txt")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		return ChildResult{}, err
	}
	spec := workload.EditSpec{Count: 3, MinLen: 10, MaxLen: 200}
	var t Timer
	var deltas []int64
	var total int64
	for range a.saves {
		next := workload.ApplyEdits(text, tx.Edits(len(text), spec))
		t.Start()
		err := atomicSave(path, next)
		t.Stop()
		if err != nil {
			return ChildResult{}, err
		}
		deltas = append(deltas, int64(pol.storedLen(delta.Encode(text, next))))
		text, total = next, total+int64(len(next))
	}
	res := t.Result(total)
	res.Sizes = map[string][]int64{"delta": deltas}
	return res, nil
}

// atomicSave writes data to a temporary file beside path and renames it
// over path, as editors do.
func atomicSave(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// childRevisions (M6): S1's revisions written through the file system,
// each opened, truncated, written and closed (with an fsync before the
// close after every -sync-every revisions if set), and one fsync at the
// end. Generating the revisions is not timed.
func childRevisions(_ context.Context, args []string) (ChildResult, error) {
	a, err := parseIOArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	path := filepath.Join(a.dir, "s1.txt")
	var t Timer
	var total int64
	err = a.chain.Walk(func(n int, rev []byte) error {
		t.Start()
		defer t.Stop()
		total += int64(len(rev))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, err = f.Write(rev)
		if err == nil && a.syncEvery > 0 && (n+1)%a.syncEvery == 0 {
			err = f.Sync()
		}
		return errors.Join(err, f.Close())
	})
	if err != nil {
		return ChildResult{}, err
	}
	t.Start()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err == nil {
		err = errors.Join(f.Sync(), f.Close())
	}
	t.Stop()
	return t.Result(total), err
}
