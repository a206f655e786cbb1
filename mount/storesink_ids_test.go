package mount

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
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
	if m, err := st.File(onDisk[ids[n]]); err != nil || m.Name != "3" || m.Revs != 2 {
		t.Errorf("the atomic save maps to store file %+v (%v), want file 3's, with 2 revisions", m, err)
	}
}
