package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// LoopFS makes a fresh ext4 filesystem of size bytes in an image file,
// loop-mounts it on a directory under t.TempDir() and returns that
// directory; t.Cleanup unmounts it (lazily, should a test leave something
// open in it) and fails t if that fails. It is how a test fills a disk
// for real (ENOSPC) without filling the machine's.
//
// It needs root, losetup and mkfs.ext4: without them it skips t, and
// fails it instead when the environment variable CI is "true".
func LoopFS(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := loopFS(img, mnt, size); err != nil {
		SkipOrFail(t, "loop filesystem: %v", err)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			// a process of the test may still hold it: detach it, and
			// say so, since the test left something behind
			exec.Command("umount", "-l", mnt).Run()
			t.Errorf("umount loop filesystem %s: %v: %s", mnt, err, strings.TrimSpace(string(out)))
		}
	})
	return mnt
}

// loopFS creates the image, its filesystem and the mount.
func loopFS(img, mnt string, size int64) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root")
	}
	for _, tool := range []string{"mkfs.ext4", "losetup", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return err
		}
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return err
	}
	f, err := os.Create(img)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		return fmt.Errorf("mount -o loop: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
