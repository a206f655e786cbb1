package objstore

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The kill loops (repack_kill_test.go, gc_kill_test.go) re-execute the
// test binary as a helper that runs a repack or a gc and prints its
// progress, and SIGKILL it at random moments.

// printCommitted returns a progress function that prints "committed N
// of M" each time N changes: the line killMidwayEnv waits for.
func printCommitted() func(RepackProgress) {
	last := int64(-1)
	return func(p RepackProgress) {
		if p.Committed != last {
			last = p.Committed
			fmt.Printf("committed %d of %d\n", p.Committed, p.Revisions)
		}
	}
}

// killWait is how long round of a kill loop lets its helper run: odd
// rounds wait longer and longer, so that some get through a whole run
// (each resumes the last) and kills land in the switch too; even rounds
// kill early. Under -race the helper's start alone takes longer.
func killWait(r *rand.Rand, round int) time.Duration {
	maxWait := 150
	if round%2 == 1 && !raceEnabled {
		maxWait = 100 + 60*round
	}
	return time.Duration(r.IntN(maxWait)) * time.Millisecond
}

// startHelperEnv starts the test binary running test with env=dir (and
// the variables of extra) and returns it with its stdout lines, after its
// first one ("start").
func startHelperEnv(t *testing.T, test, env, dir string, extra ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+test)
	cmd.Env = append(append(os.Environ(), env+"="+dir), extra...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "start" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper %s did not start: %q", test, sc.Text())
	}
	return cmd, sc
}

// killAfter SIGKILLs the helper after wait (or lets it finish first) and
// reports whether it was killed.
func killAfter(t *testing.T, cmd *exec.Cmd, sc *bufio.Scanner, wait time.Duration) bool {
	t.Helper()
	done := make(chan bool)
	go func() {
		finished := false
		for sc.Scan() {
			finished = finished || strings.HasPrefix(sc.Text(), "done ")
		}
		done <- finished
	}()
	time.Sleep(wait)
	cmd.Process.Signal(syscall.SIGKILL)
	finished := <-done
	err := cmd.Wait()
	if !finished && (err == nil || !strings.Contains(err.Error(), "killed")) {
		t.Fatalf("helper failed on its own: %v", err)
	}
	return !finished
}

// killMidwayEnv runs the helper and kills it once it has committed at
// least one revision and less than half of them; false if it finished
// first.
func killMidwayEnv(t *testing.T, test, env, dir string) bool {
	cmd, sc := startHelperEnv(t, test, env, dir)
	defer cmd.Wait()
	defer cmd.Process.Signal(syscall.SIGKILL)
	for sc.Scan() {
		var n, total int64
		if _, err := fmt.Sscanf(sc.Text(), "committed %d of %d", &n, &total); err == nil && n > 0 && n < total/2 {
			cmd.Process.Signal(syscall.SIGKILL)
			for sc.Scan() {
			}
			return true
		}
	}
	return false
}
