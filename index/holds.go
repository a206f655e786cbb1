package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"

	badger "github.com/dgraph-io/badger/v4"
)

// Which snapshots hold a file's revisions, from the file's own rows. A
// snapshot's reference set answers "which revisions does this snapshot
// hold"; a history view asks the converse for one file, and probing
// every snapshot's set costs the number of snapshots. So each snapshot
// also writes, for each file whose held revisions differ from the
// previous snapshot's, a row b/<file><id> with the revisions it holds
// (none: the file left the tree), and lists those files under c/<id>.
// A prefix scan of b/<file> then gives the file's boundaries: snapshot
// S holds the revisions of the row of the greatest id <= S among the
// rows of existing snapshots (none if there is no such row).
//
// Invariants, for every existing snapshot S and file f:
//   - a row (f, S), if present, holds exactly the revisions of f that S
//     holds, and f is in S's list;
//   - without one, S holds what its predecessor (the previous existing
//     snapshot) holds, or nothing if it has none.
//
// Rows of snapshots that do not exist (deleted, or a creation that never
// committed) are ignored by every reader, so a crash between the steps
// below leaves the answers exact:
//   - creating S (its predecessor P is the latest snapshot): rows for
//     the files whose revisions toggle between P's reference set and
//     S's (a roaring XOR, so the cost follows what changed); rows left at
//     S's id by a creation that never committed are cleared first;
//   - deleting S: each of S's rows moves to its successor N unless N has
//     a row of its own for that file (S's row was N's answer), then S's
//     record goes, then its rows;
//   - renaming changes nothing: rows name snapshots by id.
//
// m/holds stamps the rows with the snapshot state they are complete for
// (holds_stamp.go: the number of snapshots and the next id), rewritten in
// the transaction of every creation and deletion. Builds older than the
// rows open the store too and change its snapshots without them; the
// stamp then no longer matches, and Open, which compares it with the
// state once (badger locks the directory, so no other process changes the
// snapshots while the DB is open), trusts no row. Readers (EachHolder,
// CheckHolds) then fall back to probing the reference sets, creations and
// deletions write no rows and drop the stamp, until:
//   - no snapshot is left: the rows are trivially complete (those left
//     are of snapshots gone), and the next creation stamps them again;
//   - RebuildHolds rewrites them all from the reference sets. Its cost is
//     one pass over every set (as verify's CheckHolds), too much for a
//     snapshot creation in a mount, so the offline passes that already
//     read the whole store and hold its lock run it: gc (unless a dry
//     run) and repack.
//
// A reader compares, in its own transaction, the stamp there with the one
// the DB trusts, so the rows it reads are those of a state the stamp
// names; a change committing meanwhile only sends it to the reference
// sets. EachHolder's list comes from the caller (a mount's cached copy,
// which it updates with each change it makes; no other process changes
// the store while it is mounted), read apart from the rows: rows of
// snapshots not in it are skipped, which is exact when the list is every
// snapshot of the rows' state. A list of another length than the stamp's
// count (a change between the list and the rows) falls back to the
// reference sets, which answer for what exists; what is left is a
// deletion and a creation both between the list and the rows, where the
// deleted snapshot, still listed, shows its predecessor's revisions, as
// stale as the list it came from.

// holdTxnRows bounds the rows a snapshot change writes inside its own
// transaction; more (the first snapshot of a large tree) go in write
// batches around it, well under badger's transaction limit with the
// index's small memtables.
const holdTxnRows = 8192

// appendSorted encodes a sorted list: a uvarint count, then uvarint
// deltas.
func appendSorted[T ~uint32 | ~uint64](b []byte, v []T) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	var prev uint64
	for _, x := range v {
		b = binary.AppendUvarint(b, uint64(x)-prev)
		prev = uint64(x)
	}
	return b
}

// readSorted decodes appendSorted's output, appending to dst.
func readSorted[T ~uint32 | ~uint64](dst []T, b []byte, max uint64) ([]T, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return dst, fmt.Errorf("%w: sorted list count", ErrDecode)
	}
	b = b[k:]
	var x uint64
	for i := uint64(0); i < n; i++ {
		d, k := binary.Uvarint(b)
		if k <= 0 || (i > 0 && d == 0) || x+d < x || x+d > max {
			return dst, fmt.Errorf("%w: sorted list entry %d", ErrDecode, i)
		}
		x, b = x+d, b[k:]
		dst = append(dst, T(x))
	}
	if len(b) != 0 {
		return dst, fmt.Errorf("%w: sorted list: trailing bytes", ErrDecode)
	}
	return dst, nil
}

// holdOps is a snapshot change's writes to the rows, in the order they
// must reach the disk when they do not fit one transaction.
type holdOps struct {
	first []kv     // committed first (lists naming rows about to be written)
	rows  []kv     // the rows (a nil value deletes)
	last  [][]byte // deleted after the record changes (rows now orphaned)
}

type kv struct{ k, v []byte }

func (o *holdOps) size() int { return len(o.first) + len(o.rows) + len(o.last) }

// apply writes every op into txn (a change small enough for one).
func (o *holdOps) apply(txn *badger.Txn) error {
	for _, l := range [][]kv{o.first, o.rows} {
		for _, x := range l {
			if err := setOrDelete(txn, x); err != nil {
				return err
			}
		}
	}
	for _, k := range o.last {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func setOrDelete(txn *badger.Txn, x kv) error {
	if x.v == nil {
		return txn.Delete(x.k)
	}
	return txn.Set(x.k, x.v)
}

// writeBatch writes l in write batches.
func (db *DB) writeBatch(l []kv) error {
	if len(l) == 0 {
		return nil
	}
	if err := db.beginWrite(); err != nil {
		return err
	}
	wb := db.bdb.NewWriteBatch()
	defer wb.Cancel()
	for _, x := range l {
		var err error
		if x.v == nil {
			err = wb.Delete(x.k)
		} else {
			err = wb.Set(x.k, x.v)
		}
		if err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	return db.syncNewLogs() // powercut.go
}

// commitHolds runs record (the transaction that creates or deletes a
// snapshot record) with ops: inside it when they fit, else around it in
// batches, in an order that leaves readers exact at every step.
func (db *DB) commitHolds(ops *holdOps, record func(txn *badger.Txn) error) error {
	if ops.size() <= holdTxnRows {
		return db.update(func(txn *badger.Txn) error {
			if err := ops.apply(txn); err != nil {
				return err
			}
			return record(txn)
		})
	}
	if err := db.writeBatch(ops.first); err != nil {
		return err
	}
	if err := db.writeBatch(ops.rows); err != nil {
		return err
	}
	if err := db.update(record); err != nil {
		return err
	}
	last := make([]kv, len(ops.last))
	for i, k := range ops.last {
		last[i] = kv{k: k}
	}
	return db.writeBatch(last)
}

// holdFiles returns the files listed under c/id (none if absent).
func holdFiles(txn *badger.Txn, id SnapshotID) ([]FileID, error) {
	b, err := getValue(txn, holdSetKey(id))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return readSorted[FileID](nil, b, 1<<64-1)
}

func hasKey(txn *badger.Txn, k []byte) (bool, error) {
	_, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// heldAt returns the revisions of f that existing snapshot at holds, from
// the rows (reading back from at, skipping rows of snapshots gone).
func heldAt(txn *badger.Txn, it *badger.Iterator, f FileID, at SnapshotID) ([]Rev, error) {
	pre := holdPrefix(f)
	for it.Seek(holdKey(f, at)); it.ValidForPrefix(pre); it.Next() {
		id, ok := holdKeyID(it.Item().Key())
		if !ok {
			return nil, fmt.Errorf("%w: hold key %x", ErrDecode, it.Item().Key())
		}
		if live, err := hasKey(txn, snapKey(id)); err != nil {
			return nil, err
		} else if !live {
			continue
		}
		var revs []Rev
		err := it.Item().Value(func(v []byte) (err error) {
			revs, err = readSorted[Rev](nil, v, 1<<32-1)
			return err
		})
		return revs, err
	}
	return nil, nil
}

// planCreate returns the row writes of a snapshot about to be created
// with id id and reference set refs, after latest (ok: there is one);
// complete says the rows are trusted (or there is no snapshot), and is
// returned as the created snapshot's rows will be.
func planCreate(txn *badger.Txn, id SnapshotID, refs *Refs, latest Snapshot, ok, complete bool) (*holdOps, bool, error) {
	ops := &holdOps{}
	orphans, err := holdFiles(txn, id)
	if err != nil {
		return nil, false, err
	}
	for _, f := range orphans {
		ops.first = append(ops.first, kv{k: holdKey(f, id)})
	}
	if !complete {
		return ops, false, nil // rows not trusted: none written (see above)
	}
	toggled := refs.Clone()
	if ok {
		b, err := getValue(txn, snapRefsKey(latest.ID))
		if err != nil {
			return nil, false, err
		}
		prev, err := decodeRefs(b)
		if err != nil {
			return nil, false, err
		}
		toggled.Xor(prev)
	}
	byFile := map[FileID][]Rev{}
	for it := toggled.Iterator(); it.HasNext(); {
		r := RefID(it.Next())
		byFile[r.File] = append(byFile[r.File], r.Rev)
	}
	files := make([]FileID, 0, len(byFile))
	for f := range byFile {
		files = append(files, f)
	}
	slices.Sort(files)
	o := badger.DefaultIteratorOptions
	o.Reverse, o.PrefetchValues, o.Prefix = true, false, prefixHold
	it := txn.NewIterator(o)
	defer it.Close()
	for _, f := range files {
		var old []Rev
		if ok {
			if old, err = heldAt(txn, it, f, latest.ID); err != nil {
				return nil, false, err
			}
		}
		revs := nextHeld(old, byFile[f], refs, f)
		ops.rows = append(ops.rows, kv{k: holdKey(f, id), v: appendSorted(nil, revs)})
	}
	if len(files) > 0 {
		ops.first = append(ops.first, kv{k: holdSetKey(id), v: appendSorted(nil, files)})
	} else if len(orphans) > 0 {
		ops.first = append(ops.first, kv{k: holdSetKey(id)})
	}
	return ops, true, nil
}

// nextHeld is old with each toggled revision in or out as refs has it.
func nextHeld(old, toggled []Rev, refs *Refs, f FileID) []Rev {
	out := make([]Rev, 0, len(old)+len(toggled))
	for _, r := range old {
		if !slices.Contains(toggled, r) {
			out = append(out, r)
		}
	}
	for _, r := range toggled {
		if refs.Contains(uint64(r)<<32 | uint64(f)) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// planDelete returns the row writes of deleting snapshot s: none unless
// the rows are trusted (complete).
func planDelete(txn *badger.Txn, s Snapshot, complete bool) (*holdOps, error) {
	ops := &holdOps{}
	if !complete {
		return ops, nil
	}
	files, err := holdFiles(txn, s.ID)
	if err != nil || len(files) == 0 {
		return ops, err
	}
	next, hasNext, err := nextSnapshot(txn, s.ID)
	if err != nil {
		return nil, err
	}
	var moved []FileID
	for _, f := range files {
		v, err := getValue(txn, holdKey(f, s.ID))
		if errors.Is(err, ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		ops.last = append(ops.last, holdKey(f, s.ID))
		if !hasNext {
			continue
		}
		if own, err := hasKey(txn, holdKey(f, next)); err != nil {
			return nil, err
		} else if !own {
			moved = append(moved, f)
			ops.rows = append(ops.rows, kv{k: holdKey(f, next), v: slices.Clone(v)})
		}
	}
	ops.last = append(ops.last, holdSetKey(s.ID))
	if len(moved) > 0 {
		have, err := holdFiles(txn, next)
		if err != nil {
			return nil, err
		}
		all := append(have, moved...)
		slices.Sort(all)
		ops.first = append(ops.first, kv{k: holdSetKey(next), v: appendSorted(nil, slices.Compact(all))})
	}
	return ops, nil
}

// nextSnapshot returns the id of the first existing snapshot after id.
func nextSnapshot(txn *badger.Txn, id SnapshotID) (SnapshotID, bool, error) {
	o := badger.DefaultIteratorOptions
	o.Prefix, o.PrefetchValues = prefixSnap, false
	it := txn.NewIterator(o)
	defer it.Close()
	it.Seek(snapKey(id + 1))
	if !it.Valid() {
		return 0, false, nil
	}
	k := it.Item().Key()
	if len(k) != len(prefixSnap)+8 {
		return 0, false, fmt.Errorf("%w: snapshot key %x", ErrDecode, k)
	}
	return SnapshotID(beUint64(k[len(prefixSnap):])), true, nil
}

// latestIn returns the latest existing snapshot, read in txn. It reads
// one record: the default options would prefetch the values of the 100
// latest snapshots, at two calls per snapshot taken (0.7 ms of CPU per
// snapshot with 200 of them, measured).
func latestIn(txn *badger.Txn) (s Snapshot, ok bool, err error) {
	o := badger.DefaultIteratorOptions
	o.Reverse, o.Prefix, o.PrefetchValues = true, prefixSnap, false
	it := txn.NewIterator(o)
	defer it.Close()
	it.Seek(append(append([]byte{}, prefixSnap...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
	if !it.Valid() {
		return s, false, nil
	}
	err = it.Item().Value(func(v []byte) error { return s.UnmarshalBinary(v) })
	return s, err == nil, err
}

// EachHolder calls fn(i, rev) for every snapshot list[i] that holds
// revision rev of file f, in list order, reading only f's rows. list
// must be in creation (id) order, normally every snapshot; rows of
// snapshots not in it are skipped (see above). ok is false, and fn never
// called, when the rows are not complete (HoldsComplete) or list has not
// as many snapshots as their state.
func (db *DB) EachHolder(ctx context.Context, f FileID, list []Snapshot, fn func(i int, rev Rev)) (ok bool, err error) {
	err = db.view(func(txn *badger.Txn) error {
		var st holdStamp
		if st, ok, err = db.rowsValid(txn); err != nil || !ok {
			return err
		}
		if uint64(len(list)) != st.count {
			ok = false // list and rows of different states (see above)
			return nil
		}
		w := holderWalk{list: list, fn: fn, start: -1}
		o := badger.DefaultIteratorOptions
		o.Prefix, o.PrefetchValues = holdPrefix(f), false
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctxErr(ctx); err != nil {
				return err
			}
			if err := it.Item().Value(func(v []byte) error { return w.row(it.Item().Key(), v) }); err != nil {
				return err
			}
		}
		w.emit(len(list))
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("index: snapshots holding file %d: %w", f, err)
	}
	return ok, nil
}

// holderWalk turns a file's rows into (snapshot, revision) pairs.
type holderWalk struct {
	list  []Snapshot
	fn    func(int, Rev)
	start int   // list index of the pending row; -1: none
	revs  []Rev // its revisions
	from  int   // where the next search starts
}

func (w *holderWalk) row(k, v []byte) error {
	id, ok := holdKeyID(k)
	if !ok {
		return fmt.Errorf("%w: hold key %x", ErrDecode, k)
	}
	rest := w.list[w.from:]
	j := w.from + sort.Search(len(rest), func(i int) bool { return rest[i].ID >= id })
	if j == len(w.list) || w.list[j].ID != id {
		return nil // a snapshot gone, or not listed
	}
	w.emit(j)
	revs, err := readSorted(w.revs[:0], v, 1<<32-1)
	if err != nil {
		return fmt.Errorf("key %x: %w", k, err)
	}
	w.revs, w.start, w.from = revs, j, j+1
	return nil
}

// emit reports the pending row for list[start:end].
func (w *holderWalk) emit(end int) {
	if w.start < 0 {
		return
	}
	for i := w.start; i < end; i++ {
		for _, r := range w.revs {
			w.fn(i, r)
		}
	}
}
