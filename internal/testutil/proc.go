package testutil

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// LockedBuffer is a bytes.Buffer safe to write from a child's stderr
// copier while the test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Len is the number of bytes written so far.
func (l *LockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

// Proc is a child process (a mount, typically) that announces it is ready
// with its first line on stdout.
type Proc struct {
	Cmd    *exec.Cmd
	Stderr *LockedBuffer
	Ready  string // the first stdout line, newline included
}

// StartReady starts cmd and waits up to timeout for its first stdout line,
// failing t if the child writes none in time (the child is killed) or if
// ready rejects the line (the child is reaped). The rest of stdout is
// discarded. At cleanup a child still running is sent stop and reaped;
// stop nil means kill.
func StartReady(t testing.TB, cmd *exec.Cmd, timeout time.Duration, stop os.Signal, ready func(line string) bool) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Stderr: &LockedBuffer{}}
	cmd.Stderr = p.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
		io.Copy(io.Discard, out)
	}()
	select {
	case p.Ready = <-line:
	case <-time.After(timeout):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%s: no readiness line in %v; stderr %q", cmd.Path, timeout, p.Stderr)
	}
	if !ready(p.Ready) {
		cmd.Wait()
		t.Fatalf("%s: readiness line %q; stderr %q", cmd.Path, p.Ready, p.Stderr)
	}
	t.Cleanup(func() {
		if cmd.ProcessState != nil {
			return
		}
		if stop == nil {
			stop = os.Kill
		}
		cmd.Process.Signal(stop)
		cmd.Wait()
	})
	return p
}
