package objstore

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The test binary re-executes itself as a helper: OBJSTORE_HELPER names the
// role, OBJSTORE_DIR the store.
const helperEnv = "OBJSTORE_HELPER"

func TestHelperProcess(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		t.Skip("only runs as a helper subprocess")
	}
	dir := os.Getenv("OBJSTORE_DIR")
	var err error
	switch role {
	case "hold-lock":
		err = helperHoldLock(dir)
	case "put-loop":
		err = helperPutLoop(dir, false)
	case "put-loop-stream":
		err = helperPutLoop(dir, true)
	case "powercut":
		err = helperPowerCut(dir)
	case "pcut-repack", "pcut-gc":
		err = helperPcut(dir, role == "pcut-gc")
	default:
		err = fmt.Errorf("unknown helper role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// helperHoldLock opens the store, says "locked" and holds it until stdin
// closes.
func helperHoldLock(dir string) error {
	s, err := Open(dir, Config{Holder: "/mnt/helper"})
	if err != nil {
		return err
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	return s.Close()
}

// startHelper runs the helper with role on dir and waits for its first
// stdout line, which it returns with the command and a line reader.
func startHelper(t *testing.T, role, dir string) (*exec.Cmd, io.WriteCloser, *bufio.Reader, string) {
	t.Helper()
	cmd, stdin, r := startHelperNoWait(t, role, dir)
	first, err := r.ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper %s: %v", role, err)
	}
	return cmd, stdin, r, strings.TrimSpace(first)
}

// startHelperNoWait is startHelper without waiting for the helper's
// first line: it may still be opening its store.
func startHelperNoWait(t *testing.T, role, dir string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+role, "OBJSTORE_DIR="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, bufio.NewReader(out)
}
