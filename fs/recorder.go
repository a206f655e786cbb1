package fs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"time"
)

// FileID identifies a file of the live tree for the whole of its life:
// it survives renames, hard links share it, and it survives remounts. It
// is kept in the extended attribute XattrID of the live file (which the
// mount hides from users), so it travels with the inode and needs no
// table to keep in step with the live directory. The zero FileID means
// "unknown" (the live filesystem does not store user xattrs).
type FileID [16]byte

// XattrID is the extended attribute of a live file holding its FileID.
const XattrID = "user.deltafs.id"

// xattrPrefix is the namespace of deltafs's own attributes, hidden from
// and forbidden to users of the mount.
const xattrPrefix = "user.deltafs."

// NewFileID returns a fresh random FileID.
func NewFileID() FileID {
	var id FileID
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails on Linux
	return id
}

// IsZero reports whether id is the unknown FileID.
func (id FileID) IsZero() bool { return id == FileID{} }

func (id FileID) String() string { return hex.EncodeToString(id[:]) }

// Range is a half-open byte range [Off, Off+Len) of a file.
type Range struct {
	Off, Len int64
}

// End returns the first offset after r.
func (r Range) End() int64 { return r.Off + r.Len }

// Change reports that the content of a regular file changed. Its bytes
// are in the live file; a recorder reads them from there.
//
// The new content relates to the content the recorder last recorded for
// ID (the previous revision) like this: byte i, for i < Size, equals
// byte i of the previous revision when i < Kept and i is in no Dirty
// range; every other byte must be read from the live file. So a
// recorder builds a delta from Dirty alone, at a cost that follows the
// bytes written, unless Whole is set (ranges unknown: treat as a
// rewrite and diff, or store a fulltext).
type Change struct {
	Path string // live-tree relative, slash-separated, at the time of the report
	ID   FileID
	Ino  uint64 // inode number of the live file
	Uid  uint32 // the live file's owner at the report

	Dirty []Range // written ranges, sorted, disjoint, not adjacent, clipped to Size
	Kept  int64   // prefix of the previous revision that may survive (see above)
	Size  int64   // size of the live file at the report
	Whole bool    // the written ranges are unknown
	New   bool    // the file was created in this session: there is no previous revision

	// Sources lists files this one copied ranges from (copy_file_range),
	// which a recorder may take as extra parents.
	Sources []FileRef

	// Fsync is set when the report comes from fsync rather than the
	// last close of a writable handle.
	Fsync bool

	// Content is the live file opened read-only at the report, so that
	// a recorder reads the right inode even after a rename or unlink.
	// The recorder owns it and must close it (Close). It is nil if
	// reopening failed, or when too many changes hold one already (see
	// maxContentFds): Open then opens the file when it is needed.
	Content *os.File
	ref     *contentRef

	// Data, if not nil, is the whole content of the live file, read at
	// the report (a small new file, see capture.go), and DataTime when
	// it was read; Content is nil then and Open fails: a recorder takes
	// Data instead. Close gives its bytes back to the live tree's budget.
	Data     []byte
	DataTime time.Time

	// Report numbers the reports of a mount (1, 2, ...), so that a
	// recorder can tell them apart whether or not they carry Content.
	Report uint64
}

// FileRef names a file by identity and its path at the time.
type FileRef struct {
	Path string
	ID   FileID
}

// Rename reports a successful rename in the live tree.
type Rename struct {
	From, To string
	ID       FileID // the file moved (zero for directories and symlinks)
	Replaced FileID // the regular file that To named before, if any
	// ReplacedLivesAt is another name of Replaced, which lives on there
	// (a hard link: `ln f f.bak`, then an atomic save of f), if the
	// rename's two directories hold one; "" otherwise.
	ReplacedLivesAt string
	// ReplacedElsewhere: Replaced lives on under another hard link, in
	// a directory other than the rename's two, whose path is not known.
	ReplacedElsewhere bool
	Exchange          bool // RENAME_EXCHANGE: From now names what To named
	Dir               bool // a directory moved: every path under From moved too
	// Uid and ReplacedUid are the owners of ID and Replaced: a history
	// goes on from one file to another only between files of one owner
	// (a file's .history is its owner's to read).
	Uid, ReplacedUid uint32
}

// Remove reports that a name was removed from the live tree.
type Remove struct {
	Path  string
	ID    FileID // zero unless a regular file
	Dir   bool
	Nlink uint32 // links left to the inode (regular files; 0: gone)
	Uid   uint32 // the owner of the regular file ID
}

// Link reports a new hard link Path to the file that Target names.
type Link struct {
	Path, Target string
	ID           FileID
}

// Recorder receives what the live tree did, so that history can be
// recorded. fs calls it after the operation succeeded on the live
// directory, from the FUSE request goroutine: every method but Sync must
// return quickly (queue, do not record inline), and must not call back
// into the mount. Events of one file arrive in the order they happened.
type Recorder interface {
	// Dirtied is called before the content of file id (at path) first
	// changes in a session: before the first write, truncation,
	// allocation or copy into it reaches the live file, and at the
	// writable open of a passthrough writer (whose writes fs never sees).
	// Once per session, not per write: a recorder journals id there, so
	// that a change that dies with the mount is redone at the next mount
	// (see package mount). Later Changed reports of id cover it.
	Dirtied(id FileID, path string)
	// Changed is called when the last writable handle of a file closes
	// after its content changed, when a file is truncated by path, and
	// on fsync of a changed file.
	Changed(c Change)
	Renamed(r Rename)
	Removed(r Remove)
	Linked(l Link)
	// Sync returns when everything reported so far is recorded, or ctx
	// ends.
	Sync(ctx context.Context) error
	// Wait returns when the changes of file id reported so far are
	// recorded, or ctx ends; fsync calls it after its report. A
	// recorder may leave out changes it holds back on purpose (at most
	// one revision per interval): fsync makes the data durable in the
	// live file, not necessarily in history.
	Wait(ctx context.Context, id FileID) error
}

// ReadWaiter is implemented by a Recorder that can tell when it has read
// a change's content from the live file before it has recorded it.
// A writer about to change a file again (a writable open, a truncate by
// path) waits with WaitRead instead of Wait when the Recorder offers it:
// it must not change the live file under a recording that still reads
// it, but need not wait for the revision to be stored and committed.
type ReadWaiter interface {
	WaitRead(ctx context.Context, id FileID) error
}

// RedoWaiter is implemented by a Recorder that redoes, after the mount
// serves, recordings an earlier mount left undone (the mount's pending
// journal, its check after an unclean end). A redo reads the live file,
// so while Redoing is true a writer about to change a file it has not
// reported in this mount waits for that file's changes too (WaitRead or
// Wait by its FileID), as it does for one it reported: otherwise it
// could truncate or overwrite the content the redo is there to record.
// An unlink of a file, or a rename over it, waits so when RedoPending
// says a redo of that file is queued.
type RedoWaiter interface {
	Redoing() bool
	RedoPending(id FileID) bool
}

// Undirtier is implemented by a Recorder that can take a Dirtied back.
// Undirtied(id) says that the write session the last Dirtied of id
// announced ended with no change seen: its last writable handle closed,
// and the file's size and mtime are those it started from (a
// passthrough writer opened after an fsync, or by an O_TRUNC open of
// an empty file, and closed without writing). No Changed report covers
// that Dirtied, so a recorder that journals Dirtied (the mount's
// pending journal) clears the entry once the changes reported before it
// are recorded, and releases a change it held for that writer.
type Undirtier interface {
	Undirtied(id FileID)
}

// CloseNoter is implemented by a Recorder that holds an fsynced change
// back for an interval. Closed(id) says that the last writable handle
// of file id closed with nothing changed since the file's last report
// (an fsync, typically: an editor's save, fsynced, then closed). A
// change whose writer has closed is a revision of its own, so such a
// recorder stops holding it for the interval: held longer, the next
// change of the file would merge with it and the saved version be in no
// revision.
type CloseNoter interface {
	Closed(id FileID)
}

// ReleaseReader is implemented by a Recorder that holds changes back (a
// new file's grace, the fsync interval) and can give them up: ReleaseRead
// queues a held change of file id and returns once every change of id
// reported so far has been read from the live file. A removal that must
// not outlive what a change needs of the file waits with it.
type ReleaseReader interface {
	ReleaseRead(ctx context.Context, id FileID) error
}

// QuietRecorder is implemented by a Recorder that may take no Removed
// and Linked events (its history keeps no trace of them, as the mount's
// store): when IgnoresRemovesAndLinks is true, the live tree neither
// gathers what those events carry (a stat and an xattr read per unlink,
// an xattr read per link: git's link-then-unlink of each object it
// writes pays both) nor calls Removed and Linked.
type QuietRecorder interface {
	IgnoresRemovesAndLinks() bool
}

// UnlinkListener is implemented by a QuietRecorder that still takes the
// Removed event of a regular file's unlink, to know which file left
// which path (the mount continues a file's history in a new file made
// at its path soon after: git checkout unlinks a file and creates it
// again). When TakesUnlinks is true, the live tree calls Removed for the
// unlink of a regular file with Path, ID, Uid and Nlink alone (the ID is
// the node's if it reported a change this mount, else one xattr read;
// one stat for the owner and the links), and still not for directories
// or links.
type UnlinkListener interface {
	QuietRecorder
	TakesUnlinks() bool
}

// NopRecorder records nothing. It serves a mount that keeps no history
// (and the posix tests of the live tree alone).
type NopRecorder struct{}

func (NopRecorder) Dirtied(FileID, string)     {}
func (NopRecorder) Changed(c Change)           { c.Close() }
func (NopRecorder) Renamed(Rename)             {}
func (NopRecorder) Removed(Remove)             {}
func (NopRecorder) Linked(Link)                {}
func (NopRecorder) Sync(context.Context) error { return nil }

func (NopRecorder) Wait(context.Context, FileID) error { return nil }
