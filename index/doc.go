// Package index owns the metadata of a deltafs store: one badger database
// holding an Entry per stored revision, a small record per file, the
// store-wide counters (format version, next file id, committed segment tail),
// and the snapshots: their records, trees, reference sets and, per file,
// the rows saying which snapshots hold which of its revisions (holds.go).
//
// Invariants:
//   - every key follows the single schema table in keys.go;
//   - an Entry is only ever written in the same transaction that advances the
//     file's revision count and the committed segment tail, so the index never
//     names data beyond the tail the store has fsynced;
//   - all read-write transactions go through DB.update, the one place that
//     retries on badger.ErrConflict;
//   - every write begins with beginWrite (space.go), which keeps badger's
//     memory-mapped logs allocated and refuses the write (ENOSPC) when the
//     file system is too full for it: a store into a hole of a mapped file
//     on a full disk is a SIGBUS, which kills the process;
//   - a writable index is closed settled (settle.go): the next open finds
//     nothing for badger to compact, so a mount starts quiet;
//   - bad bytes in badger's files never panic nor read as "not found":
//     Open verifies every table whole first, and a panic of badger's on
//     bad bytes becomes an error matching ErrCorrupt (corrupt.go).
//
// The index never reads or writes segment data and never decides how a
// revision is stored: that is objstore's job. It imports nothing of ours.
package index
