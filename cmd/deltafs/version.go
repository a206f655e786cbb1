package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/deltafs/deltafs/objstore"
)

// version is the deltafs version string, set at link time:
//
//	go build -ldflags "-X main.version=v0.1.0" ./cmd/deltafs
//
// When empty, the module version recorded by the Go toolchain is used.
var version string

// versionInfo is what "deltafs version" reports.
type versionInfo struct {
	version   string // deltafs version
	goVersion string // toolchain that built the binary
	platform  string // GOOS/GOARCH
	format    int    // on-disk store format this build writes and reads
}

// currentVersion collects the version facts of the running binary.
func currentVersion() versionInfo {
	return versionInfo{
		version:   resolveVersion(version, debug.ReadBuildInfo),
		goVersion: runtime.Version(),
		platform:  runtime.GOOS + "/" + runtime.GOARCH,
		format:    objstore.FormatVersion,
	}
}

// resolveVersion returns the link-time version if set, else the main
// module's version from the build info, else "(devel)".
func resolveVersion(linked string, buildInfo func() (*debug.BuildInfo, bool)) string {
	if linked != "" {
		return linked
	}
	if bi, ok := buildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// lines renders v one fact per line: "deltafs VERSION", then
// "key: value" lines.
func (v versionInfo) lines() []string {
	return []string{
		fmt.Sprintf("deltafs %s", v.version),
		fmt.Sprintf("go: %s", v.goVersion),
		fmt.Sprintf("platform: %s", v.platform),
		fmt.Sprintf("store format: %d", v.format),
	}
}
