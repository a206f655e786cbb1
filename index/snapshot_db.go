package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// PutTrees stores encoded trees by hash. Trees are content-addressed, so
// writing one that exists changes nothing, and a tree whose snapshot never
// committed is only an orphan row. They go in write batches of their own
// (a first snapshot of a large tree exceeds one transaction's size), before
// the snapshot record that names them.
func (db *DB) PutTrees(trees map[TreeHash][]byte) error {
	if len(trees) == 0 {
		return nil
	}
	begin := db.beginWrite
	if holdsBig(trees) {
		begin = db.beginBigWrite
	}
	if err := begin(); err != nil {
		return err
	}
	wb := db.bdb.NewWriteBatch()
	defer wb.Cancel()
	for h, b := range trees {
		if err := wb.Set(treeKey(h), b); err != nil {
			return fmt.Errorf("index: put tree %s: %w", h, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("index: put trees: %w", err)
	}
	return db.syncNewLogs() // powercut.go
}

// MaxTxnTrees is how many bytes of trees CreateSnapshot takes in its own
// transaction: well below badger's transaction limit with the index's
// small memtables (15% of 8 MiB). Snapshots that change little stay one
// fsync; a first snapshot of a large tree writes its trees in batches.
const MaxTxnTrees = 512 << 10

// Tree returns the tree called h.
func (db *DB) Tree(h TreeHash) (*Tree, error) {
	var t Tree
	err := db.view(func(txn *badger.Txn) error {
		b, err := getValue(txn, treeKey(h))
		if err != nil {
			return err
		}
		return t.UnmarshalBinary(b)
	})
	if err != nil {
		return nil, fmt.Errorf("index: tree %s: %w", h, err)
	}
	return &t, nil
}

// CreateSnapshot records s under a new SnapshotID (returned, and set in
// s.ID) with its reference set, its hold rows (holds.go) and the trees
// given, in one transaction (one fsync). Trees too large for one
// transaction go through PutTrees first (see MaxTxnTrees), rows too many
// for one in batches around it (holdTxnRows). A taken name gives an
// error matching ErrExists. Callers serialise snapshot changes (objstore
// does); a change that slips in between is retried.
func (db *DB) CreateSnapshot(s *Snapshot, refs *Refs, trees map[TreeHash][]byte) (SnapshotID, error) {
	if err := CheckSnapshotName(s.Name); err != nil {
		return 0, err
	}
	rb, err := encodeRefs(refs)
	if err != nil {
		return 0, err
	}
	for range maxRetries {
		if err = db.createSnapshot(s, refs, rb, trees); !errors.Is(err, errStale) {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("index: create snapshot: %w", err)
	}
	return s.ID, nil
}

// errStale is a snapshot change planned against a list of snapshots
// that changed before it committed.
var errStale = errors.New("snapshots changed meanwhile")

func (db *DB) createSnapshot(s *Snapshot, refs *Refs, rb []byte, trees map[TreeHash][]byte) error {
	if holdsBig(trees) || len(rb) >= bigValue {
		if err := db.space.allocateVlog(db.dir); err != nil {
			return err
		}
	}
	var (
		id       SnapshotID
		latest   Snapshot
		first    bool
		ops      *holdOps
		complete bool
		stamp    holdStamp // the rows' stamp before (when complete)
	)
	err := db.view(func(txn *badger.Txn) error {
		var err error
		if id, err = nextSnapID(txn); err != nil {
			return err
		}
		var ok bool
		if latest, ok, err = latestIn(txn); err != nil {
			return err
		}
		first = !ok
		if stamp, complete, err = db.rowsValid(txn); err != nil {
			return err
		}
		if first { // no snapshot: the rows left are of snapshots gone
			stamp, complete = holdStamp{next: id}, true
		}
		ops, complete, err = planCreate(txn, id, refs, latest, ok, complete)
		return err
	})
	if err != nil {
		return err
	}
	var after *holdStamp
	err = db.commitHolds(ops, func(txn *badger.Txn) error {
		after = nil
		if _, err := getValue(txn, snapNameKey(s.Name)); !errors.Is(err, ErrNotFound) {
			return errors.Join(fmt.Errorf("snapshot %q: %w", s.Name, ErrExists), err)
		}
		now, err := nextSnapID(txn)
		if err != nil {
			return err
		}
		l, ok, err := latestIn(txn)
		if err != nil {
			return err
		}
		if now != id || ok == first || l.ID != latest.ID {
			return errStale
		}
		s.ID = id
		for h, b := range trees {
			if err := txn.Set(treeKey(h), b); err != nil {
				return err
			}
		}
		if after, err = restamp(txn, stamp, complete, first, holdStamp{count: stamp.count + 1, next: id + 1}); err != nil {
			return err
		}
		rec, _ := s.MarshalBinary()
		return setAll(txn,
			keyNextSnap, binary.BigEndian.AppendUint64(nil, uint64(id)+1),
			snapKey(id), rec,
			snapNameKey(s.Name), binary.BigEndian.AppendUint64(nil, uint64(id)),
			snapRefsKey(id), rb)
	})
	if err == nil {
		db.setTrusted(after)
	}
	return err
}

// restamp keeps the hold rows' stamp in a snapshot change's transaction:
// the rows of a complete change (planned against stamp before, which
// must still be there unless fresh: no snapshot before or after) are
// stamped with after; an incomplete change drops the stamp. It returns
// the stamp now trusted.
func restamp(txn *badger.Txn, before holdStamp, complete, fresh bool, after holdStamp) (*holdStamp, error) {
	if !complete {
		return nil, txn.Delete(keyHolds)
	}
	if !fresh {
		now, ok, err := readStamp(txn)
		if err != nil {
			return nil, err
		}
		if !ok || now != before {
			return nil, errStale
		}
	}
	return &after, txn.Set(keyHolds, after.bytes())
}

func nextSnapID(txn *badger.Txn) (SnapshotID, error) {
	b, err := getValue(txn, keyNextSnap)
	switch {
	case errors.Is(err, ErrNotFound):
		return 1, nil
	case err != nil:
		return 0, err
	case len(b) != 8:
		return 0, fmt.Errorf("%w: next snapshot id", ErrDecode)
	}
	return SnapshotID(binary.BigEndian.Uint64(b)), nil
}

// setAll sets key, value pairs.
func setAll(txn *badger.Txn, kv ...[]byte) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if err := txn.Set(kv[i], kv[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// Snapshot returns the snapshot called name.
func (db *DB) Snapshot(name string) (Snapshot, error) {
	var s Snapshot
	err := db.view(func(txn *badger.Txn) (err error) {
		s, err = snapshotByName(txn, name)
		return err
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("index: snapshot %q: %w", name, err)
	}
	return s, nil
}

func snapshotByName(txn *badger.Txn, name string) (Snapshot, error) {
	var s Snapshot
	b, err := getValue(txn, snapNameKey(name))
	if err != nil {
		return s, err
	}
	if len(b) != 8 {
		return s, fmt.Errorf("%w: snapshot name row", ErrDecode)
	}
	rec, err := getValue(txn, snapKey(SnapshotID(binary.BigEndian.Uint64(b))))
	if err != nil {
		return s, err
	}
	return s, s.UnmarshalBinary(rec)
}

// Snapshots calls fn with every snapshot, in creation order.
func (db *DB) Snapshots(ctx context.Context, fn func(Snapshot) error) error {
	err := db.scan(ctx, prefixSnap, true, func(k, v []byte) error {
		var s Snapshot
		if err := s.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("key %x: %w", k, err)
		}
		return fn(s)
	})
	if err != nil {
		return fmt.Errorf("index: snapshots: %w", err)
	}
	return nil
}

// LatestSnapshot returns the most recently created snapshot still there;
// ok is false if there is none.
func (db *DB) LatestSnapshot() (s Snapshot, ok bool, err error) {
	err = db.view(func(txn *badger.Txn) error {
		s, ok, err = latestIn(txn)
		return err
	})
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("index: latest snapshot: %w", err)
	}
	return s, ok, nil
}

// SnapshotRefs returns the reference set of snapshot id.
func (db *DB) SnapshotRefs(id SnapshotID) (*Refs, error) {
	var r *Refs
	err := db.view(func(txn *badger.Txn) error {
		b, err := getValue(txn, snapRefsKey(id))
		if err != nil {
			return err
		}
		r, err = decodeRefs(b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("index: references of snapshot %d: %w", id, err)
	}
	return r, nil
}

// DeleteSnapshot removes the snapshot called name (its record, name,
// reference set and hold rows, which move to its successor where they
// were its answer: see holds.go). Its trees stay: other snapshots may
// share them, and freeing what none references is the garbage
// collector's job.
func (db *DB) DeleteSnapshot(name string) error {
	var err error
	for range maxRetries {
		if err = db.deleteSnapshot(name); !errors.Is(err, errStale) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("index: delete snapshot %q: %w", name, err)
	}
	return nil
}

func (db *DB) deleteSnapshot(name string) error {
	var (
		s        Snapshot
		ops      *holdOps
		stamp    holdStamp
		complete bool
		after    *holdStamp
	)
	err := db.view(func(txn *badger.Txn) (err error) {
		if s, err = snapshotByName(txn, name); err != nil {
			return err
		}
		if stamp, complete, err = db.rowsValid(txn); err != nil {
			return err
		}
		ops, err = planDelete(txn, s, complete)
		return err
	})
	if err != nil {
		return err
	}
	err = db.commitHolds(ops, func(txn *badger.Txn) error {
		now, err := snapshotByName(txn, name)
		if err != nil {
			return err
		}
		if now.ID != s.ID {
			return errStale
		}
		// With no snapshot left the rows are complete again (those left
		// are of snapshots gone, which readers skip).
		first, _, err := nextSnapshot(txn, 0)
		if err != nil {
			return err
		}
		_, more, err := nextSnapshot(txn, s.ID)
		if err != nil {
			return err
		}
		next, err := nextSnapID(txn)
		if err != nil {
			return err
		}
		fresh := first == s.ID && !more
		to := holdStamp{next: next}
		if !fresh {
			to.count = stamp.count - 1
		}
		after, err = restamp(txn, stamp, complete || fresh, fresh, to)
		if err != nil {
			return err
		}
		for _, k := range [][]byte{snapNameKey(name), snapKey(s.ID), snapRefsKey(s.ID)} {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		db.setTrusted(after)
	}
	return err
}

// RenameSnapshot renames snapshot from to to; its id, trees and
// references stay. A taken name gives an error matching ErrExists.
func (db *DB) RenameSnapshot(from, to string) error {
	if err := CheckSnapshotName(to); err != nil {
		return err
	}
	err := db.update(func(txn *badger.Txn) error {
		s, err := snapshotByName(txn, from)
		if err != nil {
			return err
		}
		if from == to {
			return nil
		}
		if _, err := getValue(txn, snapNameKey(to)); !errors.Is(err, ErrNotFound) {
			return errors.Join(fmt.Errorf("snapshot %q: %w", to, ErrExists), err)
		}
		s.Name = to
		rec, _ := s.MarshalBinary()
		if err := txn.Delete(snapNameKey(from)); err != nil {
			return err
		}
		return setAll(txn, snapKey(s.ID), rec, snapNameKey(to), binary.BigEndian.AppendUint64(nil, uint64(s.ID)))
	})
	switch {
	case errors.Is(err, ErrExists):
		return err // `snapshot "to": already exists` says it all
	case err != nil:
		return fmt.Errorf("index: rename snapshot %q: %w", from, err)
	}
	return nil
}

// EachSnapshotRefs calls fn with the reference set of every snapshot, in
// creation order, in one scan of the s/r/ rows; fn must not keep r.
func (db *DB) EachSnapshotRefs(ctx context.Context, fn func(id SnapshotID, r *Refs) error) error {
	err := db.scan(ctx, prefixSnapRefs, true, func(k, v []byte) error {
		if len(k) != len(prefixSnapRefs)+8 {
			return fmt.Errorf("%w: reference set key %x", ErrDecode, k)
		}
		r, err := decodeRefs(v)
		if err != nil {
			return fmt.Errorf("key %x: %w", k, err)
		}
		return fn(SnapshotID(beUint64(k[len(prefixSnapRefs):])), r)
	})
	if err != nil {
		return fmt.Errorf("index: reference sets: %w", err)
	}
	return nil
}

// EachSnapshotRawRefs is EachSnapshotRefs without decoding the sets: fn
// gets each set's checked bytes, to probe with RawRefs.FileRevs; they are
// valid only during the call (badger's own buffer: a log of one file over
// thousands of snapshots copies none of them).
func (db *DB) EachSnapshotRawRefs(ctx context.Context, fn func(id SnapshotID, r RawRefs) error) error {
	err := db.view(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.Prefix, o.PrefetchValues = prefixSnapRefs, false
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctxErr(ctx); err != nil {
				return err
			}
			k := it.Item().Key()
			if len(k) != len(prefixSnapRefs)+8 {
				return fmt.Errorf("%w: reference set key %x", ErrDecode, k)
			}
			id := SnapshotID(beUint64(k[len(prefixSnapRefs):]))
			err := it.Item().Value(func(v []byte) error {
				r, err := rawRefs(v)
				if err != nil {
					return fmt.Errorf("key %x: %w", k, err)
				}
				return fn(id, r)
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index: reference sets: %w", err)
	}
	return nil
}
