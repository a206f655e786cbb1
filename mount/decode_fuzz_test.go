package mount

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
)

// The pending journal is read back from disk at every mount: any bytes
// replay without a panic, whole records apply, and the journal's own
// re-encoding of what it kept replays to the same pending set.
func FuzzJournalReplay(f *testing.F) {
	a, b := fs.NewFileID(), fs.NewFileID()
	var seed []byte
	seed = appendRecord(seed, recDirty, a, []byte("dir/a.txt"))
	seed = appendRecord(seed, recDirty, b, []byte("b"))
	seed = appendRecord(seed, recMoved, a, []byte("dir/a2.txt"))
	seed = appendRecord(seed, recCont, b, a[:])
	seed = appendRecord(seed, recClean, a, nil)
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		j := &journal{log: slog.New(slog.NewTextHandler(io.Discard, nil)), pending: map[fs.FileID]*pendingFile{}}
		rest := j.replay(b)
		if rest < 0 || rest > len(b) {
			t.Fatalf("replay left %d of %d bytes", rest, len(b))
		}
		// What replay kept, written out as the journal rewrites itself,
		// replays to the same files, paths and continuations.
		again := &journal{log: j.log, pending: map[fs.FileID]*pendingFile{}}
		if r := again.replay(j.snapshotLocked()); r != 0 {
			t.Fatalf("the journal's own rewrite has %d bad bytes", r)
		}
		if len(again.pending) != len(j.pending) {
			t.Fatalf("rewrite replays %d files, want %d", len(again.pending), len(j.pending))
		}
		for id, p := range j.pending {
			q := again.pending[id]
			if q == nil || q.path != p.path || q.continues != p.continues {
				t.Fatalf("file %v: rewrite gives %+v, want %+v", id, q, p)
			}
		}
	})
}

// The rows of "deltafs log" cross the control socket: bad bytes give
// errRows, never a panic, and whatever decodes re-encodes to the same
// rows.
func FuzzReadRows(f *testing.F) {
	t0 := time.Date(2026, 11, 29, 23, 15, 2, 0, time.UTC)
	f.Add(appendRows(nil, []RevInfo{
		{Rev: 0, Time: t0, Size: 10, Base: "full", Stored: 9, Snapshots: []string{"s1"}},
		{Rev: 1, Time: t0.Add(time.Second), Size: 12, Base: "p1", Chain: 1, Stored: 4,
			BaseRev: &RevRef{File: 2, Rev: 0}, P1: &RevRef{File: 2, Rev: 0}, Flags: []string{"delta"}},
	}))
	f.Add(appendRows(nil, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		revs, err := readRows(b)
		if err != nil {
			if !errors.Is(err, errRows) {
				t.Fatalf("error not errRows: %v", err)
			}
			return
		}
		again, err := readRows(appendRows(nil, revs))
		if err != nil {
			t.Fatalf("re-encoded rows do not decode: %v", err)
		}
		want, _ := json.Marshal(revs)
		have, _ := json.Marshal(again)
		if string(have) != string(want) {
			t.Fatalf("round trip:\n got %s\nwant %s", have, want)
		}
	})
}

// Names cross the control socket as ByteStrings: any bytes decode
// without a panic, to a value or an error, and whatever decodes
// re-encodes to a value that decodes to the same bytes.
func FuzzByteString(f *testing.F) {
	for _, s := range []string{`"notes.txt"`, `{"bytes":"ZP8vZoD/"}`, `null`, `{"bytes":null}`, `"\ud800"`, `12`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s ByteString
		if err := json.Unmarshal(b, &s); err != nil {
			return
		}
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("%q does not encode: %v", s, err)
		}
		var again ByteString
		if err := json.Unmarshal(enc, &again); err != nil || again != s {
			t.Fatalf("%q encoded as %s decodes to %q, %v", s, enc, again, err)
		}
	})
}
