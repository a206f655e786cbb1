package index

import (
	"context"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// scan calls fn for every key (and value) under prefix, in key order.
func (db *DB) scan(ctx context.Context, prefix []byte, values bool, fn func(k, v []byte) error) error {
	return db.view(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.Prefix = prefix
		o.PrefetchValues = values
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctxErr(ctx); err != nil {
				return err
			}
			var v []byte
			if values {
				var err error
				if v, err = it.Item().ValueCopy(nil); err != nil {
					return err
				}
			}
			if err := fn(it.Item().Key(), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// scanInPlace is scan with values read where they lie, valid only during
// the call of fn, and no prefetching: for small values decoded at once
// (an entry is tens of bytes), prefetching costs goroutines and copies
// and saves nothing.
func (db *DB) scanInPlace(ctx context.Context, prefix []byte, fn func(k, v []byte) error) error {
	return db.view(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.Prefix, o.PrefetchValues = prefix, false
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctxErr(ctx); err != nil {
				return err
			}
			item := it.Item()
			if err := item.Value(func(v []byte) error { return fn(item.Key(), v) }); err != nil {
				return err
			}
		}
		return nil
	})
}

// Revisions calls fn with every entry of file f, in revision order.
func (db *DB) Revisions(ctx context.Context, f FileID, fn func(Entry) error) error {
	err := db.scanInPlace(ctx, revPrefix(f), func(k, v []byte) error {
		var e Entry
		if err := e.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("key %x: %w", k, err)
		}
		return fn(e)
	})
	if err != nil {
		return fmt.Errorf("index: revisions of file %d: %w", f, err)
	}
	return nil
}

// All calls fn with every entry, ordered by file then revision.
func (db *DB) All(ctx context.Context, fn func(Entry) error) error {
	err := db.scan(ctx, prefixRev, true, func(k, v []byte) error {
		var e Entry
		if err := e.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("key %x: %w", k, err)
		}
		return fn(e)
	})
	if err != nil {
		return fmt.Errorf("index: all revisions: %w", err)
	}
	return nil
}

// Files calls fn for every file record, in FileID order.
func (db *DB) Files(ctx context.Context, fn func(FileID, FileMeta) error) error {
	err := db.scan(ctx, prefixFile, true, func(k, v []byte) error {
		var m FileMeta
		if err := m.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("key %x: %w", k, err)
		}
		if len(k) != len(prefixFile)+8 {
			return fmt.Errorf("%w: file key %x", ErrDecode, k)
		}
		return fn(FileID(beUint64(k[len(prefixFile):])), m)
	})
	if err != nil {
		return fmt.Errorf("index: files: %w", err)
	}
	return nil
}

// ByHash returns the revisions with their own data whose content hash is h.
func (db *DB) ByHash(h uint64) ([]RevID, error) {
	var ids []RevID
	err := db.scan(context.Background(), hashPrefix(h), false, func(k, _ []byte) error {
		id, ok := hashKeyID(k)
		if !ok {
			return fmt.Errorf("%w: hash key %x", ErrDecode, k)
		}
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index: hash %016x: %w", h, err)
	}
	return ids, nil
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b[:8] {
		v = v<<8 | uint64(c)
	}
	return v
}

// Latest returns the entry of file f's newest stored revision; ok is
// false if it has none. It is not always revision Revs-1 of the file's
// record: gc removes revisions, the newest ones of a deleted file too,
// and never renumbers, so a file may have gaps or no revisions at all.
func (db *DB) Latest(f FileID) (e Entry, ok bool, err error) {
	err = db.view(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.Prefix, o.PrefetchValues, o.Reverse = revPrefix(f), false, true
		it := txn.NewIterator(o)
		defer it.Close()
		it.Seek(revKey(RevID{File: f, Rev: Rev(^uint32(0))}))
		if !it.Valid() {
			return nil
		}
		ok = true
		return it.Item().Value(e.UnmarshalBinary)
	})
	if err != nil {
		return Entry{}, false, fmt.Errorf("index: newest revision of file %d: %w", f, err)
	}
	return e, ok, nil
}
