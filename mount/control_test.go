package mount

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/index"
)

func TestAllowed(t *testing.T) {
	for _, tc := range []struct {
		uid, owner uint32
		ok         bool
	}{
		{1000, 1000, true}, {0, 1000, true}, {0, 0, true}, {1001, 1000, false}, {65534, 0, false}, {1000, 0, false},
	} {
		if got := allowed(tc.uid, tc.owner); got != tc.ok {
			t.Errorf("allowed(uid %d, owner %d) = %v", tc.uid, tc.owner, got)
		}
	}
}

// serveOffline serves an offline controller on dir's control socket.
func serveOffline(t *testing.T, dir string) {
	t.Helper()
	o := openOffline(t, dir, false)
	srv, err := serveControl(dir, uint32(os.Getuid()), o.Controller(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
}

func TestControlSocket(t *testing.T) {
	dir := newOfflineStore(t)
	ctx := context.Background()
	if _, err := Call(ctx, dir, Request{Op: "list"}); !errors.Is(err, ErrNotMounted) {
		t.Fatalf("no socket: %v", err)
	}
	serveOffline(t, dir)
	if fi, err := os.Stat(filepath.Join(dir, ControlSocket)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v, %v", fi, err)
	}
	r, err := Call(ctx, dir, Request{Op: "create", Name: "one"})
	if err != nil || r.Snapshot == nil || r.Snapshot.Name != "one" {
		t.Fatalf("create: %+v, %v", r, err)
	}
	if _, err := Call(ctx, dir, Request{Op: "create", Name: "one"}); !errors.Is(err, index.ErrExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	if _, err := Call(ctx, dir, Request{Op: "create", Name: ".."}); !errors.Is(err, index.ErrBadName) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := Call(ctx, dir, Request{Op: "rename", Name: "one", To: "uno"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Call(ctx, dir, Request{Op: "delete", Name: "one"}); !errors.Is(err, index.ErrNotFound) {
		t.Fatalf("delete of a renamed name: %v", err)
	}
	r, err = Call(ctx, dir, Request{Op: "list"})
	if err != nil || len(r.Snapshots) != 1 || r.Snapshots[0].Name != "uno" {
		t.Fatalf("list: %+v, %v", r, err)
	}
	r, err = Call(ctx, dir, Request{Op: "stats"})
	if err != nil || r.Stats == nil || r.Stats.Snapshots != 1 || r.Stats.Revisions != 2 {
		t.Fatalf("stats: %+v, %v", r.Stats, err)
	}
	if _, err := Call(ctx, dir, Request{Op: "format-disk"}); err == nil {
		t.Fatal("unknown operation accepted")
	}
}

// envChild makes the test binary act as a control client for
// TestControlRefusesOtherUsers.
const envChild = "DELTAFS_CONTROL_CHILD"

// TestControlRefusesOtherUsers connects as nobody to a socket whose file
// mode was opened up, so that only the peer credential check stands in
// the way.
func TestControlRefusesOtherUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	base, err := os.MkdirTemp("", "deltafs-control-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	must0755(t, base)
	dir := filepath.Join(base, "store")
	copyStore(t, newOfflineStore(t), dir)
	must0755(t, dir)
	serveOffline(t, dir)
	if err := os.Chmod(filepath.Join(dir, ControlSocket), 0o666); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "client")
	copyExe(t, bin)
	cmd := exec.Command(bin, "-test.run=^TestControlChild$", "-test.v")
	cmd.Env = append(os.Environ(), envChild+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "REFUSED") {
		t.Fatalf("client as nobody: %v\n%s", err, out)
	}
	if _, err := Call(context.Background(), dir, Request{Op: "list"}); err != nil {
		t.Fatalf("root refused: %v", err)
	}
}

// TestControlChild is the client half of TestControlRefusesOtherUsers.
func TestControlChild(t *testing.T) {
	dir := os.Getenv(envChild)
	if dir == "" {
		t.Skip("run by TestControlRefusesOtherUsers")
	}
	_, err := Call(context.Background(), dir, Request{Op: "create", Name: "intruder"})
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("as uid %d: %v", os.Getuid(), err)
	}
	t.Log("REFUSED")
}

func must0755(t *testing.T, p string) {
	t.Helper()
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func copyExe(t *testing.T, dst string) {
	t.Helper()
	src, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// copyStore moves a freshly made store to dst (the test's own temporary
// directories are not reachable by another user).
func copyStore(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
}
