package mount

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
)

func readAs(p string) error {
	return testutil.AsNobody(func() error { _, err := os.ReadFile(p); return err })
}

// allowOtherMount mounts a new store with --allow-other, reachable by
// nobody (the test's temporary directories are 0700).
func allowOtherMount(t *testing.T) *live {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root (to act as another user)")
	}
	l := startWith(t, Config{Store: filepath.Join(t.TempDir(), "s.dfs"), AllowOther: true})
	for _, d := range []string{filepath.Dir(l.mnt), l.mnt} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestHistoryKeepsOldRevisionsPrivate: a file written 0600 with a secret,
// then rewritten with public content and made 0644: the old revision in
// .history must not become readable by others with the new mode (the
// store keeps no mode per revision, so revisions are the owner's only).
func TestHistoryKeepsOldRevisionsPrivate(t *testing.T) {
	l := allowOtherMount(t)
	p := filepath.Join(l.mnt, "f")
	if err := os.WriteFile(p, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.recorded(t, 1)
	if err := os.WriteFile(p, []byte("public\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	l.recorded(t, 2)
	if err := readAs(p); err != nil {
		t.Fatalf("nobody reads the 0644 live file: %v", err)
	}
	hd := filepath.Join(l.mnt, ".history", "f")
	fi, err := os.Stat(hd)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o500 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf(".history/f: %v uid %d, want dr-x------ root", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
	}
	ents, err := os.ReadDir(hd)
	if err != nil || len(ents) != 2 {
		t.Fatalf("ls %s: %v %v", hd, ents, err)
	}
	for _, e := range ents {
		rp := filepath.Join(hd, e.Name())
		fi, err := os.Stat(rp)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o400 {
			t.Errorf("%s: %v, want -r--------", e.Name(), fi.Mode())
		}
		if err := readAs(rp); !errors.Is(err, syscall.EACCES) {
			t.Errorf("nobody reads %s: %v, want EACCES", e.Name(), err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(hd, ents[0].Name())); err != nil || string(b) != "secret\n" {
		t.Errorf("owner reads revision 0: %q %v", b, err)
	}
	if err := testutil.AsNobody(func() error { _, err := os.ReadDir(hd); return err }); !errors.Is(err, syscall.EACCES) {
		t.Errorf("nobody lists .history/f: %v, want EACCES", err)
	}
}
