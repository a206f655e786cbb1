package mount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestHolders: a process with a file open in a directory and one whose
// working directory is in it are its holders; a process using neither
// is not. A plain directory stands for the mount: Holders reads /proc.
func TestHolders(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(sub, "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sleeper := exec.Command("sleep", "60")
	sleeper.Dir = sub
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	byPID := map[int]Holder{}
	for _, h := range Holders(dir) {
		byPID[h.PID] = h
	}
	if h := byPID[os.Getpid()]; h.Files != 1 {
		t.Errorf("this process: %+v, want 1 open file (all: %v)", h, byPID)
	}
	if h, ok := byPID[sleeper.Process.Pid]; !ok || h.Files != 0 || h.Name != "sleep" {
		t.Errorf("sleep in the directory: %+v, %v", h, ok)
	}
	if len(byPID) != 2 {
		t.Errorf("holders %v, want this process and sleep", byPID)
	}
	if hs := Holders(dir + "-other"); len(hs) != 0 {
		t.Errorf("holders of a sibling path: %v", hs)
	}
}

func TestDescribeHolders(t *testing.T) {
	var hs []Holder
	for i := 1; i <= 6; i++ {
		hs = append(hs, Holder{PID: i, Name: fmt.Sprint("p", i)})
	}
	if got, want := DescribeHolders(hs), "p1 (pid 1), p2 (pid 2), p3 (pid 3), p4 (pid 4), 2 more"; got != want {
		t.Errorf("DescribeHolders = %q, want %q", got, want)
	}
	if got := DescribeHolders(nil); got != "" {
		t.Errorf("DescribeHolders(nil) = %q", got)
	}
}

func TestWithoutDeadline(t *testing.T) {
	other := errors.New("close failed")
	err := withoutDeadline(errors.Join(fmt.Errorf("recording: %w", context.DeadlineExceeded), other))
	if err == nil || err.Error() != "close failed" || !errors.Is(err, other) {
		t.Fatalf("withoutDeadline = %v", err)
	}
	if err := withoutDeadline(fmt.Errorf("x: %w", context.DeadlineExceeded)); err != nil {
		t.Fatalf("a lone deadline error kept: %v", err)
	}
}
