package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFreshFS: a fresh-file-system target runs on an ext4 of its own,
// mounted on its base, and leaves neither mount nor image behind.
func TestFreshFS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root here")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4")
	}
	env := testEnv(t)
	tg, err := env.setup(kindNative, "", true)
	if err != nil {
		t.Fatal(err)
	}
	var parent, own syscall.Stat_t
	if err := syscall.Stat(filepath.Dir(tg.base), &parent); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(tg.dir, &own); err != nil {
		t.Fatal(err)
	}
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(tg.dir, &sfs); err != nil {
		t.Fatal(err)
	}
	const ext4Magic = 0xef53
	if own.Dev == parent.Dev || sfs.Type != ext4Magic {
		t.Errorf("target dir on device %d (type %#x), its parent's %d: want an ext4 of its own", own.Dev, sfs.Type, parent.Dev)
	}
	if err := os.WriteFile(filepath.Join(tg.dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tg.remove(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{tg.base, tg.image} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there after remove (%v)", p, err)
		}
	}
}
