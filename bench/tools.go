package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
)

// ensureTools finds each program on PATH. If some are missing and the
// runner is root (and -no-install is not set) it tries to apt-get install
// their Debian packages once. It returns the programs still missing.
func (e *Env) ensureTools(programs, packages []string) []string {
	missing := lookMissing(programs)
	if len(missing) == 0 {
		return nil
	}
	if e.Opts.NoInstall || os.Geteuid() != 0 {
		e.Logf("missing %s; install the Debian packages %s (not root, or -no-install)",
			strings.Join(missing, ", "), strings.Join(packages, " "))
		return missing
	}
	e.Logf("missing %s: apt-get install -y %s", strings.Join(missing, ", "), strings.Join(packages, " "))
	cmd := exec.CommandContext(e.ctx, "apt-get", append([]string{"install", "-y"}, packages...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		e.Logf("apt-get failed: %v: %s", err, lastLine(string(out)))
	}
	missing = lookMissing(programs)
	if len(missing) > 0 {
		e.Logf("still missing %s; their baselines are skipped", strings.Join(missing, ", "))
	}
	return missing
}

func lookMissing(programs []string) []string {
	var missing []string
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	return missing
}

// toolVersion runs program with args and returns the first line it prints
// (on stdout or stderr).
func toolVersion(program string, args ...string) string {
	var b bytes.Buffer
	cmd := exec.Command(program, args...)
	cmd.Stdout, cmd.Stderr = &b, &b
	_ = cmd.Run() // xdelta3 -V exits non-zero on some versions
	return firstLine(b.String())
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
