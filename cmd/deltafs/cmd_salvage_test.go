package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSalvageCLI: a store whose tail segment was cut behind its back
// (gc refuses it on one line, verify exits 8) is salvaged: the newest
// revisions the live tree still holds come back, an older one nothing
// holds is kept as lost, and verify, gc and stats then pass, the lost
// revision named by log and failing cat on one line.
func TestSalvageCLI(t *testing.T) {
	store, mnt := newMountDirs(t)
	m := startMount(t, store, mnt)
	p := filepath.Join(mnt, "a.txt")
	var lines []string
	for i := range 3000 {
		lines = append(lines, "line "+strings.Repeat("x", i%50))
	}
	for r := range 3 {
		lines[r*7] = "edited in revision " + strings.Repeat("y", r)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // past the new file's grace: a revision each
		if err := os.Mkdir(filepath.Join(mnt, ".snapshots", "s"+string(rune('0'+r))), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m.stop(t, syscall.SIGTERM)
	var lg struct {
		Revisions []struct {
			Rev    uint32 `json:"rev"`
			Stored uint64 `json:"stored"`
		} `json:"revisions"`
	}
	r := runCLI(t, nil, "log", "--json", "--store", store, "a.txt")
	if err := json.Unmarshal([]byte(r.stdout), &lg); err != nil || len(lg.Revisions) != 3 {
		t.Fatalf("log: %v %+v", err, r)
	}
	// Cut the segment inside revision 1's record: revisions 1 and 2 (a
	// delta on it) are lost from the segment; the live file holds 2.
	segs, _ := filepath.Glob(filepath.Join(store, "segments", "*.seg"))
	st, err := os.Stat(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	cut := st.Size() - int64(lg.Revisions[2].Stored) - int64(lg.Revisions[1].Stored)/2
	if err := os.Truncate(segs[len(segs)-1], cut); err != nil {
		t.Fatal(err)
	}
	requireOneErrorLine(t, runCLI(t, nil, "gc", store), exitFailure, "deltafs salvage STORE")
	if r := runCLI(t, nil, "verify", store); r.code != exitProblems {
		t.Fatalf("verify of the damaged store: %+v", r)
	}
	r = runCLI(t, nil, "salvage", "--dry-run", store)
	if r.code != exitOK || !strings.Contains(r.stdout, "2 revisions do not read: a salvage would bring back 1 (1 from live files, 0 from other revisions) and keep 1 as lost") {
		t.Fatalf("salvage --dry-run: %+v", r)
	}
	r = runCLI(t, nil, "salvage", store)
	if r.code != exitOK || !strings.Contains(r.stdout, "1 brought back") || !strings.Contains(r.stdout, "lost: file 1 revision 1") {
		t.Fatalf("salvage: %+v", r)
	}
	r = runCLI(t, nil, "verify", store)
	if r.code != exitOK || !strings.Contains(r.stdout, "1 revision lost to damage") {
		t.Fatalf("verify after the salvage: %+v", r)
	}
	if r := runCLI(t, nil, "gc", store); r.code != exitOK {
		t.Fatalf("gc after the salvage: %+v", r)
	}
	r = runCLI(t, nil, "log", "--store", store, "a.txt")
	if r.code != exitOK || !strings.Contains(r.stdout, "\tlost\t") {
		t.Errorf("log names the lost revision: %+v", r)
	}
	requireOneErrorLine(t, runCLI(t, nil, "cat", "--store", store, "--rev", "1", "a.txt"), exitFailure, "lost to damage")
	r = runCLI(t, nil, "cat", "--store", store, "a.txt")
	if want, _ := os.ReadFile(filepath.Join(store, "live", "a.txt")); r.code != exitOK || r.stdout != string(want) {
		t.Errorf("cat of the newest revision after the salvage: exit %d, %d bytes", r.code, len(r.stdout))
	}
	if r := runCLI(t, nil, "stats", store); r.code != exitOK || strings.Contains(r.stdout, "damaged") {
		t.Errorf("stats after the salvage: %+v", r)
	}
}
