package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestFootprintWorkload runs F1's workload on a plain directory (no
// snapshots or .history there) twice: it does every kind of operation,
// checks what it reads, and the same seed gives the same tree.
func TestFootprintWorkload(t *testing.T) {
	t.Parallel()
	tree := func(dir string) map[string]string {
		got := map[string]string{}
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			got[rel] = fmt.Sprintf("%d:%x", len(b), b[:min(len(b), 16)])
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	var trees []map[string]string
	for i := range 2 {
		a := fpArgs{dir: filepath.Join(t.TempDir(), fmt.Sprint(i)), files: 50, ops: 2000, seed: 7}
		counts, err := runFootprintWork(a)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"create", "edit", "append", "save", "rename", "unlink", "read", "readdir"} {
			if counts[k] == 0 {
				t.Errorf("no %s operations: %v", k, counts)
			}
		}
		trees = append(trees, tree(a.dir))
	}
	if len(trees[0]) == 0 || !reflect.DeepEqual(trees[0], trees[1]) {
		t.Fatalf("two runs of one seed left different trees (%d and %d files)", len(trees[0]), len(trees[1]))
	}
}
