package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/deltafs/deltafs/bench/workload"
)

// The footprint suite: the memory of a busy mount and of the same mount
// left idle afterwards. F1 runs a deterministic mixed workload (edits,
// appends, atomic saves, renames, unlinks, reads, directory listings,
// snapshots and .history reads over a few thousand small text files)
// through a deltafs mount and samples the mount's RSS throughout, then
// leaves it idle and samples again.

func footprintSuite() Suite {
	return Suite{
		Name:     "footprint",
		Doc:      "F1: mount RSS during a mixed workload on a few thousand files and when idle afterwards",
		Run:      runFootprint,
		Children: map[string]ChildFunc{"work": childFootprintWork},
	}
}

// fpArgs are the arguments of the F1 workload.
type fpArgs struct {
	dir       string
	files     int
	ops       int
	snapEvery int // a snapshot every N operations (0: none)
	histEvery int // a .history listing and read every N operations (0: none)
	seed      uint64
}

func (a fpArgs) argv() []string {
	return []string{"-dir", a.dir, "-files", strconv.Itoa(a.files), "-ops", strconv.Itoa(a.ops),
		"-snap-every", strconv.Itoa(a.snapEvery), "-hist-every", strconv.Itoa(a.histEvery),
		"-seed", strconv.FormatUint(a.seed, 10)}
}

func parseFPArgs(args []string) (fpArgs, error) {
	var a fpArgs
	fs := flag.NewFlagSet("footprint child", flag.ContinueOnError)
	fs.StringVar(&a.dir, "dir", "", "directory to work in")
	fs.IntVar(&a.files, "files", 3000, "files")
	fs.IntVar(&a.ops, "ops", 100_000, "operations")
	fs.IntVar(&a.snapEvery, "snap-every", 5000, "a snapshot every N operations (0: none)")
	fs.IntVar(&a.histEvery, "hist-every", 500, "a .history listing and read every N operations (0: none)")
	fs.Uint64Var(&a.seed, "seed", 61, "workload seed")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if a.dir == "" || a.files < 1 || a.ops < 0 {
		return a, errors.New("-dir and -files >= 1 are required")
	}
	return a, nil
}

// fpDirs is how many directories the files are spread over.
const fpDirs = 30

// fpState is the workload's model of the tree: each slot's current path
// (empty: deleted) and content.
type fpState struct {
	a     fpArgs
	text  *workload.Text
	r     *rand.Rand
	path  []string
	body  [][]byte
	moves int
	snaps int
	count map[string]int
}

func childFootprintWork(_ context.Context, args []string) (ChildResult, error) {
	a, err := parseFPArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	var t Timer
	t.Start()
	counts, err := runFootprintWork(a)
	t.Stop()
	if err != nil {
		return ChildResult{}, err
	}
	res := t.Result(0)
	res.Sizes = map[string][]int64{}
	for k, v := range counts {
		res.Sizes[k] = []int64{int64(v)}
	}
	return res, nil
}

// runFootprintWork runs the workload of a in a.dir and returns how many
// operations of each kind it did. The same arguments give the same
// sequence of operations and bytes.
func runFootprintWork(a fpArgs) (map[string]int, error) {
	text := workload.NewText(a.seed)
	s := &fpState{a: a, text: text, r: text.Rand(), path: make([]string, a.files),
		body: make([][]byte, a.files), count: map[string]int{}}
	for d := range fpDirs {
		if err := os.MkdirAll(filepath.Join(a.dir, fmt.Sprintf("d%02d", d)), 0o755); err != nil {
			return nil, err
		}
	}
	for i := range a.files {
		if err := s.create(i); err != nil {
			return nil, err
		}
	}
	for n := 1; n <= a.ops; n++ {
		if err := s.op(); err != nil {
			return s.count, fmt.Errorf("operation %d: %w", n, err)
		}
		if a.snapEvery > 0 && n%a.snapEvery == 0 {
			s.snaps++
			s.count["snapshot"]++
			if err := os.Mkdir(filepath.Join(a.dir, ".snapshots", fmt.Sprintf("fp-%d", s.snaps)), 0o755); err != nil {
				return s.count, err
			}
		}
		if a.histEvery > 0 && n%a.histEvery == 0 {
			if err := s.history(); err != nil {
				return s.count, err
			}
		}
	}
	return s.count, nil
}

// create makes slot i a new file of 1-16 KiB under a fresh name.
func (s *fpState) create(i int) error {
	s.moves++
	s.path[i] = filepath.Join(s.a.dir, fmt.Sprintf("d%02d", s.r.IntN(fpDirs)), fmt.Sprintf("f%d-%d.txt", i, s.moves))
	s.body[i] = s.text.Fill(1024 + s.r.IntN(15*1024))
	s.count["create"]++
	return os.WriteFile(s.path[i], s.body[i], 0o644)
}

// op does one operation on a random slot.
func (s *fpState) op() error {
	i := s.r.IntN(s.a.files)
	if s.path[i] == "" {
		return s.create(i)
	}
	p := s.path[i]
	switch k := s.r.IntN(100); {
	case k < 35: // edit in place: rewrite with O_TRUNC
		s.edit(i)
		s.count["edit"]++
		return os.WriteFile(p, s.body[i], 0o644)
	case k < 50: // append a line or a few
		add := s.text.Append(nil, 40+s.r.IntN(400))
		s.body[i] = append(s.body[i], add...)
		s.count["append"]++
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = f.Write(add)
		return errors.Join(err, f.Close())
	case k < 58: // atomic save: write a temporary file, rename it over
		s.edit(i)
		s.count["save"]++
		return atomicSave(p, s.body[i])
	case k < 66: // rename to a new name, maybe in another directory
		s.moves++
		np := filepath.Join(s.a.dir, fmt.Sprintf("d%02d", s.r.IntN(fpDirs)), fmt.Sprintf("f%d-%d.txt", i, s.moves))
		s.count["rename"]++
		if err := os.Rename(p, np); err != nil {
			return err
		}
		s.path[i] = np
		return nil
	case k < 72: // unlink; the slot is created again when next drawn
		s.path[i], s.body[i] = "", nil
		s.count["unlink"]++
		return os.Remove(p)
	case k < 94: // read the whole file and check it
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if string(b) != string(s.body[i]) {
			return fmt.Errorf("%s: read %d bytes, want %d", p, len(b), len(s.body[i]))
		}
		s.count["read"]++
		return nil
	default: // list the file's directory
		s.count["readdir"]++
		_, err := os.ReadDir(filepath.Dir(p))
		return err
	}
}

// edit replaces a random stretch of slot i's text (up to 200 bytes) with
// new text of up to 200 bytes.
func (s *fpState) edit(i int) {
	b := s.body[i]
	at := s.r.IntN(len(b) + 1)
	end := min(len(b), at+s.r.IntN(200))
	nb := append([]byte{}, b[:at]...)
	nb = s.text.Append(nb, s.r.IntN(200))
	s.body[i] = append(nb, b[end:]...)
}

// history lists .history/FILE/ of a random live file and reads its
// oldest listed revision.
func (s *fpState) history() error {
	i := s.r.IntN(s.a.files)
	if s.path[i] == "" {
		return nil
	}
	rel, err := filepath.Rel(s.a.dir, s.path[i])
	if err != nil {
		return err
	}
	h := filepath.Join(s.a.dir, ".history", rel)
	ents, err := os.ReadDir(h)
	if err != nil {
		return err
	}
	s.count["history"]++
	if len(ents) == 0 {
		return nil
	}
	f, err := os.Open(filepath.Join(h, ents[0].Name()))
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, f)
	return errors.Join(err, f.Close())
}

// rssSampler samples a process's VmRSS every tick until stopped.
type rssSampler struct {
	pid  string
	mu   sync.Mutex
	max  int64
	stop chan struct{}
	done chan struct{}
}

func sampleRSS(pid string, tick time.Duration) *rssSampler {
	s := &rssSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			if r := procKB(pid, "VmRSS:"); r > 0 {
				s.mu.Lock()
				s.max = max(s.max, r)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the largest VmRSS seen.
func (s *rssSampler) Stop() int64 {
	close(s.stop)
	<-s.done
	return s.max
}

// fpIdle is how long F1 leaves the mount idle after the workload, and
// fpIdleSamples the points at which it reads the mount's RSS.
var fpIdleSamples = []time.Duration{10 * time.Second, 30 * time.Second, 60 * time.Second, 120 * time.Second}

// fpShapes are the F1 workloads: files and operations.
var fpShapes = []fpArgs{
	{files: 3000, ops: 100_000, snapEvery: 5000, histEvery: 500, seed: 61},
}

func runFootprint(e *Env) (Report, error) {
	bin, err := e.buildDeltafs()
	if err != nil {
		return Report{}, err
	}
	t := Table{Title: "F1: mount RSS, mixed workload then idle",
		Doc: "One deltafs mount per row: the workload (`bench __child footprint work`, one process) makes FILES " +
			"files of 1-16 KiB text in 30 directories, then does OPS operations on random files (35% edits rewritten " +
			"with O_TRUNC, 15% appends, 8% atomic saves, 8% renames, 6% unlinks (made again when next drawn), 22% " +
			"reads, 6% directory listings), a snapshot every 5,000 operations and a `.history/FILE/` listing and read " +
			"every 500. RSS is the mount's VmRSS (sampled every 250 ms during the workload), peak is its VmHWM; " +
			"idle figures are read after the workload, the mount left alone.",
		Header: []string{"files", "ops", "wall", "mount CPU", "RSS at start", "peak RSS", "RSS at end"}}
	for _, d := range fpIdleSamples {
		t.Header = append(t.Header, "idle "+d.String())
	}
	for _, sh := range fpShapes {
		if e.Opts.Only != "" && !e.Opts.selected("F1") {
			continue
		}
		row, err := e.f1Run(bin, sh)
		if err != nil {
			return Report{}, err
		}
		t.Add(row...)
	}
	rep := Report{Tables: []Table{t}}
	if src := e.Opts.DeltafsSrc; src != "" && src != "." {
		rep.Notes = append(rep.Notes, "deltafs built from "+src+".")
	}
	return rep, nil
}

func (e *Env) f1Run(bin string, sh fpArgs) ([]string, error) {
	tg, err := e.setup(kindDeltafs, bin, false)
	if err != nil {
		return nil, err
	}
	defer tg.remove()
	pid := strconv.Itoa(tg.cmd.Process.Pid)
	rss0 := procKB(pid, "VmRSS:")
	sh.dir = tg.dir
	e.Logf("F1: %d files, %d operations", sh.files, sh.ops)
	sampler := sampleRSS(pid, 250*time.Millisecond)
	s, err := e.Child("footprint", "work", sh.argv()...)
	peakSampled := sampler.Stop()
	if err != nil {
		tg.teardown()
		return nil, err
	}
	end := procKB(pid, "VmRSS:")
	cpu := tg.serverCPU() - tg.cpu0
	e.Logf("F1: workload done in %s (mount CPU %s), RSS %s, peak %s (sampled %s)", s.Wall.Round(time.Millisecond),
		cpu.Round(time.Millisecond), mibs(end), mibs(procKB(pid, "VmHWM:")), mibs(peakSampled))
	start := time.Now()
	var idle []string
	for _, d := range fpIdleSamples {
		time.Sleep(time.Until(start.Add(d)))
		r := procKB(pid, "VmRSS:")
		e.Logf("F1: idle %s: RSS %s", d, mibs(r))
		idle = append(idle, mibs(r))
	}
	peak := procKB(pid, "VmHWM:")
	if err := tg.teardown(); err != nil {
		return nil, err
	}
	row := []string{thousands(sh.files), thousands(sh.ops), s.Wall.Round(100 * time.Millisecond).String(),
		cpu.Round(100 * time.Millisecond).String(), mibs(rss0), mibs(peak), mibs(end)}
	return append(row, idle...), nil
}
