package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/deltafs/deltafs/bench/workload"
	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// The store builders of the repack suite that the store suite lacks: a
// store recorded the way the mount records in-place rewrites (R4), and
// the M3-style tree with rounds of edits (R3) for deltafs and for git.

// childMountIngest puts the chain as the mount's store sink does when a
// program rewrites the file in place from its first changed byte: the
// written range becomes a delta.EncodeWrites delta against the previous
// revision, put with PutRequest.DeltaOnly; when the store refuses it
// (ErrNeedFulltext, or any error: the mount falls back the same way) the
// fulltext is put instead. The store has the mount's configuration (the
// defaults). Timed: the EncodeWrites calls and the Puts.
func childMountIngest(ctx context.Context, args []string) (ChildResult, error) {
	a, err := parseStoreArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	s, err := objstore.Open(a.dir, objstore.Config{Create: true})
	if err != nil {
		return ChildResult{}, err
	}
	f, err := s.NewFile(storeFile)
	if err != nil {
		s.Close()
		return ChildResult{}, err
	}
	var t Timer
	var total int64
	var prev []byte
	err = a.chain.Walk(func(n int, rev []byte) error {
		total += int64(len(rev))
		t.Start()
		defer t.Stop()
		if n > 0 {
			if ok, err := putWrites(ctx, s, f, n, prev, rev); ok || err != nil {
				prev = rev
				return err
			}
		}
		_, err := s.Put(ctx, objstore.PutRequest{File: f, Data: rev, P1: revID(f, n-1)})
		prev = rev
		return err
	})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ChildResult{}, err
	}
	return builtResult(t, total, a.dir, f)
}

// putWrites records rev from the range a rewrite from the first changed
// byte writes; false means "put the fulltext".
func putWrites(ctx context.Context, s *objstore.Store, f index.FileID, n int, prev, rev []byte) (bool, error) {
	lo := commonPrefix(prev, rev)
	hi := len(rev)
	if len(rev) == len(prev) {
		hi -= commonSuffix(prev[lo:], rev[lo:])
	}
	if hi <= lo {
		hi = min(lo+1, len(rev)) // unchanged: one byte rewritten
	}
	var spans []delta.Span
	if hi > lo {
		spans = []delta.Span{{Off: int64(lo), Len: int64(hi - lo)}}
	}
	kept := int64(min(len(prev), len(rev))) // a shorter rewrite truncates
	d, err := delta.EncodeWrites(int64(len(prev)), kept, int64(len(rev)), spans, bytes.NewReader(rev))
	if err != nil {
		return false, nil
	}
	p1 := revID(f, n-1)
	_, err = s.Put(ctx, objstore.PutRequest{File: f, P1: p1, Delta: d, DeltaBase: p1, DeltaOnly: true, Size: uint64(len(rev))})
	return err == nil, nil
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 1; i <= n; i++ {
		if a[len(a)-i] != b[len(b)-i] {
			return i - 1
		}
	}
	return n
}

// builtResult reports a built store: timing, peak RSS, its sizes and its
// revision count ("revisions").
func builtResult(t Timer, total int64, dir string, f index.FileID) (ChildResult, error) {
	res := t.Result(total)
	res.PeakRSS = ownPeakRSS()
	var err error
	if res.Sizes, err = storeSizes(dir, f); err != nil {
		return res, err
	}
	var revs int64
	for k, v := range res.Sizes {
		if strings.HasPrefix(k, "kind ") {
			revs += v[0]
		}
	}
	res.Sizes["revisions"] = []int64{revs}
	return res, nil
}

// The R3 tree: M3's tree, then repackTreeRounds rounds, each editing
// repackTreeEditPct percent of the files chosen at random.
const (
	repackTreeRounds  = 10
	repackTreeEditPct = 10
)

// walkTreeHistory calls fn with every file revision of R3 in commit
// order: round 0 is M3's tree, one revision per file; each later round
// edits some files. Revisions of one round share the round number.
func walkTreeHistory(fn func(round int, path string, data []byte) error) error {
	var paths []string
	var texts [][]byte
	err := m3Tree.walk(func(path string, data []byte) error {
		if data == nil {
			return nil
		}
		paths, texts = append(paths, path), append(texts, data)
		return fn(0, path, data)
	})
	if err != nil {
		return err
	}
	tx := workload.NewText(m3Tree.Seed + 1000)
	r := tx.Rand()
	for round := 1; round <= repackTreeRounds; round++ {
		pick := r.Perm(len(paths))[:len(paths)*repackTreeEditPct/100]
		for _, i := range pick {
			spec := workload.EditSpec{Count: 1 + r.IntN(3), MinLen: 10, MaxLen: 300}
			texts[i] = workload.ApplyEdits(texts[i], tx.Edits(len(texts[i]), spec))
			if err := fn(round, paths[i], texts[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// treeArgs parses the tree children's flags (only -dir).
func treeArgs(args []string) (string, error) {
	fs := flag.NewFlagSet("tree child", flag.ContinueOnError)
	dir := fs.String("dir", "", "store or repository directory")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if *dir == "" {
		return "", errors.New("-dir is required")
	}
	return *dir, nil
}

// childTreeIngest stores R3 with objstore.Put, one store file per path,
// each revision's p1 its file's previous revision.
func childTreeIngest(ctx context.Context, args []string) (ChildResult, error) {
	dir, err := treeArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	s, err := objstore.Open(dir, objstore.Config{Create: true})
	if err != nil {
		return ChildResult{}, err
	}
	ids := map[string]index.RevID{}
	var t Timer
	var total int64
	err = walkTreeHistory(func(_ int, path string, data []byte) error {
		total += int64(len(data))
		t.Start()
		defer t.Stop()
		p1, ok := ids[path]
		f := p1.File
		if !ok {
			var err error
			if f, err = s.NewFile(path); err != nil {
				return err
			}
		}
		e, err := s.Put(ctx, objstore.PutRequest{File: f, Data: data, P1: p1})
		ids[path] = e.ID()
		return err
	})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ChildResult{}, err
	}
	return builtResult(t, total, dir, 1)
}

// childTreeGit imports R3 into a new bare repository with git
// fast-import, one commit per round, and reports git's own figures.
func childTreeGit(ctx context.Context, args []string) (ChildResult, error) {
	dir, err := treeArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	if out, err := exec.CommandContext(ctx, "git", "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
		return ChildResult{}, fmt.Errorf("git init: %w: %s", err, out)
	}
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "fast-import", "--quiet", "--depth=2000")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return ChildResult{}, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return ChildResult{}, err
	}
	w := bufio.NewWriterSize(stdin, 1<<20)
	var total int64
	cur := -1
	genErr := walkTreeHistory(func(round int, path string, data []byte) error {
		if round != cur {
			cur = round
			fmt.Fprintf(w, "commit refs/heads/main\nmark :%d\ncommitter bench <bench@localhost> %d +0000\ndata 0\n",
				round+1, 1_700_000_000+round)
			if round > 0 {
				fmt.Fprintf(w, "from :%d\n", round)
			}
		}
		total += int64(len(data))
		fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n", path, len(data))
		if _, err := w.Write(data); err != nil {
			return err
		}
		_, err := io.WriteString(w, "\n")
		return err
	})
	if genErr == nil {
		genErr = w.Flush()
	}
	stdin.Close()
	err = cmd.Wait()
	wall := time.Since(start)
	if err = errors.Join(genErr, err); err != nil {
		return ChildResult{}, fmt.Errorf("git fast-import: %w: %s", err, firstLine(stderr.String()))
	}
	s := processSample(cmd.ProcessState, wall)
	return ChildResult{WallNS: int64(s.Wall), CPUNS: int64(s.CPU), PeakRSS: s.MaxRSS, Bytes: total}, nil
}
