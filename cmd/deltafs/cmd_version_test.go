package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/objstore"
)

func TestVersionCommand(t *testing.T) {
	r := runCLI(t, nil, "version")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	want := currentVersion().lines()
	if len(lines) != len(want) || !strings.HasPrefix(lines[0], "deltafs ") {
		t.Fatalf("version output:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "go: "+runtime.Version()+"\n") ||
		!strings.Contains(r.stdout, "platform: "+runtime.GOOS+"/"+runtime.GOARCH+"\n") ||
		!strings.Contains(r.stdout, fmt.Sprintf("store format: %d\n", objstore.FormatVersion)) {
		t.Fatalf("version output lacks the Go version, platform or store format:\n%s", r.stdout)
	}
}

func TestVersionFlag(t *testing.T) {
	r := runCLI(t, nil, "--version")
	if r.code != exitOK || r.stdout != "deltafs "+currentVersion().version+"\n" {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
}

func TestResolveVersion(t *testing.T) {
	info := func(v string, ok bool) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			if !ok {
				return nil, false
			}
			return &debug.BuildInfo{Main: debug.Module{Version: v}}, true
		}
	}
	tests := []struct {
		name, linked string
		build        func() (*debug.BuildInfo, bool)
		want         string
	}{
		{"ldflags wins", "v1.2.3", info("v0.0.9", true), "v1.2.3"},
		{"module version", "", info("v0.4.0", true), "v0.4.0"},
		{"empty module version", "", info("", true), "(devel)"},
		{"no build info", "", info("", false), "(devel)"},
	}
	for _, tt := range tests {
		if got := resolveVersion(tt.linked, tt.build); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
