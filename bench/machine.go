package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// writeMachine writes the machine a report was measured on.
func writeMachine(w io.Writer) {
	fmt.Fprintf(w, "Machine: %s, %d cores, %s RAM, Linux %s, %s %s/%s\n\n",
		cpuModel(), runtime.NumCPU(), memTotal(), kernel(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// writeSource writes the commit the runner was built from, if it runs in
// a git checkout, and the one the deltafs measured was built from when
// -deltafs-src names another checkout (src).
func writeSource(w io.Writer, src string) {
	runner := commitOf(".")
	if runner == "" {
		return
	}
	if src == "" || src == "." {
		fmt.Fprintf(w, "Source: commit %s\n\n", runner)
		return
	}
	measured := commitOf(src)
	if measured == "" {
		measured = "not a git checkout"
	}
	fmt.Fprintf(w, "Source: runner at commit %s; deltafs built from %s (commit %s)\n\n", runner, src, measured)
}

// commitOf names the commit checked out in dir, marked when the checkout
// has uncommitted changes; "" outside a git checkout.
func commitOf(dir string) string {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += ", with uncommitted changes"
	}
	return c
}

// cpuModel is lscpu's model name, or /proc/cpuinfo's.
func cpuModel() string {
	if out, err := exec.Command("lscpu").Output(); err == nil {
		if v := field(string(out), "Model name:"); v != "" {
			return v
		}
	}
	b, _ := os.ReadFile("/proc/cpuinfo")
	if v := field(string(b), "model name"); v != "" {
		return strings.TrimPrefix(v, ": ")
	}
	return "unknown CPU"
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	var kb int64
	if _, err := fmt.Sscanf(field(string(b), "MemTotal:"), "%d kB", &kb); err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// field returns the trimmed rest of the first line of text starting with key.
func field(text, key string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}
