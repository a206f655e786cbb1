package mount

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/objstore"
)

// watchedIDs wraps the sink's real ids file and checks that no store
// file has a committed revision before a record mapping a live file to
// it is durable: when a record is appended, its store file has no
// revision unless an earlier record of it is durable already, and none
// is committed between the append and the fsync.
type watchedIDs struct {
	idsLog
	t       *testing.T
	st      *objstore.Store
	durable map[index.FileID]bool   // store files with a fsynced record
	pending map[index.FileID]uint32 // appended, not fsynced: revisions then
	syncs   int
	writes  int
}

func (w *watchedIDs) revs(fid index.FileID) uint32 {
	m, err := w.st.File(fid)
	if err != nil {
		w.t.Errorf("store file %d: %v", fid, err)
	}
	return m.Revs
}

func (w *watchedIDs) Write(b []byte) (int, error) {
	if len(b)%idRecordLen != 0 {
		w.t.Errorf("write of %d bytes to %s: not whole records", len(b), idsFile)
	}
	for rec := b; len(rec) >= idRecordLen; rec = rec[idRecordLen:] {
		fid := index.FileID(binary.BigEndian.Uint64(rec[16:]))
		if fid == 0 {
			continue // a mapping taken away (transfer)
		}
		if _, ok := w.pending[fid]; !ok {
			w.pending[fid] = w.revs(fid)
			if !w.durable[fid] && w.pending[fid] > 0 {
				w.t.Errorf("store file %d: %d revisions committed before its first record was appended", fid, w.pending[fid])
			}
		}
	}
	w.writes++
	return w.idsLog.Write(b)
}

func (w *watchedIDs) Sync() error {
	w.syncs++
	for fid, before := range w.pending {
		if now := w.revs(fid); now != before && !w.durable[fid] {
			w.t.Errorf("store file %d: %d revisions when its record was appended, %d when fsynced", fid, before, now)
		}
		w.durable[fid] = true
	}
	clear(w.pending)
	return w.idsLog.Sync()
}

// TestIDsDurableBeforeFirstRevision: a backlog of new files (an untar)
// and an atomic save are recorded; every record of live.ids is fsynced
// before a revision of its store file is committed, the new files of a
// window share one write and one fsync, and live.ids read afresh maps
// every file.
func TestIDsDurableBeforeFirstRevision(t *testing.T) {
	dir, st, sink := openTestSink(t)
	w := &watchedIDs{idsLog: sink.f, t: t, st: st, durable: map[index.FileID]bool{}, pending: map[index.FileID]uint32{}}
	sink.f = w
	ls := &lockedSink{sink: sink}

	const n = 200
	ids := make([]fs.FileID, n+1)
	change := func(i int, ev Event) Event {
		p := filepath.Join(dir, fmt.Sprint(i))
		data := testutil.Bytes(uint64(i), 100+i)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c := fs.Change{Path: fmt.Sprint(i), ID: ids[i], Size: int64(len(data)), New: true}
		var err error
		if c.Content, err = os.Open(p); err != nil {
			t.Fatal(err)
		}
		ev.Change = &c
		return ev
	}
	var evs []Event
	for i := range n {
		ids[i] = fs.NewFileID()
		evs = append(evs, change(i, Event{}))
	}
	// an atomic save over file 3: a new live file continuing its history
	ids[n] = fs.NewFileID()
	evs = append(evs, change(n, Event{Continues: ids[3]}))
	ls.RecordBatch(context.Background(), evs, func(errs []error) {
		for _, err := range errs {
			if err != nil {
				t.Errorf("recording: %v", err)
			}
		}
	})
	if len(w.pending) != 0 {
		t.Errorf("%d records never fsynced", len(w.pending))
	}
	t.Logf("%d files, %d writes and %d fsyncs of %s", n+1, w.writes, w.syncs, idsFile)
	if w.syncs > n/maxWindow+3 || w.writes > w.syncs {
		t.Errorf("%d writes and %d fsyncs for %d new files, want one of each per window of %d", w.writes, w.syncs, n, maxWindow)
	}
	onDisk, err := readIDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The atomic save took file 3's history: 3's live identity has none.
	if _, ok := onDisk[ids[3]]; ok || onDisk[ids[n]] == 0 {
		t.Fatalf("after the atomic save over file 3: %s maps it to %d and the save to %d, want none and its store file",
			idsFile, onDisk[ids[3]], onDisk[ids[n]])
	}
	for i, id := range ids {
		if i == 3 {
			continue
		}
		fid, ok := onDisk[id]
		if !ok || fid != sink.ids[id] {
			t.Fatalf("file %d: %s maps to %d (%v), the sink to %d", i, idsFile, fid, ok, sink.ids[id])
		}
		if m, err := st.File(fid); err != nil || m.Revs == 0 {
			t.Fatalf("file %d: store file %d %+v (%v), want revisions", i, fid, m, err)
		}
	}
	// (Its record is named by the path of its last revision: the save's.)
	fid := onDisk[ids[n]]
	e, eerr := st.Entry(index.RevID{File: fid, Rev: 0})
	if m, err := st.File(fid); err != nil || eerr != nil || m.Name != fmt.Sprint(n) || m.Revs != 2 || e.Size != 100+3 {
		t.Errorf("the atomic save maps to store file %d %+v (%v), first revision of %d bytes (%v), want file 3's, with 2 revisions", fid, m, err, e.Size, eerr)
	}
}

// failingIDs fails the n-th Write or Sync of the ids file (a disk error).
type failingIDs struct {
	idsLog
	failWrite, failSync bool
}

func (f *failingIDs) Write(b []byte) (int, error) {
	if f.failWrite {
		f.failWrite = false
		n, _ := f.idsLog.Write(b[:min(len(b), 10)]) // cut short: ENOSPC part way
		return n, syscall.ENOSPC
	}
	return f.idsLog.Write(b)
}

func (f *failingIDs) Sync() error {
	if f.failSync {
		f.failSync = false
		return syscall.EIO
	}
	return f.idsLog.Sync()
}

// After a failed write or fsync of live.ids the sink records nothing
// more: a later change of the same file, whose mapping the sink already
// holds in memory, would be put with that mapping never made durable
// (and gc would take its history for a deleted file's after a restart).
// A new sink over the same ids file maps what was durable and nothing
// torn.
func TestIDsFailureStopsRecording(t *testing.T) {
	for _, failWrite := range []bool{false, true} {
		t.Run(fmt.Sprintf("failWrite=%v", failWrite), func(t *testing.T) {
			dir, st, sink := openTestSink(t)
			sink.f = &failingIDs{idsLog: sink.f, failWrite: failWrite, failSync: !failWrite}
			id := fs.NewFileID()
			record := func(data []byte) error {
				p := filepath.Join(dir, "f")
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
				c := fs.Change{Path: "f", ID: id, Size: int64(len(data)), New: true}
				var err error
				if c.Content, err = os.Open(p); err != nil {
					t.Fatal(err)
				}
				return sink.Record(context.Background(), Event{Change: &c, read: newReadSignal()})
			}
			if err := record([]byte("one")); err == nil {
				t.Fatal("the first change was recorded although live.ids failed")
			}
			if err := record([]byte("two")); err == nil {
				t.Fatal("a later change was recorded after live.ids failed")
			}
			for f := index.FileID(1); f < 4; f++ {
				if m, err := st.File(f); err == nil && m.Revs > 0 {
					t.Fatalf("store file %d has %d revisions", f, m.Revs)
				}
			}
			ids := map[fs.FileID]index.FileID{}
			b, _ := os.ReadFile(filepath.Join(dir, idsFile))
			// A failed fsync may leave the record (harmless: its store
			// file has no revision); a write cut short leaves a torn tail.
			if _, err := parseIDs(b, ids); err != nil || failWrite && len(ids) != 0 {
				t.Fatalf("live.ids after the failure: %v (%v)", ids, err)
			}
		})
	}
}
