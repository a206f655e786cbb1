package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/bench/workload"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// storeArgs are the arguments of the store child operations. A history is
// either a linear chain (-seed, -size, -steps, -edits) or, with -merge, the
// S2-shaped merge history of the same seed and size.
type storeArgs struct {
	dir     string
	chain   workload.Chain
	merge   bool
	revs    int // merge history: revisions
	nocaps  bool
	p1only  bool
	cache   int64
	rev     int // read: the revision
	shuffle bool
	noput   bool
	memlim  int64 // ingest: debug.SetMemoryLimit, 0 for none
}

func parseStoreArgs(args []string) (storeArgs, error) {
	var a storeArgs
	fs := flag.NewFlagSet("store child", flag.ContinueOnError)
	fs.StringVar(&a.dir, "dir", "", "store directory")
	fs.Uint64Var(&a.chain.Seed, "seed", 1, "workload seed")
	fs.IntVar(&a.chain.BaseSize, "size", 1<<20, "bytes of the first revision")
	fs.IntVar(&a.chain.Steps, "steps", 1, "revisions after the first")
	fs.IntVar(&a.chain.Edits.Count, "edits", 5, "most edits per revision")
	fs.BoolVar(&a.merge, "merge", false, "the S2 merge history instead of a chain")
	fs.BoolVar(&a.nocaps, "nocaps", false, "Config.NoCaps")
	fs.BoolVar(&a.p1only, "p1only", false, "Config.P1Only")
	fs.Int64Var(&a.cache, "cache", 0, "Config.CacheBytes (0: default)")
	fs.IntVar(&a.rev, "rev", 0, "revision to read")
	fs.BoolVar(&a.noput, "noput", false, "ingest: read the revisions but do not store them (the reader's own footprint)")
	fs.Int64Var(&a.memlim, "memlimit", 0, "ingest: the Go runtime's soft memory limit in bytes (GOMEMLIMIT; 0: none)")
	fs.BoolVar(&a.shuffle, "shuffle", true, "readall: read in a random order")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if a.dir == "" {
		return a, errors.New("-dir is required")
	}
	a.chain.Name, a.chain.CountMin = "chain", 1
	a.chain.Edits.MinLen, a.chain.Edits.MaxLen = 10, 500
	return a, nil
}

// chainFlags renders c as store child flags.
func chainFlags(c workload.Chain) []string {
	return []string{"-seed", fmt.Sprint(c.Seed), "-size", fmt.Sprint(c.BaseSize),
		"-steps", fmt.Sprint(c.Steps), "-edits", fmt.Sprint(c.Edits.Count)}
}

// mergeFlags renders a merge history as store child flags (seed, size and
// revisions; the other parameters are StoreS2's).
func mergeFlags(m workload.MergeSpec) []string {
	return []string{"-merge", "-seed", fmt.Sprint(m.Seed), "-size", fmt.Sprint(m.Size),
		"-steps", fmt.Sprint(m.Revisions)}
}

func (a storeArgs) mergeSpec() workload.MergeSpec {
	m := workload.StoreS2()
	m.Seed, m.Size, m.Revisions = a.chain.Seed, a.chain.BaseSize, a.chain.Steps
	return m
}

func (a storeArgs) config() objstore.Config {
	return objstore.Config{Create: true, NoCaps: a.nocaps, P1Only: a.p1only, CacheBytes: a.cache}
}

// storeFile is the one file every store benchmark writes.
const storeFile = "file"

// childIngest puts every revision of the history into a new store, timing
// only the Put calls. It reads the revisions from a generator process (see
// store_stream.go), so its peak RSS is the store's own plus the revision
// being read. It reports the store's sizes (Sizes "stored",
// "segment", "chain_max") and the first file id ("file").
func childIngest(ctx context.Context, args []string) (ChildResult, error) {
	a, err := parseStoreArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	s, err := objstore.Open(a.dir, a.config())
	if err != nil {
		return ChildResult{}, err
	}
	f, err := s.NewFile(storeFile)
	if err != nil {
		s.Close()
		return ChildResult{}, err
	}
	if a.memlim > 0 {
		debug.SetMemoryLimit(a.memlim)
	}
	hist, err := startHistory(ctx, args)
	if err != nil {
		s.Close()
		return ChildResult{}, err
	}
	var t Timer
	var total int64
	err = hist.each(func(n int, r streamRev) error {
		total += int64(len(r.data))
		if a.noput {
			return nil
		}
		req := objstore.PutRequest{File: f, Data: r.data, P1: revID(f, r.p1), P2: revID(f, r.p2)}
		t.Start()
		_, err := s.Put(ctx, req)
		t.Stop()
		return err
	})
	if err != nil {
		s.Close()
		return ChildResult{}, err
	}
	t.Start()
	err = s.Close()
	t.Stop()
	if err != nil {
		return ChildResult{}, err
	}
	res := t.Result(total)
	res.PeakRSS = ownPeakRSS()
	res.Sizes, err = storeSizes(a.dir, f)
	return res, err
}

// revID is revision n of file f, or null for n < 0.
func revID(f index.FileID, n int) index.RevID {
	if n < 0 {
		return index.NullRev
	}
	return index.RevID{File: f, Rev: index.Rev(n)}
}

// storeSizes reopens the store read-only and reports its Stats.
func storeSizes(dir string, f index.FileID) (map[string][]int64, error) {
	s, err := objstore.Open(dir, objstore.Config{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	st, err := s.Stats(context.Background())
	if err != nil {
		return nil, err
	}
	sizes := map[string][]int64{
		"stored": {int64(st.StoredBytes)}, "segment": {int64(st.SegmentBytes)},
		"chain_max": {int64(st.ChainMax)}, "file": {int64(f)},
		"snapshots": {st.ByKind["intermediate"] + st.ByKind["full"]},
	}
	for k, n := range st.ByKind {
		sizes["kind "+k] = []int64{n}
	}
	return sizes, nil
}

// childRead opens the store in a fresh process and reads one revision.
// The timed region is Open+Get; Sizes "get_ns" is the Get alone.
func childRead(ctx context.Context, args []string) (ChildResult, error) {
	a, err := parseStoreArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	var t Timer
	t.Start()
	s, err := objstore.Open(a.dir, objstore.Config{ReadOnly: true})
	if err != nil {
		return ChildResult{}, err
	}
	defer s.Close()
	g0 := time.Now()
	data, err := s.Get(ctx, revID(1, a.rev))
	get := time.Since(g0)
	t.Stop()
	if err != nil {
		return ChildResult{}, err
	}
	res := t.Result(int64(len(data)))
	res.Sizes = map[string][]int64{"get_ns": {int64(get)}}
	return res, nil
}

// childReadAll reads every revision of file 1, each rebuilt from the
// store (the fulltext cache is as small as -cache makes it), in a random
// order, and reports per revision: latency ("lat_ns", in revision order),
// CPU time of the process during the read ("cpu_ns": unlike wall time, not
// stretched when other processes take the core), stored bytes read
// ("read") and fulltext size ("size").
func childReadAll(ctx context.Context, args []string) (ChildResult, error) {
	a, err := parseStoreArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	s, err := objstore.Open(a.dir, objstore.Config{ReadOnly: true, CacheBytes: a.cache})
	if err != nil {
		return ChildResult{}, err
	}
	defer s.Close()
	meta, err := s.File(1)
	if err != nil {
		return ChildResult{}, err
	}
	n := int(meta.Revs)
	lat, cpu, read, size := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	order := rand.New(rand.NewPCG(7, 7)).Perm(n)
	if !a.shuffle {
		for i := range order {
			order[i] = i
		}
	}
	var t Timer
	var total int64
	for _, r := range order {
		before, err := s.Stats(ctx)
		if err != nil {
			return ChildResult{}, err
		}
		t0, c0 := time.Now(), processCPU()
		t.Start()
		data, err := s.Get(ctx, revID(1, r))
		t.Stop()
		lat[r], cpu[r] = int64(time.Since(t0)), int64(processCPU()-c0)
		if err != nil {
			return ChildResult{}, fmt.Errorf("rev %d: %w", r, err)
		}
		after, err := s.Stats(ctx)
		if err != nil {
			return ChildResult{}, err
		}
		read[r], size[r] = after.BytesRead-before.BytesRead, int64(len(data))
		total += int64(len(data))
	}
	res := t.Result(total)
	res.Sizes = map[string][]int64{"lat_ns": lat, "cpu_ns": cpu, "read": read, "size": size}
	return res, nil
}

// dirBytes is the disk space the files under dir take, as du counts it
// (allocated blocks), and their apparent size.
func dirBytes(dir string) (disk, apparent int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		apparent += fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			disk += st.Blocks * 512
		}
		return nil
	})
	return disk, apparent, err
}
