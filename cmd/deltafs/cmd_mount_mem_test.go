package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
)

// TestMountSetsGCPercent: the mount collects at mountGCPercent unless
// GOGC says otherwise, as the runtime's statistics line
// (DELTAFS_HEAPPROFILE, on SIGUSR1) shows; the heap profile is written.
func TestMountSetsGCPercent(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want int64
	}{
		{"", mountGCPercent},
		{"GOGC=100", 100},
	} {
		t.Run(fmt.Sprint(tt.want), func(t *testing.T) {
			testutil.RequireFUSE(t)
			store, mnt := newMountDirs(t)
			prefix := filepath.Join(t.TempDir(), "heap")
			cmd := exec.Command(binary, "mount", store, mnt)
			cmd.Env = append(os.Environ(), "DELTAFS_HEAPPROFILE="+prefix, "GOGC=")
			if tt.env != "" {
				cmd.Env = append(cmd.Env, tt.env)
			}
			p := testutil.StartReady(t, cmd, 30*time.Second, syscall.SIGTERM, func(l string) bool {
				return strings.HasPrefix(l, "deltafs: mounted ")
			})
			if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("GOGC %d\n", tt.want)
			for end := time.Now().Add(20 * time.Second); !strings.Contains(p.Stderr.String(), want); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("stderr %q does not say %q", p.Stderr.String(), want)
				}
			}
			if st, err := os.Stat(prefix + ".1"); err != nil || st.Size() == 0 {
				t.Fatalf("heap profile: %v", err)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("mount: %v; stderr %q", err, p.Stderr.String())
			}
		})
	}
}
