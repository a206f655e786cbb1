package main

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// TestUmountLeavesNoMark: once `deltafs umount` returns, the store is
// clean: its "mounted" mark is gone. umount returns when the mount
// process lets the store lock go, and the process removed the mark only
// after that, so a mount started at once could have its own mark
// removed by the old process and run unmarked, and a kill of it then
// skip the check of the live tree (a user review: the mark still there
// right after umount in 2 tries of 3).
func TestUmountLeavesNoMark(t *testing.T) {
	store, mnt := newMountDirs(t)
	big := make([]byte, 64<<20)
	rand.New(rand.NewSource(1)).Read(big)
	for i := range 3 {
		p := startMount(t, store, mnt)
		// A big file left dirty: a clean end fsyncs every live file
		// before it removes the mark, which takes a while.
		big[0] = byte(i)
		if err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("f%d", i)), big, 0o644); err != nil {
			t.Fatal(err)
		}
		cliWant(t, exitOK, "umount", mnt)
		if _, err := os.Stat(filepath.Join(store, "mounted")); err == nil {
			t.Fatalf("round %d: the store is still marked mounted after umount returned", i)
		}
		p.wait(t)
	}
}
