package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/mount"
	"github.com/deltafs/deltafs/objstore"
)

// mountProc is a "deltafs mount" subprocess.
type mountProc struct {
	*testutil.Proc
	mnt string
}

// startMount runs the built binary's mount and waits for its readiness
// line.
func startMount(t *testing.T, store, mnt string, flags ...string) *mountProc {
	t.Helper()
	testutil.RequireFUSE(t)
	cmd := exec.Command(binary, append(append([]string{"mount"}, flags...), store, mnt)...)
	proc := testutil.StartReady(t, cmd, 30*time.Second, syscall.SIGTERM, func(l string) bool {
		return strings.HasPrefix(l, "deltafs: mounted ")
	})
	return &mountProc{Proc: proc, mnt: mnt}
}

// newMountDirs returns a store path and a fresh, empty mount point in a
// temporary directory.
func newMountDirs(t *testing.T) (store, mnt string) {
	t.Helper()
	dir := t.TempDir()
	store, mnt = filepath.Join(dir, "work.dfs"), filepath.Join(dir, "work")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	return store, mnt
}

// stop sends sig and checks for exit 0 and no mount left behind.
func (p *mountProc) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
}

func (p *mountProc) wait(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("mount process: %v; stderr %q", err, p.Stderr.String())
		}
	case <-time.After(60 * time.Second):
		p.Cmd.Process.Kill()
		t.Fatal("mount process did not exit")
	}
	if p.Stderr.Len() != 0 {
		t.Errorf("mount process wrote to stderr: %q", p.Stderr.String())
	}
	if testutil.Mounted(p.mnt) {
		t.Fatalf("%s still in /proc/self/mountinfo", p.mnt)
	}
}

// TestSIGHUPUnmountsCleanly: closing the terminal of a mount in the
// foreground (SIGHUP) records what is pending and unmounts, as SIGTERM
// does. The mount died of it (exit 129), leaving a dead mount point and
// its pending changes to the next mount (a user review).
func TestSIGHUPUnmountsCleanly(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	if err := os.WriteFile(filepath.Join(mnt, "notes.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.stop(t, syscall.SIGHUP) // exit 0, nothing on stderr, unmounted
	if r := runBinary(t, nil, "cat", "--store", store, "notes.txt"); r.code != 0 || r.stdout != "hello\n" {
		t.Fatalf("cat after the hangup: %+v", r)
	}

	// A busy mount: the terminal's close may send SIGHUP twice, which
	// must not give up the wait for the open file as a second Ctrl-C does.
	p = startMount(t, store, mnt)
	f, err := os.OpenFile(filepath.Join(mnt, "notes.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustSignal(t, p, syscall.SIGHUP)
	waitStderr(t, p, "deltafs: mount: waiting up to 1m0s for 1 open file")
	mustSignal(t, p, syscall.SIGHUP)
	time.Sleep(200 * time.Millisecond)
	if _, err := f.WriteString("again\n"); err != nil {
		t.Fatalf("write after two hangups: %v", err)
	}
	f.Close()
	if err := p.Cmd.Wait(); err != nil || strings.Contains(p.Stderr.String(), "stopped waiting") || testutil.Mounted(mnt) {
		t.Fatalf("the busy mount after two hangups: %v; stderr %q", err, p.Stderr.String())
	}
	if r := runBinary(t, nil, "cat", "--store", store, "notes.txt"); r.code != 0 || r.stdout != "hello\nagain\n" {
		t.Fatalf("cat after the busy hangups: %+v", r)
	}

	// Under nohup (SIGHUP ignored from the start) a hangup is ignored.
	cmd := exec.Command("sh", "-c", `trap "" HUP; exec "$0" "$@"`, binary, "mount", store, mnt)
	p = &mountProc{Proc: testutil.StartReady(t, cmd, 30*time.Second, syscall.SIGTERM, func(l string) bool {
		return strings.HasPrefix(l, "deltafs: mounted ")
	}), mnt: mnt}
	mustSignal(t, p, syscall.SIGHUP)
	time.Sleep(300 * time.Millisecond)
	if !testutil.Mounted(mnt) || p.Cmd.ProcessState != nil {
		t.Fatal("a mount started under nohup stopped at SIGHUP")
	}
	p.stop(t, syscall.SIGTERM)
}

func mustSignal(t *testing.T, p *mountProc, sig os.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

func TestMountEndToEnd(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	if !strings.Contains(p.Ready, "new store") || strings.Count(p.Ready, "\n") != 1 {
		t.Fatalf("readiness line %q does not say the store is new", p.Ready)
	}
	if err := os.WriteFile(filepath.Join(mnt, "notes.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	second := runBinary(t, nil, "mount", store, t.TempDir())
	requireOneErrorLine(t, second, exitStoreLocked, mnt)
	p.stop(t, syscall.SIGTERM)

	p = startMount(t, store, mnt)
	if strings.Contains(p.Ready, "new store") {
		t.Fatalf("remount says new: %q", p.Ready)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "notes.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("after remount: %q, %v", b, err)
	}
	if r := runBinary(t, nil, "umount", mnt); r.code != 0 || r.stderr != "" {
		t.Fatalf("umount: exit %d, stderr %q", r.code, r.stderr)
	}
	p.wait(t)
}

func TestMountErrors(t *testing.T) {
	testutil.RequireFUSE(t)
	dir := t.TempDir()
	notStore := filepath.Join(dir, "notstore")
	if err := os.MkdirAll(notStore, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(notStore, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "full")
	if err := os.MkdirAll(filepath.Join(full, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	newStore := filepath.Join(dir, "new.dfs")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing mount point", []string{"mount", newStore, filepath.Join(dir, "nope")}, exitMountPoint, "nope"},
		{"mount point not empty", []string{"mount", newStore, full}, exitMountPoint, "not empty"},
		{"not a store", []string{"mount", notStore, t.TempDir()}, exitNotStore, "not a deltafs store"},
		{"overlap", []string{"mount", filepath.Join(dir, "m", "s.dfs"), mkdir(t, dir, "m")}, exitMountPoint, "overlap"},
		{"umount of no mount", []string{"umount", t.TempDir()}, exitMountPoint, "not a deltafs mount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireOneErrorLine(t, runBinary(t, nil, tt.args...), tt.code, tt.want)
		})
	}
	if _, err := os.Stat(newStore); !os.IsNotExist(err) {
		t.Fatalf("a failed mount created the store: %v", err)
	}
}

func mkdir(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGitInMount runs git init, add and commit inside a mount.
func TestGitInMount(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	store, mnt := filepath.Join(dir, "s.dfs"), mkdir(t, dir, "m")
	p := startMount(t, store, mnt)
	for i := range 20 {
		sub := mkdir(t, mnt, filepath.Join("src", string(rune('a'+i%5))))
		if err := os.WriteFile(filepath.Join(sub, "f"+string(rune('a'+i))+".txt"), testutil.Bytes(uint64(i), 5000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e", "HOME="+dir)
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "first"}, {"fsck", "--no-progress"}, {"log", "--oneline"}} {
		cmd := exec.Command(git, args...)
		cmd.Dir, cmd.Env = mnt, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	p.stop(t, syscall.SIGINT)
}

// TestMountSurvivesSIGKILL kills the mount while a file is open for
// writing, then mounts again on the same (dead) mount point: every
// fsynced file is intact and the store opens and verifies.
func TestMountSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	store, mnt := filepath.Join(dir, "s.dfs"), mkdir(t, dir, "m")
	for round := range 3 {
		p := startMount(t, store, mnt)
		name := filepath.Join(mnt, fmt.Sprintf("synced%d", round))
		data := testutil.Bytes(uint64(round), 300_000)
		f, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("unsynced tail")); err != nil {
			t.Fatal(err)
		}
		if err := p.Cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		p.Cmd.Wait()
		f.Close() // fails: the server is gone
		p = startMount(t, store, mnt)
		for r := 0; r <= round; r++ {
			got, err := os.ReadFile(filepath.Join(mnt, fmt.Sprintf("synced%d", r)))
			if err != nil || !bytes.HasPrefix(got, testutil.Bytes(uint64(r), 300_000)) {
				t.Fatalf("round %d: fsynced file %d lost (%d bytes, %v)", round, r, len(got), err)
			}
		}
		if err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("clean%d", round)), data[:1000], 0o644); err != nil {
			t.Fatal(err)
		}
		p.stop(t, syscall.SIGTERM)
	}
	st, err := objstore.Open(store, objstore.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bad, err := st.Verify(context.Background(), func(pr objstore.Problem) { t.Errorf("verify: %v", pr) })
	if err != nil || bad != 0 {
		t.Fatalf("verify: %d bad revisions, %v", bad, err)
	}
	stats, err := st.Stats(context.Background())
	if err != nil || stats.Revisions < 3 {
		t.Fatalf("%d revisions (%v); want the 3 cleanly recorded ones at least", stats.Revisions, err)
	}
}

// TestUntarAndBuildInMount untars the Go toolchain's own src/ (tarred up
// here) into a mount, checks it against the original, copies a few
// packages into a module inside the mount and builds and vets it there
// with the build cache in the mount too, then removes the tree.
func TestUntarAndBuildInMount(t *testing.T) {
	if testing.Short() {
		t.Skip("untars 11,000 files")
	}
	goroot := strings.TrimSpace(string(must(exec.Command("go", "env", "GOROOT").Output())))
	dir := t.TempDir()
	tarball := filepath.Join(dir, "src.tar")
	runCmd(t, "", "tar", "-C", goroot, "-cf", tarball, "src")
	store, mnt := filepath.Join(dir, "s.dfs"), mkdir(t, dir, "m")
	p := startMount(t, store, mnt)
	runCmd(t, "", "tar", "-C", mnt, "-xf", tarball)
	runCmd(t, "", "diff", "-r", "-q", filepath.Join(goroot, "src"), filepath.Join(mnt, "src"))
	mod := mkdir(t, mnt, "build")
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module gosrc\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"go/ast", "go/token", "go/printer", "text/tabwriter", "container/heap", "container/list", "encoding/csv", "bufio"} {
		mkdir(t, mod, pkg)
		runCmd(t, "", "sh", "-c", "cp "+filepath.Join(mnt, "src", pkg)+"/*.go "+filepath.Join(mod, pkg)+"/ && rm -f "+filepath.Join(mod, pkg)+"/*_test.go")
	}
	env := []string{"GOCACHE=" + filepath.Join(mnt, "cache"), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local"}
	runEnv(t, mod, env, "go", "build", "./...")
	runEnv(t, mod, env, "go", "vet", "./...")
	runCmd(t, "", "rm", "-rf", filepath.Join(mnt, "src"), filepath.Join(mnt, "cache"))
	p.stop(t, syscall.SIGTERM)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// runCmd runs a command in dir and fails the test on error.
func runCmd(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	runEnv(t, dir, nil, name, args...)
}

func runEnv(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func TestMountExitCodes(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("mount: %w", err) }
	tests := []struct {
		err  error
		want int
	}{
		{wrap(mount.ErrMountPoint), exitMountPoint},
		{wrap(mount.ErrOverlap), exitMountPoint},
		{wrap(&objstore.LockError{Dir: "s", PID: "1"}), exitStoreLocked},
		{wrap(objstore.ErrNotStore), exitNotStore},
		{wrap(objstore.ErrFormat), exitNotStore},
		{wrap(fmt.Errorf("%w: the store s is on ramfs (setxattr: %v)", mount.ErrNoXattrs, os.ErrPermission)), exitNotStore},
		{wrap(mount.ErrNoFUSE), exitNoFUSE},
		{wrap(fmt.Errorf("%w: open /dev/fuse: %w", mount.ErrNoFUSE, os.ErrPermission)), exitNoFUSE},
		{wrap(os.ErrPermission), exitPermission},
		{wrap(fmt.Errorf("%w: lstat m: %w", mount.ErrMountPoint, os.ErrPermission)), exitPermission},
		{wrap(errors.New("disk on fire")), exitFailure},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// TestMountRefusesStoreWithoutXattrs: a store on ramfs (no user xattrs,
// so no file would ever get an identity and a history) is refused with
// one line naming the filesystem, exit 5, and nothing left behind.
func TestMountRefusesStoreWithoutXattrs(t *testing.T) {
	testutil.RequireFUSE(t)
	rfs := t.TempDir()
	if err := syscall.Mount("none", rfs, "ramfs", 0, ""); err != nil {
		testutil.SkipOrFail(t, "mount ramfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(rfs, 0); err != nil {
			t.Errorf("unmount ramfs: %v", err)
		}
	})
	store := filepath.Join(rfs, "s.dfs")
	r := runBinary(t, nil, "mount", store, t.TempDir())
	requireOneErrorLine(t, r, exitNotStore, "no user xattrs")
	if !strings.Contains(r.stderr, "ramfs") {
		t.Errorf("the error does not name the filesystem: %q", r.stderr)
	}
	if _, err := os.Lstat(store); !os.IsNotExist(err) {
		t.Errorf("a refused mount left %s behind: %v", store, err)
	}
}

// TestMountRefusedInsideMountLeavesNoHistory: a new store inside another
// deltafs mount is refused (no user xattrs there), and the refusal leaves
// no trace in the outer mount: the store was created, refused and
// removed, and the outer store recorded its files (FORMAT, LOCK, the
// index's) as deleted files, listed by "log --deleted" and kept until a
// gc. The check now runs before anything is created.
func TestMountRefusedInsideMountLeavesNoHistory(t *testing.T) {
	store, mnt := newMountDirs(t)
	outer := startMount(t, store, mnt)
	defer outer.stop(t, syscall.SIGTERM)
	inner := filepath.Join(mnt, "sub", "inner.dfs")
	r := runBinary(t, nil, "mount", inner, t.TempDir())
	requireOneErrorLine(t, r, exitNotStore, "no user xattrs")
	if _, err := os.Lstat(filepath.Join(mnt, "sub")); !os.IsNotExist(err) {
		t.Errorf("a refused mount left %s behind: %v", filepath.Join(mnt, "sub"), err)
	}
	if r := runBinary(t, nil, "log", "--deleted", mnt); r.code != exitOK || r.stdout != "" {
		t.Errorf("log --deleted after the refused mount: exit %d, stdout %q, stderr %q; want no deleted file", r.code, r.stdout, r.stderr)
	}
}
