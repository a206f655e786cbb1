package fs

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/deltafs/deltafs/index"
)

// HistoryName is the reserved directory at the root of the mount that
// shows the history of every live file (see history_dir.go).
const HistoryName = ".history"

// History is what the .history directory needs from the mount: the
// revisions of a live file, found by its identity, and their contents.
// fs defines it so that it never imports the store.
type History interface {
	// Revisions returns the revisions of the live file whose identity
	// is id, oldest first; none when it has no history yet. Every change
	// of the file reported to the Recorder before the call is in it, even
	// one the recorder has not finished.
	Revisions(ctx context.Context, id FileID) ([]Revision, error)
	// Len returns the store file holding the revisions Revisions would
	// return and one past the number of the newest of them (0 if none),
	// as cheaply as a point lookup, after the same wait: how many it
	// returns, unless gc left gaps in the numbers. The store file of a
	// live file changes when it takes another's history (a save's temp
	// file renamed over the file, or to the path it left).
	Len(ctx context.Context, id FileID) (index.FileID, int, error)
	// Revision returns revision rev of the live file whose identity is
	// id, or an error matching index.ErrNotFound.
	Revision(ctx context.Context, id FileID, rev index.Rev) (Revision, error)
	// Read returns the content of a revision.
	Read(ctx context.Context, id index.RevID) ([]byte, error)
}

// Revision is what .history shows of one revision.
type Revision struct {
	ID   index.RevID
	Size uint64
	Time int64 // unix nanoseconds of its recording
}

// historyIno is the inode number of .history, next to .snapshots's.
const historyIno = snapshotsIno + 1

// Inode numbers of the nodes under .history, by kind: the three kinds
// never share a number, and none falls on a live, snapshot or
// automatic number (see histIno).
const (
	histKindDir  = 1 // a live directory's mirror; keyed by its live inode
	histKindFile = 2 // a live file's directory of revisions; keyed by its live inode
	histKindRev  = 3 // one revision; keyed by its store RevID
)

// histIno mixes a kind and a key into [2^62, 2^63) like viewIno, with a
// salt of its own so that history and snapshot numbers collide only by
// chance (1 in 2^62 per pair).
func histIno(kind, key uint64) uint64 {
	x := (kind+0x5bd1e995)*0xd6e8feb86659fd93 ^ key
	x ^= x >> 32
	x *= 0xd6e8feb86659fd93
	x ^= x >> 32
	x *= 0xd6e8feb86659fd93
	x ^= x >> 32
	v := 1<<62 | x&(1<<62-1)
	if v == snapshotsIno || v == historyIno {
		v += 2
	}
	return v
}

// revKey is the key of revision id for histIno.
func revKey(id index.RevID) uint64 { return uint64(id.File)<<32 ^ uint64(id.Rev) }

// Names of revisions: "NNNN@YYYY-MM-DDTHH:MM:SSZ", the revision's number
// in the store, counted from 0 ("0000@..." is a file's first revision),
// the number deltafs log, cat --rev and restore --rev use; zero-padded to
// at least revDigits digits and to the width of the file's newest number,
// so that a plain sort (ls) gives the order of recording; and the UTC
// second it was recorded. Lookup takes the number with any padding, so
// that a name printed before a file's revision 10000 still finds its
// revision.
const (
	revDigits  = 4
	revTimeFmt = "2006-01-02T15:04:05Z"
)

// revWidth is the width of the numbers of a file whose newest revision
// is number next-1.
func revWidth(next int) int { return max(revDigits, len(strconv.Itoa(max(next-1, 0)))) }

// revName names r among revisions numbered in width digits.
func revName(r Revision, width int) string { return string(appendRevName(nil, r, width)) }

// appendRevName appends r's name to b.
func appendRevName(b []byte, r Revision, width int) []byte {
	var digits [20]byte
	num := strconv.AppendUint(digits[:0], uint64(r.ID.Rev), 10)
	for i := len(num); i < width; i++ {
		b = append(b, '0')
	}
	b = append(append(b, num...), '@')
	return time.Unix(0, r.Time).UTC().AppendFormat(b, revTimeFmt)
}

// parseRevName returns the store revision a name asks for and the time
// part it gives; ok is false if it is not shaped like a revision name.
func parseRevName(name string) (rev index.Rev, when string, ok bool) {
	num, when, found := strings.Cut(name, "@")
	if !found || num == "" || len(num) > 10 || strings.TrimLeft(num, "0123456789") != "" {
		return 0, "", false
	}
	n, err := strconv.ParseUint(num, 10, 32)
	if err != nil {
		return 0, "", false
	}
	return index.Rev(n), when, true
}
