package mount

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
)

// textOf returns n bytes of compressible text, distinct for each seed.
func textOf(seed, n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "file %d, line %d: %x\n", seed, i, i*i*(seed+1))
	}
	return b.Bytes()[:n]
}

// TestWriterLetGoAtReadIsNotTakenUnchanged: a writer that reopens its
// file once the sink has read its previous change (Recorder.WaitRead)
// rewrites it, same size, while that change waits its turn in a window
// of puts. The live file must not then pass for the revision the sink
// read (its ctime older than the revision's time): the journal's redo
// after a kill would drop the rewrite unrecorded, and a snapshot would
// name the previous content.
func TestWriterLetGoAtReadIsNotTakenUnchanged(t *testing.T) {
	dir, st, sink := openTestSink(t)
	ls := &lockedSink{sink: sink}
	const n, size = 64, 32 << 10 // one window whose puts queue for the store's lock
	ids := make([]fs.FileID, n)
	var evs []Event
	var wg sync.WaitGroup
	for i := range n {
		p := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(p, textOf(i, size), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = fs.NewFileID()
		read := newReadSignal()
		evs = append(evs, Event{Change: &fs.Change{Path: fmt.Sprint(i), ID: ids[i], Size: size, New: true, Whole: true, Content: f}, read: read})
		wg.Add(1)
		go func() { // the writer, let go once its change is read
			defer wg.Done()
			<-read.ch
			if err := os.WriteFile(p, textOf(n+i, size), 0o644); err != nil {
				t.Error(err)
			}
		}()
	}
	ls.RecordBatch(context.Background(), evs, func(errs []error) {
		for _, err := range errs {
			if err != nil {
				t.Errorf("recording: %v", err)
			}
		}
	})
	wg.Wait()
	r := &redoer{st: st}
	var redoSkips, snapSkips int
	for i := range n {
		p := filepath.Join(dir, fmt.Sprint(i))
		rev := sink.last[sink.ids[ids[i]]]
		e, err := st.Entry(rev)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := st.Get(context.Background(), rev); err != nil || !bytes.Equal(got, textOf(i, size)) {
			t.Fatalf("file %d: revision %v is not the content read (%v): %d bytes, B %v, entry %+v, head %q", i, rev, err, len(got), bytes.Equal(got, textOf(n+i, size)), e, got[:min(len(got), 40)])
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if r.unchangedSince(rev, fi) {
			redoSkips++
		}
		if unchangedSince(p, e) {
			snapSkips++
		}
	}
	if redoSkips+snapSkips > 0 {
		t.Errorf("of %d files rewritten once their change was read, %d pass for unchanged since that revision at a redo, %d at a snapshot",
			n, redoSkips, snapSkips)
	}
}

// TestSnapshotRevisionIgnoresMtimeSetBack: a file rewritten (same size)
// after its newest revision, its mtime then set back (cp -p, tar), is
// recorded again when a snapshot names its revision: the ctime, which
// utimens cannot set back, says it changed.
func TestSnapshotRevisionIgnoresMtimeSetBack(t *testing.T) {
	dir, st, sink := openTestSink(t)
	ls := &lockedSink{sink: sink}
	ctx := context.Background()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("AAAAAAAA"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := fs.NewFileID()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Record(ctx, Event{Change: &fs.Change{Path: "f", ID: id, Size: 8, New: true, Whole: true, Content: f}}); err != nil {
		t.Fatal(err)
	}
	prev := sink.last[sink.ids[id]]
	if err := os.WriteFile(p, []byte("BBBBBBBB"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	ls.mu.Lock() // as the snapshotter does
	rev, _, err := (&liveRevs{st: st, ls: ls, live: dir}).Revision(ctx, id, p, 8)
	ls.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	if rev == prev || string(got) != "BBBBBBBB" {
		t.Errorf("snapshot names %v (%q; the previous revision was %v), want a new revision of BBBBBBBB", rev, got, prev)
	}
	if rev.Rev != prev.Rev+1 || rev.File != prev.File || rev == (index.RevID{}) {
		t.Errorf("new revision %v, want the one after %v", rev, prev)
	}
}
