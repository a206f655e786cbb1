package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

// TestRecoverTornTail appends what a crash leaves behind (a torn record
// after the committed tail and a segment nothing references) and checks
// that Open cuts it off and the store carries on.
func TestRecoverTornTail(t *testing.T) {
	s, dir := openNew(t, Config{})
	r := rand.New(rand.NewPCG(31, 32))
	f := mustNewFile(t, s, "t")
	text := genText(r, 5000)
	e := mustPut(t, s, PutRequest{File: f, Data: text})
	s.Close()
	segDir := filepath.Join(dir, "segments")
	seg := filepath.Join(segDir, segName(e.Seg))
	before, _ := os.Stat(seg)
	torn := appendRecord(nil, recHeader{ID: index.RevID{File: f, Rev: 1}, TextLen: 3}, []byte("abc"))
	appendFile(t, seg, torn[:len(torn)-5])
	os.WriteFile(filepath.Join(segDir, segName(e.Seg+1)), torn, 0o644)

	s2, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	after, _ := os.Stat(seg)
	if after.Size() != before.Size() {
		t.Fatalf("segment %d bytes after recovery, want %d", after.Size(), before.Size())
	}
	if _, err := os.Stat(filepath.Join(segDir, segName(e.Seg+1))); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("uncommitted segment survived recovery")
	}
	text2 := edit(r, text, 2)
	e2 := mustPut(t, s2, PutRequest{File: f, Data: text2, P1: e.ID()})
	if e2.Rev != 1 || e2.Off != uint64(before.Size()) {
		t.Fatalf("put after recovery: rev %d at %d", e2.Rev, e2.Off)
	}
	if !bytes.Equal(mustGet(t, s2, e2.ID()), text2) || !bytes.Equal(mustGet(t, s2, e.ID()), text) {
		t.Fatal("reads after recovery wrong")
	}
	verifyClean(t, s2)
}

// TestSegmentShorterThanIndex: data lost under the committed tail (a disk
// problem, not a crash) makes the affected revisions fail as corrupt, and
// verify reports the damage too.
func TestSegmentShorterThanIndex(t *testing.T) {
	s, dir := openNew(t, Config{})
	r := rand.New(rand.NewPCG(33, 34))
	f := mustNewFile(t, s, "t")
	text := genText(r, 5000)
	var last index.Entry
	for range 4 {
		last = mustPut(t, s, PutRequest{File: f, Data: text, P1: last.ID()})
		text = edit(r, text, 2)
	}
	s.Close()
	if err := os.Truncate(filepath.Join(dir, "segments", segName(last.Seg)), int64(last.Off)+10); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_, err = s2.Get(context.Background(), last.ID())
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "revision 3 of file 1") {
		t.Fatalf("get of truncated revision: %v", err)
	}
	// The lost revision, then the damage the open recorded (damage.go).
	var bad []index.RevID
	n, err := s2.Verify(context.Background(), func(p Problem) { bad = append(bad, p.Rev) })
	if err != nil || n != 2 || bad[0] != last.ID() || !bad[1].IsNull() {
		t.Fatalf("verify: %d %v %v", n, bad, err)
	}
}

func TestClosedStore(t *testing.T) {
	s, _ := openNew(t, Config{})
	f := mustNewFile(t, s, "c")
	s.Close()
	if _, err := s.Put(context.Background(), PutRequest{File: f, Data: []byte("x")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("put after close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestCloseDuringPuts: Close racing with writers commits what they appended;
// every Put either fails with ErrClosed or is durable.
func TestCloseDuringPuts(t *testing.T) {
	s, dir := openNew(t, Config{})
	var files []index.FileID
	for i := range 4 {
		files = append(files, mustNewFile(t, s, fmt.Sprint(i)))
	}
	type result struct {
		e   index.Entry
		err error
	}
	results := make(chan result, 4*20)
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				e, err := s.Put(context.Background(), PutRequest{File: f, Data: fmt.Appendf(nil, "w%d r%d", i, j)})
				results <- result{e, err}
				if err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	s2, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for r := range results {
		if r.err != nil {
			if !errors.Is(r.err, ErrClosed) {
				t.Fatalf("put failed with %v", r.err)
			}
			continue
		}
		if _, err := s2.Get(context.Background(), r.e.ID()); err != nil {
			t.Fatalf("acknowledged %v lost by Close: %v", r.e.ID(), err)
		}
	}
}
