package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Sample is one measurement: wall and CPU time of the measured region,
// the peak RSS of the process that ran it, and what the region reported.
type Sample struct {
	Wall   time.Duration
	CPU    time.Duration // user + system
	MaxRSS int64         // bytes
	Result ChildResult
}

// ChildResult is what a child operation prints (as JSON) for its parent:
// the timing of the measured region and any sizes it wants to report.
type ChildResult struct {
	WallNS int64 `json:"wall_ns"`
	CPUNS  int64 `json:"cpu_ns"`
	// Bytes is the payload the region processed (for throughput).
	Bytes int64 `json:"bytes"`
	// Sizes are named per-step sizes (e.g. delta bytes of each revision).
	Sizes map[string][]int64 `json:"sizes,omitempty"`
	// PeakRSS is the measured process's own peak resident set in bytes.
	PeakRSS int64 `json:"peak_rss"`
}

// ChildFunc is one operation run in a child process (see Env.Child). It
// times its own region with a Timer and returns the result.
type ChildFunc func(ctx context.Context, args []string) (ChildResult, error)

// Exec runs an external program and measures the whole process: wall,
// user+system CPU and peak RSS. It starts the program through a small
// wrapper (the bench binary re-executed, see execChild) because Linux
// charges a parent's peak RSS to the ru_maxrss of a child it vforks, as
// os/exec does: started directly from the runner, whose heap holds
// generated workloads, every program would seem to use at least as much
// memory as the runner. Through the wrapper the floor is the wrapper's own
// few MiB (see RSSFloor).
func (e *Env) Exec(name string, args ...string) (Sample, error) {
	return e.Child("", execOp, append([]string{name}, args...)...)
}

// execOp is the child operation that runs and measures a program.
const execOp = "exec"

// execChild runs args as a program and reports its wall and CPU time and
// peak RSS.
func execChild(ctx context.Context, args []string) (ChildResult, error) {
	if len(args) == 0 {
		return ChildResult{}, errors.New("exec: no program")
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return ChildResult{}, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, firstLine(stderr.String()))
	}
	s := processSample(cmd.ProcessState, wall)
	return ChildResult{WallNS: int64(s.Wall), CPUNS: int64(s.CPU), PeakRSS: s.MaxRSS}, nil
}

// RSSFloor measures the peak RSS that Exec reports for a program that
// does nothing (/bin/true): the wrapper's share of every Exec figure.
func (e *Env) RSSFloor() int64 {
	s, err := e.Exec("true")
	if err != nil {
		return 0
	}
	return s.MaxRSS
}

// Child runs operation op of suite in a fresh copy of the bench binary
// (GOMAXPROCS=1) and returns the region's timing with the child's peak RSS.
func (e *Env) Child(suite, op string, args ...string) (Sample, error) {
	argv := append([]string{childCmd, suite, op}, args...)
	cmd := exec.CommandContext(e.ctx, e.self, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Sample{}, fmt.Errorf("child %s %s: %w: %s", suite, op, err, firstLine(stderr.String()))
	}
	var res ChildResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return Sample{}, fmt.Errorf("child %s %s: bad result: %w", suite, op, err)
	}
	s := processSample(cmd.ProcessState, 0)
	s.Wall, s.CPU, s.Result = time.Duration(res.WallNS), time.Duration(res.CPUNS), res
	if res.PeakRSS > 0 {
		// ru_maxrss of a vforked child includes the runner's own peak;
		// the child's VmHWM does not.
		s.MaxRSS = res.PeakRSS
	}
	return s, nil
}

func processSample(ps interface {
	UserTime() time.Duration
	SystemTime() time.Duration
	SysUsage() any
}, wall time.Duration) Sample {
	s := Sample{Wall: wall, CPU: ps.UserTime() + ps.SystemTime()}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		s.MaxRSS = ru.Maxrss * 1024 // Linux reports KiB
	}
	return s
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// runChild is the child side of Env.Child: it runs one operation on one
// core and prints its ChildResult as JSON on stdout.
func runChild(ctx context.Context, args []string, stdout io.Writer) error {
	runtime.GOMAXPROCS(1)
	if len(args) < 2 {
		return errors.New("child: want SUITE OP [ARGS]")
	}
	f := childFunc(args[0], args[1])
	if f == nil {
		return fmt.Errorf("child: no operation %q %q", args[0], args[1])
	}
	res, err := f(ctx, args[2:])
	if err != nil {
		return fmt.Errorf("child %s %s: %w", args[0], args[1], err)
	}
	if res.PeakRSS == 0 {
		res.PeakRSS = ownPeakRSS()
	}
	return json.NewEncoder(stdout).Encode(res)
}

// childFunc finds a child operation: the generic exec wrapper (suite ""),
// or an operation of a registered suite.
func childFunc(suite, op string) ChildFunc {
	if suite == "" && op == execOp {
		return execChild
	}
	for _, s := range suites() {
		if f, ok := s.Children[op]; ok && s.Name == suite {
			return f
		}
	}
	return nil
}

// ownPeakRSS is this process's VmHWM (peak resident set of its own
// address space) from /proc/self/status, in bytes; 0 if unknown.
func ownPeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	var kb int64
	if _, err := fmt.Sscanf(field(string(b), "VmHWM:"), "%d kB", &kb); err != nil {
		return 0
	}
	return kb * 1024
}

// Timer accumulates wall and CPU time (getrusage of the whole process)
// over the regions between Start and Stop.
type Timer struct {
	wall, cpu time.Duration
	wall0     time.Time
	cpuStart  time.Duration
}

// Start begins a timed region.
func (t *Timer) Start() {
	t.cpuStart = processCPU()
	t.wall0 = time.Now()
}

// Stop ends a timed region and adds it to the totals.
func (t *Timer) Stop() {
	t.wall += time.Since(t.wall0)
	t.cpu += processCPU() - t.cpuStart
}

// Result returns the totals as a ChildResult for bytes of payload.
func (t *Timer) Result(bytes int64) ChildResult {
	return ChildResult{WallNS: int64(t.wall), CPUNS: int64(t.cpu), Bytes: bytes}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Summary is the median of several Samples.
type Summary struct {
	Runs   int
	Wall   time.Duration
	CPU    time.Duration
	MaxRSS int64
	Bytes  int64              // payload of the first run
	Sizes  map[string][]int64 // sizes of the first run (deterministic)
}

// Repeat measures f n times and summarises the runs by their medians.
func Repeat(n int, f func() (Sample, error)) (Summary, error) {
	var walls, cpus []time.Duration
	var rss []int64
	var sum Summary
	for i := range n {
		s, err := f()
		if err != nil {
			return Summary{}, err
		}
		if i == 0 {
			sum.Bytes, sum.Sizes = s.Result.Bytes, s.Result.Sizes
		}
		walls, cpus, rss = append(walls, s.Wall), append(cpus, s.CPU), append(rss, s.MaxRSS)
	}
	sum.Runs, sum.Wall, sum.CPU, sum.MaxRSS = n, median(walls), median(cpus), median(rss)
	return sum, nil
}

// median of xs (the lower middle for an even count); xs is sorted in place.
func median[T int64 | time.Duration](xs []T) T {
	slices.Sort(xs)
	return xs[(len(xs)-1)/2]
}

// MBps is payload bytes per second of d, in 10^6 bytes.
func MBps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / d.Seconds()
}
