package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// gcArgs are the arguments of the gc children.
type gcArgs struct {
	dir     string
	files   int // files at the start
	rounds  int // rounds of edits
	edits   int // files edited per round
	every   int // a snapshot every this many rounds
	size    int // bytes per file
	delHalf bool
	policy  string // gcrun: default, prune or plan (a dry run)
}

func parseGCArgs(args []string) (gcArgs, error) {
	a := gcArgs{}
	fs := flag.NewFlagSet("gc child", flag.ContinueOnError)
	fs.StringVar(&a.dir, "dir", "", "store directory")
	fs.IntVar(&a.files, "files", 200, "files")
	fs.IntVar(&a.rounds, "rounds", 1000, "rounds of edits")
	fs.IntVar(&a.edits, "edits", 10, "files edited per round")
	fs.IntVar(&a.every, "every", 1, "a snapshot every N rounds")
	fs.IntVar(&a.size, "size", 4096, "bytes per file")
	fs.BoolVar(&a.delHalf, "delete-half", false, "delete every other snapshot at the end")
	fs.StringVar(&a.policy, "policy", "default", "gcrun: default, prune (--prune-unsnapshotted) or plan (--dry-run)")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if a.dir == "" {
		return a, errors.New("-dir is required")
	}
	return a, nil
}

// gcLiveName is the file, beside the store, listing its live files.
const gcLiveName = "live.json"

// childGCBuild writes the G1 store: files edited a few per round, one
// file deleted from the tree every 50 rounds, a snapshot of the tree (one
// directory of every live file) every -every rounds; with -delete-half,
// every other snapshot is then deleted. Sizes: "revisions", "snapshots".
func childGCBuild(ctx context.Context, args []string) (ChildResult, error) {
	a, err := parseGCArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	s, err := objstore.Open(a.dir, objstore.Config{Create: true})
	if err != nil {
		return ChildResult{}, err
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(6, 1))
	texts := make([][]byte, a.files)
	ids := make([]index.FileID, a.files)
	head := make([]index.RevID, a.files)
	live := map[index.FileID]bool{}
	var t Timer
	t.Start()
	revs := 0
	put := func(i int) error {
		e, err := s.Put(ctx, objstore.PutRequest{File: ids[i], Data: texts[i], P1: head[i]})
		head[i] = e.ID()
		revs++
		return err
	}
	for i := range a.files {
		if ids[i], err = s.NewFile(fmt.Sprintf("f%04d", i)); err != nil {
			return ChildResult{}, err
		}
		texts[i] = gcText(r, a.size)
		live[ids[i]] = true
		if err := put(i); err != nil {
			return ChildResult{}, err
		}
	}
	var names []string
	for round := 1; round <= a.rounds; round++ {
		for range a.edits {
			i := r.IntN(a.files)
			if !live[ids[i]] {
				continue
			}
			texts[i] = gcEdit(r, texts[i])
			if err := put(i); err != nil {
				return ChildResult{}, err
			}
		}
		if round%50 == 0 {
			delete(live, ids[r.IntN(a.files)])
		}
		if round%a.every == 0 {
			name := fmt.Sprintf("s%05d", round)
			if err := gcSnapshot(ctx, s, name, time.Unix(int64(round)*3600, 0), ids, head, live); err != nil {
				return ChildResult{}, err
			}
			names = append(names, name)
		}
	}
	if a.delHalf {
		for i := 0; i < len(names); i += 2 {
			if err := s.DeleteSnapshot(names[i]); err != nil {
				return ChildResult{}, err
			}
		}
		names = names[len(names)/2:]
	}
	t.Stop()
	b, _ := json.Marshal(live)
	if err := os.WriteFile(filepath.Join(filepath.Dir(a.dir), gcLiveName), b, 0o644); err != nil {
		return ChildResult{}, err
	}
	res := t.Result(0)
	res.Sizes = map[string][]int64{"revisions": {int64(revs)}, "snapshots": {int64(len(names))}}
	return res, nil
}

// gcSnapshot records a snapshot of one directory holding every live file.
func gcSnapshot(ctx context.Context, s *objstore.Store, name string, at time.Time, ids []index.FileID, head []index.RevID, live map[index.FileID]bool) error {
	tr := &index.Tree{}
	for i, id := range ids {
		if live[id] {
			tr.Entries = append(tr.Entries, index.TreeEntry{Name: fmt.Sprintf("f%04d", i), Mode: syscall.S_IFREG | 0o644, Nlink: 1, Rev: head[i]})
		}
	}
	tr.Sort()
	b, h, err := tr.Encode()
	if err != nil {
		return err
	}
	root := index.TreeEntry{Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Tree: h}
	_, err = s.CreateSnapshot(ctx, objstore.SnapshotRequest{Name: name, Time: at, Root: root,
		Trees: map[index.TreeHash][]byte{h: b}})
	return err
}

// gcText is n bytes of compressible text.
func gcText(r *rand.Rand, n int) []byte {
	words := []string{"alpha ", "beta ", "gamma ", "delta ", "store ", "revision ", "snapshot ", "segment\n"}
	b := make([]byte, 0, n+16)
	for len(b) < n {
		b = append(b, words[r.IntN(len(words))]...)
	}
	return b[:n]
}

// gcEdit replaces a few bytes of t with fresh text.
func gcEdit(r *rand.Rand, t []byte) []byte {
	out := append([]byte{}, t...)
	for range 3 {
		at := r.IntN(len(out) - 32)
		copy(out[at:], gcText(r, 32))
	}
	return out
}

// readGCLive reads the live files written beside the store.
func readGCLive(dir string) (map[index.FileID]bool, error) {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), gcLiveName))
	if err != nil {
		return nil, err
	}
	live := map[index.FileID]bool{}
	return live, json.Unmarshal(b, &live)
}

// childGCRun runs gc on the store: the default policy, with
// --prune-unsnapshotted ("prune"), or only its plan (a dry run, "plan").
// Sizes: "removed", "kept", "before", "after" (segment bytes).
func childGCRun(ctx context.Context, args []string) (ChildResult, error) {
	a, err := parseGCArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	live, err := readGCLive(a.dir)
	if err != nil {
		return ChildResult{}, err
	}
	opt := objstore.GCOptions{Live: func() (map[index.FileID]bool, error) { return live, nil }}
	switch a.policy {
	case "prune":
		opt.Policy.PruneUnsnapshotted = true
	case "plan":
		opt.DryRun = true
	case "default":
	default:
		return ChildResult{}, fmt.Errorf("policy %q", a.policy)
	}
	var t Timer
	t.Start()
	rep, err := objstore.GC(ctx, a.dir, opt)
	t.Stop()
	if err != nil {
		return ChildResult{}, err
	}
	res := t.Result(0)
	res.Sizes = map[string][]int64{"removed": {rep.Removed}, "kept": {rep.Kept},
		"before": {int64(rep.SizeBefore)}, "after": {int64(rep.SizeAfter)}}
	return res, nil
}

// childGCUsage computes every snapshot's exclusive bytes, as "snapshot
// list" does. Sizes: "snapshots", "exclusive" (their sum).
func childGCUsage(ctx context.Context, args []string) (ChildResult, error) {
	a, err := parseGCArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	live, err := readGCLive(a.dir)
	if err != nil {
		return ChildResult{}, err
	}
	s, err := objstore.Open(a.dir, objstore.Config{ReadOnly: true})
	if err != nil {
		return ChildResult{}, err
	}
	defer s.Close()
	var t Timer
	t.Start()
	us, err := s.SnapshotUsages(ctx, live)
	t.Stop()
	if err != nil {
		return ChildResult{}, err
	}
	var sum int64
	for _, u := range us {
		sum += int64(u.ExclusiveBytes)
	}
	res := t.Result(0)
	res.Sizes = map[string][]int64{"snapshots": {int64(len(us))}, "exclusive": {sum}}
	return res, nil
}
