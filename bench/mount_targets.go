package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// fsKind is one of the file systems the mount suite compares.
type fsKind string

const (
	kindNative   fsKind = "native"   // a plain directory
	kindLoopback fsKind = "loopback" // go-fuse fs.NewLoopbackRoot, default options
	kindDeltafs  fsKind = "deltafs"  // deltafs mount, built from this checkout
)

var fsKinds = []fsKind{kindNative, kindLoopback, kindDeltafs}

// target is one mounted (or native) directory a workload runs in.
type target struct {
	kind  fsKind
	dir   string // where the workload runs
	store string // deltafs: the store
	base  string // everything of this target lives under base
	cmd   *exec.Cmd
	done  chan error
	cpu0  time.Duration
	// settles counts settle's snapshots (deltafs)
	settles int
	// stderr collects what the server prints, for its errors.
	stderr strings.Builder
	// image is the file system image mounted on base, if any
	image string
}

// readyTimeout bounds how long a mount may take to come up.
const readyTimeout = 60 * time.Second

// setup makes a fresh target of kind under the work directory: a new
// directory, a new loopback backing directory, or a new deltafs store;
// with freshFS, on a new file system mounted on its base directory.
func (e *Env) setup(kind fsKind, deltafsBin string, freshFS bool) (*target, error) {
	base, err := e.freshDir(filepath.Join("mount", string(kind)))
	if err != nil {
		return nil, err
	}
	t := &target{kind: kind, base: base, dir: filepath.Join(base, "mnt")}
	if freshFS {
		if t.image, err = mountFreshFS(base); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(t.dir, 0o755); err != nil {
		t.remove()
		return nil, err
	}
	switch kind {
	case kindNative:
		return t, nil
	case kindLoopback:
		back := filepath.Join(base, "backing")
		if err := os.MkdirAll(back, 0o755); err != nil {
			return nil, err
		}
		t.cmd = exec.Command(e.self, childCmd, "mount", loopbackOp, back, t.dir)
	case kindDeltafs:
		t.store = filepath.Join(base, "store")
		// A generous shutdown deadline: unmount waits for the recording
		// backlog, which the suite measures (phase "unmount").
		t.cmd = exec.Command(deltafsBin, "mount", "--shutdown-timeout", "20m", t.store, t.dir)
	}
	if err := t.start(); err != nil {
		t.remove()
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	return t, nil
}

// start runs the server and waits for its readiness line.
func (t *target) start() error {
	out, err := t.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	t.cmd.Stderr = &t.stderr
	if err := t.cmd.Start(); err != nil {
		return err
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if l := sc.Text(); !ok && (strings.Contains(l, "mounted") || l == loopbackReady) {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		io.Copy(io.Discard, out)
	}()
	t.done = make(chan error, 1)
	go func() { t.done <- t.cmd.Wait() }()
	select {
	case ok := <-ready:
		if !ok {
			return fmt.Errorf("server exited before it was ready: %s", firstLine(t.stderr.String()))
		}
	case <-time.After(readyTimeout):
		t.cmd.Process.Kill()
		return errors.New("server not ready in time")
	}
	t.cpu0 = t.serverCPU()
	return nil
}

// serverCPU is the user+system CPU the server process has used so far.
func (t *target) serverCPU() time.Duration {
	if t.cmd == nil || t.cmd.Process == nil {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(t.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// settle waits until the server has recorded everything and been idle
// (under settleCPU of CPU in a settleTick) for two ticks in a row, at
// most settleLimit: a workload's setup (M2's fill) leaves deltafs
// recording it in the background, and that recording belongs to the
// setup, not to the timed step after it. For deltafs a snapshot is the
// exact wait (it returns once everything reported is recorded); idle CPU
// alone can be fooled by a recorder waiting for the disk.
func (t *target) settle() {
	if t.kind == kindDeltafs {
		t.settles++
		if err := os.Mkdir(filepath.Join(t.dir, ".snapshots", fmt.Sprintf("settle-%d", t.settles)), 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "settle: %v\n", err)
		}
	}
	idle := 0
	for end := time.Now().Add(settleLimit); idle < 2 && time.Now().Before(end); {
		c0 := t.serverCPU()
		time.Sleep(settleTick)
		if t.serverCPU()-c0 < settleCPU {
			idle++
		} else {
			idle = 0
		}
	}
}

const (
	settleTick  = 500 * time.Millisecond
	settleCPU   = 30 * time.Millisecond
	settleLimit = 10 * time.Minute
)

// teardown stops the server (deltafs records everything pending first)
// and waits for it to exit.
func (t *target) teardown() error {
	if t.cmd == nil {
		return nil
	}
	t.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-t.done:
		if err != nil {
			return fmt.Errorf("%s server: %w: %s", t.kind, err, lastLine(t.stderr.String()))
		}
		return nil
	case <-time.After(3 * time.Minute):
		t.cmd.Process.Kill()
		exec.Command("umount", "-l", t.dir).Run()
		return fmt.Errorf("%s server did not exit", t.kind)
	}
}

// remove deletes everything of the target (after teardown).
func (t *target) remove() error {
	if t.image != "" {
		if err := unmountFreshFS(t.base, t.image); err != nil {
			return err
		}
	}
	return os.RemoveAll(t.base)
}

// loopbackOp is the child operation that serves a go-fuse loopback mount.
const loopbackOp = "loopback"

// loopbackReady is the line the loopback child prints once mounted.
const loopbackReady = "loopback ready"

// childLoopback mounts fs.NewLoopbackRoot(backing) on mnt with go-fuse's
// default options, prints loopbackReady, and serves until SIGTERM. It uses
// every core, as deltafs does (runChild sets GOMAXPROCS=1 for
// measurements).
func childLoopback(ctx context.Context, args []string) (ChildResult, error) {
	runtime.GOMAXPROCS(runtime.NumCPU())
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if len(args) != 2 {
		return ChildResult{}, errors.New("loopback: want BACKING MOUNTPOINT")
	}
	root, err := gofs.NewLoopbackRoot(args[0])
	if err != nil {
		return ChildResult{}, err
	}
	srv, err := gofs.Mount(args[1], root, nil)
	if err != nil {
		return ChildResult{}, fmt.Errorf("mount: %w", err)
	}
	fmt.Println(loopbackReady)
	<-ctx.Done()
	if err := srv.Unmount(); err != nil {
		exec.Command("umount", "-l", args[1]).Run()
	}
	srv.Wait()
	return ChildResult{}, nil
}

// buildDeltafs builds the deltafs binary from this checkout, or from the
// one -deltafs-src names.
func (e *Env) buildDeltafs() (string, error) {
	if e.Opts.DeltafsSrc != "" {
		return e.buildDeltafsFrom(e.Opts.DeltafsSrc)
	}
	return e.buildDeltafsFrom(".")
}

// buildDeltafsFrom builds ./cmd/deltafs of the module at root.
func (e *Env) buildDeltafsFrom(root string) (string, error) {
	bin := filepath.Join(e.Work, "deltafs")
	cmd := exec.CommandContext(e.ctx, "go", "build", "-o", bin, "./cmd/deltafs")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build deltafs: %w: %s", err, out)
	}
	return bin, nil
}
