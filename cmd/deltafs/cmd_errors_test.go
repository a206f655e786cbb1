package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
)

// TestNoStoreErrors: every command that takes a store (or a path in a
// store or mount) says the same one line with exit 5 whether the path
// does not exist or is a directory that holds no store.
func TestNoStoreErrors(t *testing.T) {
	foreign := t.TempDir()
	writeFile(t, foreign, "f", []byte("x"))
	missing := filepath.Join(t.TempDir(), "nosuch")
	commands := [][]string{
		{"stats", "P"}, {"verify", "P"}, {"snapshot", "list", "P"}, {"snapshot", "create", "P", "s"},
		{"snapshot", "delete", "P", "s"}, {"snapshot", "rename", "P", "s", "t"}, {"snapshot", "prune", "P", "--keep-last", "1"},
		{"log", "--store", "P", "f"}, {"cat", "--store", "P", "f"}, {"restore", "--store", "P", "f", "--rev", "0"},
		{"log", "P/f"}, {"cat", "P/f"}, {"restore", "P/f", "--rev", "0"},
	}
	for _, c := range commands {
		for _, dir := range []string{foreign, missing} {
			args := make([]string, len(c))
			for i, a := range c {
				args[i] = strings.Replace(a, "P", dir, 1)
			}
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				r := runCLI(t, nil, args...)
				requireOneErrorLine(t, r, exitNotStore, dir)
				if !strings.Contains(r.stderr, ": not a deltafs store, nor inside a deltafs mount") || strings.Contains(r.stderr, "stopped") {
					t.Errorf("stderr %q", r.stderr)
				}
			})
		}
	}
}

// TestErrorLineJoined: the parts of a joined error stay readable on the
// one error line.
func TestErrorLineJoined(t *testing.T) {
	err := errors.Join(errors.New("first  part"), nil, fmt.Errorf("second: %w", errors.New("cause")))
	if got, want := errorLine(nil, err), "deltafs: first part; second: cause"; got != want {
		t.Fatalf("errorLine = %q, want %q", got, want)
	}
}

// TestMissingFileInStore: a file under a missing directory of a store's
// live tree has no history (exit 9); it is not "no store".
func TestMissingFileInStore(t *testing.T) {
	store := newCLIStore(t)
	r := runCLI(t, nil, "log", filepath.Join(store, "live", "nodir", "f"))
	requireOneErrorLine(t, r, exitNotFound, "nodir/f")
	if _, err := os.Stat(filepath.Join(store, "live", "nodir")); !os.IsNotExist(err) {
		t.Fatalf("log created the directory: %v", err)
	}
}

// TestMissingStoreErrors: a store path that does not exist is told the
// same way by every command that takes a store, those that open it
// themselves (gc, repack, mount --read-only) too: its absolute path, that
// it is no deltafs store and no such file or directory, exit 5.
func TestMissingStoreErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nosuch.dfs")
	mnt := t.TempDir()
	for _, args := range [][]string{
		{"stats", missing}, {"snapshot", "list", missing}, {"log", "--store", missing, "f"},
		{"gc", missing}, {"gc", "--dry-run", missing}, {"repack", missing}, {"mount", "--read-only", missing, mnt},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runBinary(t, nil, args...)
			requireOneErrorLine(t, r, exitNotStore, ": "+missing+": not a deltafs store")
			if !strings.HasSuffix(r.stderr, ": no such file or directory\n") || strings.Contains(r.stderr, "objstore") {
				t.Errorf("stderr %q: want it to end 'no such file or directory'", r.stderr)
			}
			if _, err := os.Stat(missing); !os.IsNotExist(err) {
				t.Fatalf("%s made: %v", missing, err)
			}
		})
	}
}

// TestHistoryPathExitCodes pins what the README says of log, cat and
// restore (it said exit 5 "or no path at all"): an empty PATH outside any
// store or mount is exit 5, no PATH at all a usage error, exit 2 (built
// binary).
func TestHistoryPathExitCodes(t *testing.T) {
	for _, c := range [][]string{{"log"}, {"cat"}, {"restore", "--rev", "0"}} {
		requireOneErrorLine(t, runBinary(t, nil, append(c, "")...), exitNotStore, "not a deltafs store, nor inside a deltafs mount")
		requireOneErrorLine(t, runBinary(t, nil, c...), exitUsage, "expects 1 argument, got 0")
	}
}

// TestUnreadableStoreIsPermissionDenied: a store another user cannot look
// into (a new store is 0700) is "permission denied", exit 7, for every
// command that takes a store path; stats, verify, log and snapshot list
// said "not a deltafs store, nor inside a deltafs mount", exit 5, while
// gc said permission denied (built binary, run as nobody).
func TestUnreadableStoreIsPermissionDenied(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root to run the binary as nobody")
	}
	store := makeStore(t, 1, 2)
	bin := binaryForNobody(t, filepath.Dir(store)) // nobody may reach the store, not enter it
	for _, args := range [][]string{
		{"stats", store}, {"verify", store}, {"snapshot", "list", store}, {"log", "--store", store, "dir/file0.txt"},
		{"cat", "--store", store, "dir/file0.txt"}, {"gc", store}, {"repack", store},
	} {
		requireOneErrorLine(t, runAsNobody(bin, args...), exitPermission, "permission denied")
	}
}

// TestAnotherUsersMountIsPermissionDenied: the CLI run by a user other
// than the one who mounted, on a mount with --allow-other (which lets
// that user into the live tree): the store behind it is 0700, and
// snapshot, stats, log and verify said "the deltafs mount ... does not
// name its store", exit 1; umount passed on fusermount3's "entry ... not
// found in /etc/mtab", exit 1. Each is permission denied, exit 7, on one
// line, and the mount is left as it was.
func TestAnotherUsersMountIsPermissionDenied(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root to run the binary as nobody")
	}
	store, mnt := newMountDirs(t)
	bin := binaryForNobody(t, filepath.Dir(mnt)) // nobody may reach the mount point
	p := startMount(t, store, mnt, "--allow-other")
	if err := os.Chmod(mnt, 0o755); err != nil { // the live root: nobody may look in
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"snapshot", "list", mnt}, {"snapshot", "create", mnt, "s"}, {"stats", mnt},
		{"verify", mnt}, {"log", filepath.Join(mnt, "f")}, {"umount", mnt},
	} {
		r := runAsNobody(bin, args...)
		t.Logf("%v: %s", args, strings.TrimSpace(r.stderr))
		requireOneErrorLine(t, r, exitPermission, "permission denied")
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(b) != "x\n" {
		t.Fatalf("the mount after the refusals: %q %v", b, err)
	}
	p.stop(t, syscall.SIGTERM)
}

// TestAnotherUsersPrivateMountIsPermissionDenied: the same commands on a
// mount without --allow-other, which the kernel closes to every other
// user: umount said "lstat ...: permission denied" with exit 3 (a bad
// mount point) rather than 7 (a user review).
func TestAnotherUsersPrivateMountIsPermissionDenied(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root to run the binary as nobody")
	}
	store, mnt := newMountDirs(t)
	bin := binaryForNobody(t, filepath.Dir(mnt))
	p := startMount(t, store, mnt)
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"snapshot", "list", mnt}, {"stats", mnt}, {"log", filepath.Join(mnt, "f")}, {"umount", mnt},
	} {
		r := runAsNobody(bin, args...)
		t.Logf("%v: %s", args, strings.TrimSpace(r.stderr))
		requireOneErrorLine(t, r, exitPermission, "permission denied")
	}
	p.stop(t, syscall.SIGTERM)
}

// binaryForNobody makes dir and the directories above it up to the
// temporary directory reachable by nobody (0755) and copies the built
// binary into dir (the test binary's own directory is 0700): its path.
func binaryForNobody(t *testing.T, dir string) string {
	t.Helper()
	for d := dir; d != filepath.Clean(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "deltafs")
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// asNobody makes cmd run as nobody.
func asNobody(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testutil.Nobody, Gid: testutil.Nobody}}
	return cmd
}

// runAsNobody runs bin with args as nobody.
func runAsNobody(bin string, args ...string) result {
	cmd := asNobody(exec.Command(bin, args...))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}
