package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// TestHistoryCLIMounted is the user's story of the README's history
// section with the built binary: log, cat by snapshot and by revision,
// restore and stats through a running mount (each right after a close,
// with no pause for the background recorder), then the same commands on
// the unmounted store.
func TestHistoryCLIMounted(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(binary, args...).Output()
		if err != nil {
			t.Fatalf("deltafs %v: %v", args, err)
		}
		return string(out)
	}
	notes := filepath.Join(mnt, "notes.txt")
	versions := []string{"v1: first draft\n", "v2: before the refactor, longer\n", "v3\n"}
	writeFile(t, mnt, "notes.txt", []byte(versions[0]))
	// A new file's first revision is held briefly (an editor's atomic
	// save may follow); log records it at once.
	if got := cli("log", notes); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "0\t") {
		t.Fatalf("log of a new file: %q", got)
	}
	writeFile(t, mnt, "notes.txt", []byte(versions[1]))
	if err := os.Mkdir(filepath.Join(mnt, ".snapshots", "before-refactor"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, mnt, "notes.txt", []byte(versions[2]))

	var l struct {
		Revisions []struct {
			Rev       uint32
			Size      uint64
			Snapshots []string
		}
	}
	if err := json.Unmarshal([]byte(cli("log", "--json", notes)), &l); err != nil {
		t.Fatal(err)
	}
	n := len(l.Revisions)
	if n != 3 || l.Revisions[2].Size != uint64(len(versions[2])) || !reflect.DeepEqual(l.Revisions[1].Snapshots, []string{"before-refactor"}) {
		t.Fatalf("log right after the last close: %+v", l)
	}
	if got := cli("log", notes); strings.Count(got, "\n") != 3 || !strings.Contains(got, "before-refactor") {
		t.Fatalf("log: %q", got)
	}
	if got := cli("cat", notes, "--snapshot", "before-refactor"); got != versions[1] {
		t.Fatalf("cat --snapshot: %q", got)
	}
	if got := cli("cat", notes, "--rev", "0"); got != versions[0] {
		t.Fatalf("cat --rev 0: %q", got)
	}
	checkHistoryNumbers(t, mnt, "notes.txt", len(versions))
	if got := cli("restore", notes, "--rev", "0"); got != "notes.txt: revision 0 restored as revision 3\n" {
		t.Fatalf("restore: %q", got)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != versions[0] {
		t.Fatalf("notes.txt after restore: %q, %v", b, err)
	}
	out, err := exec.Command(binary, "cat", mnt).CombinedOutput()
	if code := exitStatus(err); code != exitIsDir || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("cat of the mount point: exit %d, %q", code, out)
	}
	mounted := statsKeys(t, cli("stats", mnt, "--json"))
	logMounted := cli("log", notes)
	p.stop(t, syscall.SIGTERM)

	if got := cli("log", "--store", store, "notes.txt"); got != logMounted || strings.Count(got, "\n") != 4 {
		t.Fatalf("log unmounted %q, mounted %q", got, logMounted)
	}
	if got := cli("cat", filepath.Join(store, "live", "notes.txt"), "--snapshot", "before-refactor"); got != versions[1] {
		t.Fatalf("cat unmounted: %q", got)
	}
	if unmounted := statsKeys(t, cli("stats", store, "--json")); !reflect.DeepEqual(mounted, unmounted) {
		t.Fatalf("stats JSON fields: mounted %v, unmounted %v", mounted, unmounted)
	}
}

// statsKeys returns the sorted field names of a stats JSON object.
func statsKeys(t *testing.T, js string) []string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkHistoryNumbers checks that .history/NAME/ names the file's n
// revisions by the numbers deltafs log prints and cat --rev and restore
// --rev take: each entry's number is log's number for the same row, and
// reading the entry gives what cat --rev of that number gives.
func checkHistoryNumbers(t *testing.T, mnt, name string, n int) {
	t.Helper()
	live := filepath.Join(mnt, name)
	out, err := exec.Command(binary, "log", live).Output()
	if err != nil {
		t.Fatalf("log %s: %v", name, err)
	}
	var logged []string
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		logged = append(logged, strings.Fields(line)[0])
	}
	ents, err := os.ReadDir(filepath.Join(mnt, ".history", name))
	if err != nil || len(ents) != n || len(logged) != n {
		t.Fatalf(".history/%s: %d entries, %v; log: %q; want %d", name, len(ents), err, logged, n)
	}
	for i, e := range ents {
		num, _, _ := strings.Cut(e.Name(), "@")
		if strings.TrimLeft(num, "0") != strings.TrimLeft(logged[i], "0") {
			t.Errorf(".history/%s/%s: number %s, deltafs log says %s", name, e.Name(), num, logged[i])
		}
		fromHist, err := os.ReadFile(filepath.Join(mnt, ".history", name, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fromCat, err := exec.Command(binary, "cat", live, "--rev", logged[i]).Output()
		if err != nil || string(fromCat) != string(fromHist) {
			t.Errorf("cat --rev %s: %q, %v; .history/%s/%s holds %q", logged[i], fromCat, err, name, e.Name(), fromHist)
		}
	}
}
