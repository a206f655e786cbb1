package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// A workload that creates and removes many files (M3) runs each target
// on a file system of its own, made fresh for every repeat: an ext4 image
// of freshFSSize (mkfs.ext4's defaults, so with a journal) mounted by
// loop on the target's base directory.
//
// Why: this machine's root file system is ext4 without a journal, and
// there ext4's inode allocator skips (scanning them, one buffer lookup
// each) the free inodes of a group that were freed in the last 60-300 s
// (recently_deleted in fs/ext4/ialloc.c, checked only without a
// journal). Each target's rm -rf frees 10,000 inodes in the block groups
// the next target's untar then allocates from, so the target measured
// later paid for the one before: deltafs, measured last, spent most of
// its untar in that scan (perf: recently_deleted and
// find_get_block_common at 25% of its server's samples, 7.7 s of
// openat2 for 10,000 creates), and the figure moved between 0.4x and
// 1.07x the loopback with what ran before it.
const freshFSSize = 8 << 30

// mountFreshFS makes an ext4 image next to base and mounts it on base.
func mountFreshFS(base string) (image string, err error) {
	image = base + ".img"
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	f, err := os.Create(image)
	if err == nil {
		err = f.Truncate(freshFSSize)
		f.Close()
	}
	if err != nil {
		return "", fmt.Errorf("fresh file system: %w", err)
	}
	for _, argv := range [][]string{{"mkfs.ext4", "-q", "-F", image}, {"mount", "-o", "loop", image, base}} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			os.Remove(image)
			return "", fmt.Errorf("fresh file system: %s: %w: %s", argv[0], err, strings.TrimSpace(string(out)))
		}
	}
	return image, nil
}

// unmountFreshFS unmounts base and removes its image.
func unmountFreshFS(base, image string) error {
	if out, err := exec.Command("umount", base).CombinedOutput(); err != nil {
		exec.Command("umount", "-l", base).Run()
		os.Remove(image)
		return fmt.Errorf("unmount fresh file system: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return os.Remove(image)
}
