package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/deltafs/deltafs/bench/workload"
	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

// H2: "deltafs cat" of the oldest, a middle and the newest revision of
// S1's file (8 MiB, 600 revisions), on the unmounted store and through a
// running mount. The chain caps promise that no revision costs much more
// than the newest to read: the target is every revision under 3x the
// newest's time.
//
// The store is S1's ingest (objstore.Put of every revision, the store
// suite's child), laid out as a mount leaves it: live/FILE holds the
// newest content with a live identity in the xattr user.deltafs.id, and
// live.ids maps it to the store file (mount/storesink.go).

// h2File is the live name of S1's file.
const h2File = "s1.txt"

// h2Target is the chain caps' promise.
const h2Target = 3.0

// h2Rev is one revision's figures in one mode.
type h2Rev struct {
	rev        int
	chain      uint32
	chainBytes uint64
	first      Sample        // the first call (a mount's caches cold)
	sum        Summary       // medians of the calls
	serverCPU  time.Duration // the mount's CPU per call (mounted)
}

// cpu is the CPU a call costs: the CLI's and, mounted, the mount's.
func (h h2Rev) cpu() time.Duration { return h.sum.CPU + h.serverCPU }

type h2Result struct {
	chain   workload.Chain
	size    uint64
	modes   []string
	rows    [][3]h2Rev // per mode: oldest, middle, newest
	runs    int
	ingest  time.Duration
	chainMx uint32
}

func runH2(e *Env, bin string) (Report, error) {
	r, err := e.h2Run(bin)
	if err != nil {
		return Report{}, err
	}
	return Report{Tables: []Table{r.table(), r.targets()}}, nil
}

func (e *Env) h2Run(bin string) (h2Result, error) {
	c := workload.StoreS1()
	r := h2Result{chain: c, runs: max(e.Opts.Runs, 5)}
	base, err := e.freshDir(filepath.Join("history", "h2"))
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(base)
	store, mnt := filepath.Join(base, "store"), filepath.Join(base, "mnt")
	e.Logf("H2: ingest of %s", c.Doc)
	t0 := time.Now()
	if _, err := e.Child("store", "ingest", append([]string{"-dir", store}, chainFlags(c)...)...); err != nil {
		return r, err
	}
	r.ingest = time.Since(t0)
	revs := [3]int{0, middleRev(c), c.Steps}
	var info [3]h2Rev
	if info, r.size, r.chainMx, err = h2Layout(store, revs); err != nil {
		return r, fmt.Errorf("lay out the live file: %w", err)
	}
	offline, err := e.h2Cat(bin, info, nil, "--store", store, h2File)
	if err != nil {
		return r, fmt.Errorf("unmounted: %w", err)
	}
	r.modes, r.rows = append(r.modes, "unmounted (deltafs cat --store)"), append(r.rows, offline)
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return r, err
	}
	t := &target{kind: kindDeltafs, base: base, dir: mnt, store: store, cmd: exec.Command(bin, "mount", store, mnt)}
	if err := t.start(); err != nil {
		return r, err
	}
	mounted, err := e.h2Cat(bin, info, t.serverCPU, filepath.Join(mnt, h2File))
	if err = errors.Join(err, t.teardown()); err != nil {
		return r, fmt.Errorf("mounted: %w", err)
	}
	r.modes, r.rows = append(r.modes, "mounted (deltafs cat MOUNT/FILE)"), append(r.rows, mounted)
	return r, nil
}

// h2Cat times "deltafs cat ARGS --rev N" (output to /dev/null) for each
// revision: the first call, then the median of r.runs more; server, if
// not nil, reads the mount's CPU so far.
func (e *Env) h2Cat(bin string, revs [3]h2Rev, server func() time.Duration, args ...string) ([3]h2Rev, error) {
	out := revs
	for i := range out {
		argv := append(append([]string{"cat"}, args...), "--rev", strconv.Itoa(out[i].rev))
		e.Logf("H2: deltafs %v", argv)
		var err error
		if out[i].first, err = e.Exec(bin, argv...); err != nil {
			return out, err
		}
		var c0 time.Duration
		if server != nil {
			c0 = server()
		}
		if out[i].sum, err = Repeat(max(e.Opts.Runs, 5), func() (Sample, error) { return e.Exec(bin, argv...) }); err != nil {
			return out, err
		}
		if server != nil {
			out[i].serverCPU = (server() - c0) / time.Duration(out[i].sum.Runs)
		}
	}
	return out, nil
}

// h2Layout gives the store a live file holding the newest revision, as a
// mount leaves it, and returns the chain facts of revs.
func h2Layout(store string, revs [3]int) ([3]h2Rev, uint64, uint32, error) {
	var out [3]h2Rev
	st, err := objstore.Open(store, objstore.Config{})
	if err != nil {
		return out, 0, 0, err
	}
	defer st.Close()
	const fid = index.FileID(1) // the ingest child's only file
	hist, err := st.History(context.Background(), fid)
	if err != nil {
		return out, 0, 0, err
	}
	var chainMax uint32
	for _, h := range hist {
		chainMax = max(chainMax, h.ChainLen)
	}
	for i, rev := range revs {
		h := hist[rev]
		out[i] = h2Rev{rev: rev, chain: h.ChainLen, chainBytes: h.ChainBytes}
	}
	newest := hist[len(hist)-1]
	data, err := st.Get(context.Background(), newest.ID(fid))
	if err != nil {
		return out, 0, 0, err
	}
	live := filepath.Join(store, "live")
	if err := os.MkdirAll(live, 0o755); err != nil {
		return out, 0, 0, err
	}
	p := filepath.Join(live, h2File)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return out, 0, 0, err
	}
	id := fs.NewFileID()
	if err := unix.Setxattr(p, fs.XattrID, id[:], 0); err != nil {
		return out, 0, 0, err
	}
	rec := binary.BigEndian.AppendUint64(append([]byte{}, id[:]...), uint64(fid))
	return out, newest.Size, chainMax, os.WriteFile(filepath.Join(store, "live.ids"), rec, 0o600)
}

func (r h2Result) table() Table {
	t := Table{Title: "H2: deltafs cat of old revisions of S1's file",
		Doc: fmt.Sprintf("%s; %s per revision, chain max %d. Each call is the whole `deltafs cat --rev N > /dev/null` "+
			"process: unmounted it opens the store itself, mounted it asks the running mount over the control socket, "+
			"whose rebuilt-text cache is cold at the first call and warm after (it holds what fits in objstore's CacheBytes). "+
			"Median of %d calls after the first. CPU is the CLI's plus, mounted, the mount's per call (from /proc, 10 ms ticks); "+
			"the ratios to the newest are of wall p50 and of that CPU.",
			r.chain.Doc, mb(int64(r.size)), r.chainMx, r.runs),
		Header: []string{"mode", "revision", "chain", "chain bytes read", "first call", "wall p50", "CPU p50", "CLI peak RSS", "wall vs newest", "CPU vs newest"}}
	names := [3]string{"oldest", "middle", "newest"}
	for m, mode := range r.modes {
		row := r.rows[m]
		for i, h := range row {
			t.Add(mode, fmt.Sprintf("%s (%d)", names[i], h.rev), fmt.Sprint(h.chain), mb(int64(h.chainBytes)),
				ms(h.first.Wall), ms(h.sum.Wall), ms(h.cpu()), mb(h.sum.MaxRSS),
				fmt.Sprintf("%.2fx", float64(h.sum.Wall)/float64(row[2].sum.Wall)),
				fmt.Sprintf("%.2fx", float64(h.cpu())/float64(max(row[2].cpu(), 1))))
		}
	}
	return t
}

func (r h2Result) targets() Table {
	t := Table{Title: "H2 targets", Header: []string{"target", "measured", "met"}}
	for m, mode := range r.modes {
		row := r.rows[m]
		first, wall, cpu := 0.0, 0.0, 0.0
		for _, h := range row {
			first = max(first, float64(h.first.Wall)/float64(row[2].first.Wall))
			wall = max(wall, float64(h.sum.Wall)/float64(row[2].sum.Wall))
			cpu = max(cpu, float64(h.cpu())/float64(max(row[2].cpu(), 1)))
		}
		met := "yes"
		if max(first, wall, cpu) >= h2Target {
			met = "no"
		}
		t.Add(fmt.Sprintf("%s: any revision under %.0fx the newest", mode, h2Target),
			fmt.Sprintf("worst %.2fx (first call), %.2fx (wall p50), %.2fx (CPU p50)", first, wall, cpu), met)
	}
	return t
}
