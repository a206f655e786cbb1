package index

// Badger key schema. Every key the index writes is built in this file.
//
//	key                                   value                     meaning
//	m/format                              uvarint                   index format version
//	m/nextfile                            be64                      next FileID to allocate
//	m/tail                                be32 seg, be64 end        committed segment tail: no entry
//	                                                                references data at or past it
//	f/<file be64>                         FileMeta (see meta.go)    per-file record: name, rev count,
//	                                                                latest snapshot revision
//	r/<file be64><rev be32>               Entry (see entry.go)      one stored revision; a prefix scan
//	                                                                of r/<file> yields revs in order
//	h/<hash be64><file be64><rev be32>    empty                     content-hash lookup for dedup; only
//	                                                                revisions with their own data
//	m/nextsnap                            be64                      next SnapshotID to allocate
//	t/<hash 32 bytes>                     Tree (see tree.go)        directory tree; the key is the
//	                                                                SHA-256 of the value, so equal
//	                                                                directories share one row
//	s/i/<id be64>                         Snapshot (snapshot.go)    one snapshot; a prefix scan lists
//	                                                                them in creation order
//	s/n/<name>                            be64 id                   snapshot name -> id
//	s/r/<id be64>                         xxhash64 + roaring64      revisions the snapshot references
//	                                                                (see snapshot_refs.go)
//	b/<file be64><id be64>                sorted revs (holds.go)    revisions of the file snapshot id
//	                                                                holds, where they changed
//	c/<id be64>                           sorted file ids           files with a b/ row at id
//	m/holds                               be64 count, be64 next     snapshot state the b/ and c/ rows
//	                                                                are complete for (holds_stamp.go)
//
// Integers are big-endian so that byte order is numeric order.

import "encoding/binary"

var (
	keyFormat   = []byte("m/format")
	keyNextFile = []byte("m/nextfile")
	keyTail     = []byte("m/tail")
	prefixFile  = []byte("f/")
	prefixRev   = []byte("r/")
	prefixHash  = []byte("h/")

	keyNextSnap    = []byte("m/nextsnap")
	prefixTree     = []byte("t/")
	prefixSnap     = []byte("s/i/")
	prefixSnapName = []byte("s/n/")
	prefixSnapRefs = []byte("s/r/")

	prefixHold    = []byte("b/")
	prefixHoldSet = []byte("c/")
	keyHolds      = []byte("m/holds")
)

func holdPrefix(f FileID) []byte {
	return binary.BigEndian.AppendUint64(append([]byte{}, prefixHold...), uint64(f))
}

func holdKey(f FileID, id SnapshotID) []byte {
	return binary.BigEndian.AppendUint64(holdPrefix(f), uint64(id))
}

// holdKeyID extracts the snapshot id of a b/ key; ok is false if malformed.
func holdKeyID(k []byte) (SnapshotID, bool) {
	if len(k) != len(prefixHold)+16 {
		return 0, false
	}
	return SnapshotID(beUint64(k[len(prefixHold)+8:])), true
}

func holdSetKey(id SnapshotID) []byte {
	return binary.BigEndian.AppendUint64(append([]byte{}, prefixHoldSet...), uint64(id))
}

func treeKey(h TreeHash) []byte { return append(append([]byte{}, prefixTree...), h[:]...) }

func snapKey(id SnapshotID) []byte {
	return binary.BigEndian.AppendUint64(append([]byte{}, prefixSnap...), uint64(id))
}

func snapNameKey(name string) []byte { return append(append([]byte{}, prefixSnapName...), name...) }

func snapRefsKey(id SnapshotID) []byte {
	return binary.BigEndian.AppendUint64(append([]byte{}, prefixSnapRefs...), uint64(id))
}

func fileKey(f FileID) []byte {
	return binary.BigEndian.AppendUint64(append([]byte{}, prefixFile...), uint64(f))
}

func revPrefix(f FileID) []byte {
	return binary.BigEndian.AppendUint64(append([]byte{}, prefixRev...), uint64(f))
}

func revKey(id RevID) []byte {
	return binary.BigEndian.AppendUint32(revPrefix(id.File), uint32(id.Rev))
}

func hashPrefix(h uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte{}, prefixHash...), h)
}

func hashKey(h uint64, id RevID) []byte {
	k := binary.BigEndian.AppendUint64(hashPrefix(h), uint64(id.File))
	return binary.BigEndian.AppendUint32(k, uint32(id.Rev))
}

// hashKeyID extracts the RevID from a hash key; ok is false if malformed.
func hashKeyID(k []byte) (RevID, bool) {
	const n = 2 + 8 + 8 + 4
	if len(k) != n {
		return NullRev, false
	}
	return RevID{
		File: FileID(binary.BigEndian.Uint64(k[10:18])),
		Rev:  Rev(binary.BigEndian.Uint32(k[18:22])),
	}, true
}
