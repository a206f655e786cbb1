package mount

import (
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// What "deltafs log", "cat" and "restore" exchange with a mount (and print
// with --json). The JSON names are stable.

// RevRef names a revision of a store file.
type RevRef struct {
	File uint64 `json:"file"`
	Rev  uint32 `json:"rev"`
}

func refOf(id index.RevID) *RevRef {
	if id.IsNull() {
		return nil
	}
	return &RevRef{File: uint64(id.File), Rev: uint32(id.Rev)}
}

// RevInfo is one revision of a file.
type RevInfo struct {
	Rev    uint32    `json:"rev"`
	Time   time.Time `json:"time"`
	Size   uint64    `json:"size"`   // fulltext length
	Base   string    `json:"base"`   // base kind: full, p1, p2, snapshot, hint, intermediate, dedup, reused, p1+p2
	Chain  uint32    `json:"chain"`  // deltas applied to rebuild it
	Stored uint32    `json:"stored"` // bytes of its own record
	// BaseRev is the delta base (or dedup target); absent for a fulltext.
	BaseRev *RevRef `json:"base_rev,omitempty"`
	// Base2Rev is the second delta base of a p1+p2 revision (its delta
	// is against base_rev's text then base2_rev's).
	Base2Rev *RevRef  `json:"base2_rev,omitempty"`
	P1       *RevRef  `json:"p1,omitempty"`
	P2       *RevRef  `json:"p2,omitempty"`
	Flags    []string `json:"flags,omitempty"`
	// Snapshots are the snapshots holding this revision (log only).
	Snapshots []string `json:"snapshots,omitempty"`
}

// flagNames are the index flags as RevInfo names them.
var flagNames = []struct {
	f    index.Flags
	name string
}{{index.FlagZstd, "zstd"}, {index.FlagDelta, "delta"}, {index.FlagChunked, "chunked"}, {index.FlagHashDeferred, "hash_deferred"}, {index.FlagLost, "lost"}}

// kindName names how r is stored, as log shows it: "lost" for a revision
// a salvage kept without its data.
func kindName(r objstore.Revision) string {
	if r.Flags&index.FlagLost != 0 {
		return "lost"
	}
	return r.Kind.String()
}

func infoOfRev(r objstore.Revision) RevInfo {
	i := RevInfo{
		Rev: uint32(r.Rev), Time: r.Time, Size: r.Size, Base: kindName(r), Chain: r.ChainLen,
		Stored: r.Stored, BaseRev: refOf(r.Base), P1: refOf(r.P1), P2: refOf(r.P2),
		Base2Rev: refOf(r.Base2),
	}
	for _, fn := range flagNames {
		if r.Flags&fn.f != 0 {
			i.Flags = append(i.Flags, fn.name)
		}
	}
	return i
}

// Target names the file of a log, cat or restore: the live file at Path
// or, when there is none, the deleted file whose last path it is (the
// newest, if several were); or, File set, that store file, live or
// deleted (Path is then where a restore of a deleted one writes it, its
// last path if empty). Path is relative to the tree root.
type Target struct {
	Path string
	File uint64
}

// FileInfo says which store file a history call found.
type FileInfo struct {
	// Path is relative to the tree root: the live file's, or, for a
	// deleted file, where its last revision was recorded.
	Path ByteString `json:"path"`
	File uint64     `json:"file"` // the store's FileID
	// Deleted is set when no live file has this history: a deleted
	// file's, still in the store (gc removes what no snapshot holds).
	// Always written: the --json of log, cat and restore promises it.
	Deleted bool `json:"deleted"`
}

// FileLog is the history of one file, oldest revision first.
type FileLog struct {
	FileInfo
	Revisions []RevInfo `json:"revisions"`
}

// FileRev is one revision of a file: what cat read, what restore wrote.
type FileRev struct {
	FileInfo
	Revision RevInfo `json:"revision"`
}

// DeletedFile is a file whose history is still in the store but that no
// live file has any more ("deltafs log --deleted").
type DeletedFile struct {
	FileInfo
	Revisions int       `json:"revisions"` // left in the store
	Time      time.Time `json:"time"`      // of its newest revision
	Size      uint64    `json:"size"`      // of its newest revision
}

// RevSpec picks a revision: by number, by the snapshot holding it, or
// (neither set) the newest.
type RevSpec struct {
	Rev      *uint32    `json:"rev,omitempty"`
	Snapshot ByteString `json:"snapshot,omitempty"`
}
