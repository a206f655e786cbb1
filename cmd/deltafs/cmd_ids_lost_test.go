package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLostIDsFileRefused: live.ids maps each live file to its history.
// With it deleted, or garbage in its place, gc took every live file for
// new and their histories for deleted files', and removed them (exit
// 0), and a mount recorded every live file as a new one (a user
// review). Now gc and mount refuse on one line and change nothing;
// with live.ids put back, the histories are all there.
func TestLostIDsFileRefused(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	for _, name := range []string{"a.txt", "b.txt", "sub/c.txt"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(mnt, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := os.WriteFile(filepath.Join(mnt, name), bytes.Repeat([]byte(name+" version "+string(rune('0'+i))+"\n"), 100), 0o644); err != nil {
				t.Fatal(err)
			}
			if r := runBinary(t, nil, "log", filepath.Join(mnt, name)); r.code != exitOK { // waits for the revision
				t.Fatalf("log: %+v", r)
			}
		}
	}
	p.stop(t, syscall.SIGTERM)
	ids := filepath.Join(store, "live.ids")
	saved, err := os.ReadFile(ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, damage := range []struct {
		name string
		do   func() error
	}{
		{"deleted", func() error { return os.Remove(ids) }},
		{"emptied", func() error { return os.WriteFile(ids, nil, 0o600) }},
		{"garbage", func() error { return os.WriteFile(ids, bytes.Repeat([]byte("not an ids file "), 8), 0o600) }},
	} {
		t.Run(damage.name, func(t *testing.T) {
			if err := damage.do(); err != nil {
				t.Fatal(err)
			}
			damaged, _ := os.ReadFile(ids)
			live := treeOf(t, filepath.Join(store, "live"))
			for _, args := range [][]string{{"gc", store}, {"mount", store, t.TempDir()}} {
				var r result
				if args[0] == "mount" {
					r = refusedMount(t, args[1], args[2])
				} else {
					r = runBinary(t, nil, args...)
				}
				requireOneErrorLine(t, r, exitFailure, "live.ids")
				if !strings.Contains(r.stderr, "damaged live.ids") {
					t.Errorf("%v: %q does not say live.ids is damaged", args, r.stderr)
				}
				if now, _ := os.ReadFile(ids); !bytes.Equal(now, damaged) {
					t.Fatalf("%v changed the damaged live.ids", args)
				}
				if now := treeOf(t, filepath.Join(store, "live")); strings.Join(now, "\n") != strings.Join(live, "\n") {
					t.Fatalf("%v changed the live tree: %q, was %q", args, now, live)
				}
			}
			if damage.name != "garbage" {
				// verify names the cause before the files it lists.
				v := runBinary(t, nil, "verify", store)
				first, _, _ := strings.Cut(v.stdout, "\n")
				if v.code != exitProblems || !strings.Contains(first, "was it lost or emptied?") || strings.Count(v.stdout, "never recorded") != 3 {
					t.Errorf("verify: exit %d, %q; want the cause first, then the 3 files", v.code, v.stdout)
				}
			}
			if err := os.WriteFile(ids, saved, 0o600); err != nil {
				t.Fatal(err)
			}
			if r := runBinary(t, nil, "gc", store); r.code != exitOK {
				t.Fatalf("gc with live.ids back: %+v", r)
			}
			for _, name := range []string{"a.txt", "b.txt", "sub/c.txt"} {
				r := runBinary(t, nil, "log", "--store", store, name)
				if r.code != exitOK || strings.Count(r.stdout, "\n") != 3 {
					t.Fatalf("log of %s after gc: %+v", name, r)
				}
			}
		})
	}
}

// TestCopiedStoreRefused: a store copied without its live files' user
// xattrs (cp -r, tar, rsync -a) lost every file's deltafs id, and one
// copied with them but without its hard links (rsync -aX) has two files
// with one id: gc of the first took every history for a deleted file's
// and removed it (exit 0), a mount recorded every file as a new one,
// and the second's next change of one name showed as the other's (a
// user review). gc (and a mount, for the first) refuse on one line; a
// copy by cp -a works.
func TestCopiedStoreRefused(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	for _, name := range []string{"a.txt", "sub/b.txt"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(mnt, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if err := os.WriteFile(filepath.Join(mnt, name), []byte(name+" version "+string(rune('0'+i))+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if r := runBinary(t, nil, "log", filepath.Join(mnt, name)); r.code != exitOK { // waits for the revision
				t.Fatalf("log: %+v", r)
			}
		}
	}
	if err := os.Link(filepath.Join(mnt, "a.txt"), filepath.Join(mnt, "sub", "a-link.txt")); err != nil {
		t.Fatal(err)
	}
	p.stop(t, syscall.SIGTERM)
	for _, c := range []struct {
		name string
		cp   []string
		want string // in the refusal; "" for a copy that works
	}{
		{"no xattrs", []string{"-r"}, "copied without its extended attributes"},
		{"no hard links", []string{"-r", "--preserve=xattr"}, "copied without its hard links"},
		{"cp -a", []string{"-a"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			copied := filepath.Join(t.TempDir(), "copy.dfs")
			if out, err := exec.Command("cp", append(c.cp, store, copied)...).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, out)
			}
			r := runBinary(t, nil, "gc", copied)
			if c.want == "" {
				if r.code != exitOK {
					t.Fatalf("gc of the copy: %+v", r)
				}
				if l := runBinary(t, nil, "log", "--store", copied, "a.txt"); l.code != exitOK || strings.Count(l.stdout, "\n") != 2 {
					t.Fatalf("log of the copy: %+v", l)
				}
				return
			}
			requireOneErrorLine(t, r, exitFailure, c.want)
			if c.name == "no xattrs" {
				requireOneErrorLine(t, refusedMount(t, copied, t.TempDir()), exitFailure, c.want)
				// verify says why on one line, where it listed every
				// live file as never recorded.
				v := runBinary(t, nil, "verify", copied)
				if v.code != exitProblems || strings.Count(v.stdout, c.want) != 1 || strings.Contains(v.stdout, "never recorded") || !strings.Contains(v.stdout, ": 1 problem") {
					t.Errorf("verify of the copy: exit %d, %q; want exit %d and the one problem, its cause", v.code, v.stdout, exitProblems)
				}
			}
			if l := runBinary(t, nil, "log", "--store", store, "a.txt"); l.code != exitOK || strings.Count(l.stdout, "\n") != 2 {
				t.Fatalf("log of the original: %+v", l)
			}
		})
	}
}
