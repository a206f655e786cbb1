package crashfs

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The file system is served by a child process: the test binary itself,
// re-executed with envServe set (init below serves and exits before any
// test runs). A process must not serve a FUSE mount whose files it maps
// itself: a page fault on such a mapping blocks its thread outside any
// system call, so the Go runtime cannot stop it for a garbage
// collection, and the collection waits for a fault that waits for the
// server, which is stopped (the go-fuse documentation warns of this).
// The store maps its files (badger), so the server lives apart.
//
// The parent talks to it over the child's stdin and stdout, one line a
// request and one a reply: "crash", "stats", "materialize DIR",
// "unmount". End of input unmounts (lazily) and exits, so a parent that
// dies leaves no mount behind.
const envServe = "DELTAFS_CRASHFS_SERVE"

func init() {
	if arg := os.Getenv(envServe); arg != "" {
		os.Exit(serveMain(arg))
	}
}

// serveArgs is what the child is given (JSON in envServe).
type serveArgs struct {
	Dir string
	Opt Options
}

func serveMain(arg string) int {
	var a serveArgs
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		fmt.Printf("err %v\n", err)
		return 2
	}
	f := newFS(a.Opt)
	if a.Opt.From != "" {
		if err := f.load(f.root, a.Opt.From, map[uint64]*obj{}); err != nil {
			fmt.Printf("err %v\n", err)
			return 1
		}
		f.stats = Stats{}
	}
	sec := time.Second
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:   "crashfs",
			Name:     "crashfs",
			Debug:    a.Opt.Debug,
			MaxWrite: 1 << 20,
		},
		// The kernel is the only writer: it may cache names and
		// attributes (sizes it learns from its own writes).
		EntryTimeout: &sec,
		AttrTimeout:  &sec,
	}
	server, err := fs.Mount(a.Dir, &node{fs: f, o: f.root}, opts)
	if err != nil {
		fmt.Printf("err mount on %s: %v\n", a.Dir, err)
		return 1
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "crash":
			f.mu.Lock()
			if !f.crashed && a.Opt.TornSeed != 0 {
				f.tear(a.Opt.TornSeed)
			}
			f.crashed = true
			f.mu.Unlock()
			fmt.Println("ok")
		case "stats":
			f.mu.Lock()
			b, _ := json.Marshal(f.stats)
			f.mu.Unlock()
			fmt.Printf("ok %s\n", b)
		case "materialize":
			if err := f.materializeAll(arg); err != nil {
				fmt.Printf("err %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			} else {
				fmt.Println("ok")
			}
		case "unmount":
			f.mu.Lock()
			tries := 30
			if f.crashed {
				tries = 1 // a dead store's files stay open: no use waiting
			}
			f.mu.Unlock()
			busy, err := unmount(server, a.Dir, tries)
			switch {
			case err != nil:
				fmt.Printf("err %v\n", err)
			case busy:
				// Detached, with files still open in the parent:
				// serve them (a mapped page the parent faults in
				// would be a SIGBUS without a server) until the
				// parent exits.
				fmt.Println("ok busy")
				continue
			default:
				fmt.Println("ok")
			}
			return 0
		default:
			fmt.Printf("err unknown request %q\n", cmd)
		}
	}
	unmount(server, a.Dir, 1)
	return 0
}

// unmount unmounts, trying tries times 100 ms apart while the mount is busy, and
// detaches it lazily if it stays busy (a crashed store may still hold
// files open; the server then serves on until they are closed or this
// process exits).
func unmount(server *fuse.Server, dir string, tries int) (busy bool, err error) {
	for i := range tries {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		if err = server.Unmount(); err == nil {
			break
		}
	}
	if err != nil {
		// busy (go-fuse's fusermount3 error does not say so in a way
		// errors.Is knows)
		return true, syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	return false, nil
}

// FS is a mounted crashfs, served by a child process.
type FS struct {
	dir string
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner

	mu      sync.Mutex // one request at a time
	crashed bool
	done    bool
}

// Mount mounts a fresh crashfs on dir, which must exist and be empty,
// served by a child process (this binary: it must import this package,
// as any test binary using it does).
func Mount(dir string, opt Options) (*FS, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	arg, err := json.Marshal(serveArgs{Dir: dir, Opt: opt})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envServe+"="+string(arg))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &FS{dir: dir, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if line, err := f.reply(); err != nil || line != "ready" {
		in.Close()
		cmd.Wait()
		return nil, fmt.Errorf("crashfs: mount on %s: %q, %v", dir, line, err)
	}
	return f, nil
}

func (f *FS) reply() (string, error) {
	if !f.out.Scan() {
		if err := f.out.Err(); err != nil {
			return "", err
		}
		return "", io.ErrUnexpectedEOF
	}
	return f.out.Text(), nil
}

// request sends one request and returns what its reply says after "ok".
func (f *FS) request(req string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return "", errors.New("crashfs: unmounted")
	}
	if _, err := fmt.Fprintln(f.in, req); err != nil {
		return "", fmt.Errorf("crashfs: %s: %w", req, err)
	}
	line, err := f.reply()
	if err != nil {
		return "", fmt.Errorf("crashfs: %s: %w", req, err)
	}
	if rest, ok := strings.CutPrefix(line, "err "); ok {
		return "", fmt.Errorf("crashfs: %s: %s", req, rest)
	}
	if line == "ok" {
		return "", nil
	}
	rest, ok := strings.CutPrefix(line, "ok ")
	if !ok {
		return "", fmt.Errorf("crashfs: %s: reply %q", req, line)
	}
	return rest, nil
}

// Dir is the mount point.
func (f *FS) Dir() string { return f.dir }

// Crash cuts the power: the durable state is frozen as it is, and every
// later change (write, truncate, create, rename, fsync, ...) fails with
// EIO. Reads still see the current state (see the package doc). Crash
// may be called from any goroutine, while the file system is busy: what
// returned before Crash is on the durable side of the cut or not by the
// model's rules, what starts after it fails.
func (f *FS) Crash() error {
	_, err := f.request("crash")
	if err == nil {
		f.mu.Lock()
		f.crashed = true
		f.mu.Unlock()
	}
	return err
}

// Stats returns the counts so far.
func (f *FS) Stats() (Stats, error) {
	var st Stats
	b, err := f.request("stats")
	if err == nil {
		err = json.Unmarshal([]byte(b), &st)
	}
	return st, err
}

// Materialize writes the durable state into dir (which must exist and be
// empty) as a real directory tree: what a reboot after Crash would show.
// Without Crash, it is the durable state of the live file system.
func (f *FS) Materialize(dir string) error {
	_, err := f.request("materialize " + dir)
	return err
}

// Unmount unmounts the file system and ends its server. A mount still
// busy after a few seconds (a crashed store that still holds files open)
// is detached lazily, and busy says so.
func (f *FS) Unmount() (busy bool, err error) {
	rest, err := f.request("unmount")
	f.mu.Lock()
	f.done = true
	f.mu.Unlock()
	if rest == "busy" {
		// the server serves on until this process exits
		return true, err
	}
	f.in.Close()
	if werr := f.cmd.Wait(); err == nil && werr != nil {
		err = werr
	}
	return false, err
}

// MountT mounts a fresh crashfs on a directory in t.TempDir() and
// unmounts it in t.Cleanup, failing t if that fails or if a mount never
// crashed is still busy. It needs FUSE (testutil.RequireFUSE: a skip, or
// a failure under CI=true). Debug follows -v and DELTAFS_FUSE_DEBUG=1.
func MountT(t testing.TB, opt Options) *FS {
	t.Helper()
	testutil.RequireFUSE(t)
	opt.Debug = opt.Debug || testing.Verbose() && os.Getenv("DELTAFS_FUSE_DEBUG") == "1"
	f, err := Mount(t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.mu.Lock()
		crashed, done := f.crashed, f.done
		f.mu.Unlock()
		if done {
			return
		}
		busy, err := f.Unmount()
		if err != nil || busy && !crashed {
			t.Errorf("crashfs: unmount %s: busy %v, %v", f.dir, busy, err)
		}
	})
	return f
}

// CrashT is Crash, failing t if it fails.
func (f *FS) CrashT(t testing.TB) {
	t.Helper()
	if err := f.Crash(); err != nil {
		t.Fatal(err)
	}
}

// MaterializeT materializes into a fresh directory in t.TempDir() and
// returns it, failing t if that fails.
func (f *FS) MaterializeT(t testing.TB) string {
	t.Helper()
	img := t.TempDir()
	if err := f.Materialize(img); err != nil {
		t.Fatal(err)
	}
	return img
}
