package index

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	badger "github.com/dgraph-io/badger/v4"
)

// Batch is what one group commit writes atomically.
type Batch struct {
	Entries []Entry
	Files   map[FileID]FileMeta // updated file records
	Tail    Tail                // new committed segment tail
	// Unhash lists entries whose hash rows go: a repack's switch
	// overwriting them with entries that have none (index.FlagLost).
	Unhash []Entry
}

// Commit writes b in one transaction: entries, their hash keys (except for
// dedup entries, which have no data of their own), file records and the tail.
// With SyncWrites, the batch is durable when Commit returns.
//
// A batch too big for one badger transaction (several thousand entries;
// the mount's batches are far smaller, a bulk loader's may not be) is
// written in several, in an order a crash between them leaves safe: the
// tail first (the data up to it was made durable before Commit), then
// the entries, then the file records, then the hash keys. A crash part
// way leaves entries of puts that never returned, unknown to their file
// records and to the hash keys (so no dedup can point at one): revision
// numbers the next put of the file takes again, over them; or entries
// the file records count that no dedup finds yet.
func (db *DB) Commit(b *Batch) error {
	if err := db.beginWrite(); err != nil { // nothing written: see ErrRefused
		return fmt.Errorf("index: commit %d entries: %w: %w", len(b.Entries), ErrRefused, err)
	}
	err := db.update(func(txn *badger.Txn) error {
		for i := range b.Entries {
			if err := setEntry(txn, &b.Entries[i]); err != nil {
				return err
			}
		}
		for f, m := range b.Files {
			v, _ := m.MarshalBinary()
			if err := txn.Set(fileKey(f), v); err != nil {
				return err
			}
		}
		for i := range b.Unhash {
			if err := txn.Delete(hashKey(b.Unhash[i].Hash, b.Unhash[i].ID())); err != nil {
				return err
			}
		}
		return txn.Set(keyTail, encodeTail(b.Tail))
	})
	if errors.Is(err, badger.ErrTxnTooBig) {
		err = db.commitSplit(b)
	}
	if err != nil {
		return fmt.Errorf("index: commit %d entries: %w", len(b.Entries), err)
	}
	return nil
}

// commitSplit writes b's rows in as many transactions as they need, in
// the order Commit's doc gives.
func (db *DB) commitSplit(b *Batch) error {
	type row struct {
		k, v []byte
		del  bool
	}
	rows := []row{{k: keyTail, v: encodeTail(b.Tail)}}
	for i := range b.Entries {
		e := &b.Entries[i]
		v, _ := e.MarshalBinary()
		rows = append(rows, row{k: revKey(e.ID()), v: v})
	}
	for f, m := range b.Files {
		v, _ := m.MarshalBinary()
		rows = append(rows, row{k: fileKey(f), v: v})
	}
	for i := range b.Entries {
		if e := &b.Entries[i]; e.HashIndexed() {
			rows = append(rows, row{k: hashKey(e.Hash, e.ID())})
		}
	}
	for i := range b.Unhash {
		rows = append(rows, row{k: hashKey(b.Unhash[i].Hash, b.Unhash[i].ID()), del: true})
	}
	for len(rows) > 0 {
		var n int
		err := db.update(func(txn *badger.Txn) error {
			for n = 0; n < len(rows); n++ {
				var err error
				if rows[n].del {
					err = txn.Delete(rows[n].k)
				} else {
					err = txn.Set(rows[n].k, rows[n].v)
				}
				if errors.Is(err, badger.ErrTxnTooBig) && n > 0 {
					return nil // commit these; the rest go in the next
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

func setEntry(txn *badger.Txn, e *Entry) error {
	v, _ := e.MarshalBinary()
	if err := txn.Set(revKey(e.ID()), v); err != nil {
		return err
	}
	if !e.HashIndexed() {
		return nil // no data of its own, or no content hash to find it by
	}
	return txn.Set(hashKey(e.Hash, e.ID()), nil)
}

// slogAdapter routes badger's logger to a *slog.Logger; nil discards.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) log(level slog.Level, f string, args ...any) {
	if a.l != nil {
		a.l.Log(context.Background(), level, fmt.Sprintf(f, args...), "component", "badger")
	}
}

func (a slogAdapter) Errorf(f string, args ...any)   { a.log(slog.LevelError, f, args...) }
func (a slogAdapter) Warningf(f string, args ...any) { a.log(slog.LevelWarn, f, args...) }
func (a slogAdapter) Infof(f string, args ...any)    { a.log(slog.LevelInfo, f, args...) }
func (a slogAdapter) Debugf(f string, args ...any)   { a.log(slog.LevelDebug, f, args...) }
