// Package objstore owns the revlog: every revision of every file, stored in
// append-only segment files as a fulltext or a delta against the best of its
// candidate bases, and indexed by package index.
//
// Layout of a store directory:
//
//	FORMAT                  magic name and format version (text)
//	LOCK                    flock(2)ed by the opener; holds its pid and holder
//	index/                  badger database (package index)
//	segments/NNNNNNNN.seg   append-only records, rolled at Config.SegmentSize
//	repack/                 a repack in progress: a shadow store of the same
//	                        layout, switched to atomically (repack_shadow.go)
//
// Invariants:
//   - a record is written once and never rewritten; each carries an xxhash64
//     checksum over its header and payload;
//   - segment data is fsynced before the index entries that reference it
//     commit, so no entry ever points at missing or partial data; Open cuts
//     off whatever lies beyond the committed tail;
//   - a delta chain never exceeds the caps in Config (length, bytes read as a
//     multiple of the text), and no delta is stored that is not smaller than
//     the compressed fulltext (see SelectBase for the one estimate involved;
//     a delta-only put, which has no text to compress, is measured against
//     the file's last compression ratio, or the raw text);
//   - a rebuilt revision is checked against its content hash: reads return the
//     right bytes or an error matching ErrCorrupt that names the revision;
//   - except a revision put from a delta alone (PutRequest.DeltaOnly; its
//     entry has index.FlagHashDeferred and Hash 0): the store never sees its text, so it
//     has no content hash. Its delta was validated against its base's and
//     its own lengths before it was stored, every record of its chain
//     carries an xxhash64 checksum that each read checks, and its base
//     chain's fulltext is hash-checked as usual; that is what a read of it
//     trusts. Dedup never matches it (it is not in the hash index). Verify
//     rebuilds it and says how many such revisions it found; repack may
//     fill the hash in from the text it rebuilds (Store.WithContentHash).
//
// Concurrency: any number of readers and writers may call the Store at once.
// Writers are serialised while they choose bases and append records; their
// fsyncs and index commits are batched (group commit: the first waiter
// becomes the leader and commits everything appended so far) so many small
// puts share one fsync. A failed commit leaves the store refusing writes.
// PutNoWait returns before the commit, with the function that waits for
// it, so that a writer overlaps its next work with the disk.
//
// Big fulltexts (bigFull, 32 MiB, and more) are stored chunked
// (chunked.go, format 2): chunks of 4 MiB encoded independently with S2
// on every core, raw where they do not compress, and decoded straight
// into the text on read; smaller fulltexts are one zstd frame. A big
// first revision with nothing to delta against (a new file's: M1) can be
// put from its source (PutFrom, chunked_stream.go): read (through a
// mapping of the file, stream_map.go), hashed, encoded and written
// (with direct I/O, direct_write.go) chunk by chunk, overlapping, with
// the chunks no encoder got to first stored raw (index.FlagFastZstd, so
// that a repack compresses them); it holds a few chunks, not the text
// and its encoding, and its checksum sums the chunk table last (format
// 3), so that it is summed as the chunks are written, never read back. Big
// delta payloads (bigDelta, 8 MiB, and more: a writer's many scattered
// writes) are zstd too, compressed in 4 MiB chunks on every core as
// concatenated frames, which read back as one zstd stream.
//
// Costs: a put deltas against its parents' fulltexts (a merge's also
// against both at once, graph.go, when the two are at most
// twoBaseMaxText together); the newest fulltext
// of recently written files is kept (Config.LatestBytes), so revision n+1
// deltas against n without a rebuild, and delta.Encode's head/tail trimming
// and local resynchronisation make the cost follow the size of the change
// (an eager delta.Index over the whole base would cost a pass over the file
// per revision instead, so none is kept). A read holds the chain's stored
// records (at most MaxReadRatio x the text), two text buffers and the result
// (a revision whose records form a graph, through a merge stored against
// both parents, holds at most MaxHeldRatio x the text: graph.go);
// text buffers are recycled between reads (sync.Pool), and rebuilt texts go
// to a byte-bounded cache (Config.CacheBytes). What a put rebuilds for
// itself (snapshot candidates, dedup checks) does not: it goes through a
// one-text cache of its own, so an ingest leaves the read cache to readers.
//
// Repack rewrites where and how revisions are stored, offline, never their
// RevIDs or contents: it writes a shadow store, and only once that holds
// every revision does a marker make the switch roll forward, which Open
// completes after a crash. Its cost follows what changes: a segment
// holding only revisions it would keep as they are is kept whole (linked,
// not copied; repack_keep.go), a store where that is every segment is left
// untouched (repack_plan.go), and a repack ends its tail at a new segment
// so that later writes never share one with what it wrote.
//
// GC (gc.go, gc_plan.go) removes revisions: it plans from the snapshots'
// reference sets, the live files the caller names and a GCPolicy, then
// runs a repack that leaves the removed revisions out (a kept revision
// whose base is removed is stored again against a kept one), and the
// switch deletes their entries. RevIDs are never reused: a file's record
// keeps its revision count, so a file may have holes in its revision
// numbers, and a kept revision's parent may be gone. SnapshotUsages
// (gc_usage.go) says what each snapshot alone holds.
//
// Locking: Open takes an exclusive flock on dir/LOCK for writers and
// read-only opens alike (repack, verify and the mount never share a store).
//
// objstore never interprets file contents and knows nothing of paths,
// directories or the mount; it imports index and delta only.
package objstore
