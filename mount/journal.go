package mount

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"golang.org/x/sys/unix"
)

// journalFile is the pending journal in the store directory: the live
// files that may hold content no revision holds yet. fs reports
// Dirtied before a session's first change reaches a live file; the
// journal appends a record then (one write(2), no fsync: see doc.go for
// why that suffices against a killed process, and what a power cut may
// lose), and a clean record once a revision holding the change is
// durable and no newer change is pending. The next mount redoes every
// file still pending (journal_redo.go).
//
// Record layout: kind (1 byte), FileID (16), payload length (2, big
// endian), payload, CRC-32C of all that (4, big endian). A torn or
// corrupt record ends the journal: what follows it is ignored.
const journalFile = "pending.journal"

// Record kinds.
const (
	recDirty = 'D' // payload: path (live-relative) of the file at the time
	recClean = 'C' // no payload: the file's history holds its live content
	recMoved = 'M' // payload: the file's new path
	recCont  = 'K' // payload: FileID of the file this one replaced (rename over it)
)

const recHeaderLen = 1 + 16 + 2

// compactAt: once the journal holds this many bytes and mostly clean
// records, it is rewritten with the pending entries alone. A clean
// record follows every dirty one, so a long mount would otherwise grow
// it by ~80 bytes per recorded session.
const compactAt = 1 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// pendingFile is what the journal knows of one pending file.
type pendingFile struct {
	path      string    // live-relative path hint
	continues fs.FileID // a file whose history this one continues, if any
	// gen counts Dirtied calls of this mount; stamps holds the gen at
	// each Change reported and not yet recorded, by its Report number
	// (one per report, so that a merged report does not clean too early).
	gen    uint64
	stamps map[uint64]uint64
	// settled is the gen of the last report recorded (or of the redo),
	// durable says whether it is: if so and gen comes back to it (the
	// writers dirtied after it changed nothing, undirtied), the file is
	// clean. A file first dirtied by this mount starts settled at gen 0
	// (it was clean); one the journal named at the mount's start does
	// not (its redo settles it).
	settled uint64
	durable bool
}

// journal is the pending journal of a mount.
type journal struct {
	path string
	log  *slog.Logger

	mu       sync.Mutex
	f        *os.File // for appending
	size     int64
	unsynced bool // appended since the last fsync
	// unsyncedName: a rewrite replaced the journal by a rename that no fsync
	// of its directory has made durable yet: until one does, a power
	// cut brings the old journal back, without what was appended to the
	// new one, fsynced or not.
	unsyncedName bool
	failed       bool  // an append failed (logged once); the journal then only shrinks
	reserved     int64 // blocks are allocated up to here (reserveLocked)
	pending      map[fs.FileID]*pendingFile
	// gathering makes appendLocked collect records in gathered, which
	// recordedAll writes with one write(2): a window of 256 recorded
	// files cost a write per clean record.
	gathering bool
	gathered  []byte
}

// openJournal reads the journal at path, rewrites it with its pending
// entries alone and opens it for appending.
func openJournal(path string, log *slog.Logger) (*journal, error) {
	j := &journal{path: path, log: log, pending: map[fs.FileID]*pendingFile{}}
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if rest := j.replay(b); rest > 0 {
		log.Warn("pending journal ends in a torn or corrupt record; ignored", "bytes", rest)
	}
	if err := j.rewrite(); err != nil {
		return nil, err
	}
	return j, nil
}

// replay applies the records of b and returns how many bytes at its end
// are not a whole, intact record.
func (j *journal) replay(b []byte) int {
	for len(b) > 0 {
		kind, id, payload, n := parseRecord(b)
		if n == 0 {
			return len(b)
		}
		b = b[n:]
		p := j.pending[id]
		switch {
		case kind == recDirty && p == nil:
			j.pending[id] = &pendingFile{path: string(payload)}
		case kind == recClean:
			delete(j.pending, id)
		case kind == recMoved && p != nil:
			p.path = string(payload)
		case kind == recCont && p != nil && len(payload) == len(fs.FileID{}):
			copy(p.continues[:], payload)
		}
	}
	return 0
}

// parseRecord returns the first record of b and its length, or n == 0
// if b does not start with a whole, intact record.
func parseRecord(b []byte) (kind byte, id fs.FileID, payload []byte, n int) {
	if len(b) < recHeaderLen {
		return 0, id, nil, 0
	}
	n = recHeaderLen + int(binary.BigEndian.Uint16(b[17:])) + 4
	if len(b) < n || crc32.Checksum(b[:n-4], crcTable) != binary.BigEndian.Uint32(b[n-4:]) {
		return 0, id, nil, 0
	}
	copy(id[:], b[1:17])
	return b[0], id, b[recHeaderLen : n-4], n
}

// appendRecord appends one record to dst.
func appendRecord(dst []byte, kind byte, id fs.FileID, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, kind)
	dst = append(dst, id[:]...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(payload)))
	dst = append(dst, payload...)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
}

// pathPayload bounds a path hint to what a record holds; a cut hint
// only costs the redo a walk of the live tree.
func pathPayload(p string) []byte {
	if len(p) > 1<<16-1 {
		return nil
	}
	return []byte(p)
}

// snapshotLocked returns the records of the pending entries alone.
func (j *journal) snapshotLocked() []byte {
	var b []byte
	for id, p := range j.pending {
		b = appendRecord(b, recDirty, id, pathPayload(p.path))
		if !p.continues.IsZero() {
			b = appendRecord(b, recCont, id, p.continues[:])
		}
	}
	return b
}

// rewrite replaces the journal with its pending entries (temp file,
// fsync, rename) and reopens it for appending.
func (j *journal) rewrite() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.rewriteLocked(true)
}

// rewriteLocked rewrites the journal; sync fsyncs the new one before it
// replaces the old. The compaction of a running mount does not: its
// appends are not fsynced either (see doc.go), and an fsync every few
// thousand sessions measured as most of the journal's cost.
func (j *journal) rewriteLocked(sync bool) error {
	b := j.snapshotLocked()
	tmp := j.path + ".tmp"
	if err := writeJournal(tmp, b, sync); err != nil {
		return err
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return fmt.Errorf("replace %s: %w", j.path, err)
	}
	j.unsyncedName = true
	if sync {
		// the rewrite is durable now, not at the next sync
		if err := index.SyncDir(filepath.Dir(j.path)); err != nil {
			return fmt.Errorf("replace %s: fsync its directory: %w", j.path, err)
		}
		j.unsyncedName = false
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", j.path, err)
	}
	if j.f != nil {
		_ = j.f.Close()
	}
	j.f, j.size, j.unsynced = f, int64(len(b)), false
	j.gathered = j.gathered[:0] // the rewrite holds what they said
	j.reserved = 0
	j.reserveLocked(0)
	return nil
}

// journalReserve is how far past its end the journal keeps blocks
// allocated (fallocate, its size unchanged), so that its appends need no
// new block: on a full disk (space.go) they still say which files are
// pending. Twice compactAt: a journal is rewritten about there.
const journalReserve = 2 * compactAt

// reserveLocked keeps journalReserve bytes allocated past the end of the
// journal once an append of n bytes would come within half of it of the
// end of what is allocated. A failure (a full disk) is retried later.
func (j *journal) reserveLocked(n int) {
	if j.f == nil || j.size+int64(n) < j.reserved-journalReserve/2 {
		return
	}
	if err := unix.Fallocate(int(j.f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, j.size+journalReserve); err == nil {
		j.reserved = j.size + journalReserve
	}
}

func writeJournal(path string, b []byte, sync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	_, err = f.Write(b)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// appendLocked appends one record. A failure is logged once: the mount
// goes on, its redo protection weakened.
func (j *journal) appendLocked(kind byte, id fs.FileID, payload []byte) {
	if j.f == nil {
		return
	}
	if j.gathering {
		j.gathered = appendRecord(j.gathered, kind, id, payload)
		return
	}
	j.writeLocked(appendRecord(nil, kind, id, payload))
}

// writeLocked appends records to the journal file.
func (j *journal) writeLocked(b []byte) {
	if j.f == nil || len(b) == 0 {
		return
	}
	j.reserveLocked(len(b))
	n, err := j.f.Write(b)
	j.size += int64(n)
	j.unsynced = true
	if err != nil && n > 0 {
		// a torn record would hide every record after it from the
		// replay: cut it off
		if terr := j.f.Truncate(j.size - int64(n)); terr == nil {
			j.size -= int64(n)
		}
	}
	if err != nil && !j.failed {
		j.failed = true
		j.log.Error("pending journal: append failed; a crash may leave changes unrecorded", "err", err)
	}
}

// dirtied notes that id's live file is about to change (fs.Recorder's
// Dirtied): a record the first time, with cont, if not zero, as the file
// whose history it continues; a counter after.
func (j *journal) dirtied(id fs.FileID, path string, cont fs.FileID) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if p := j.pending[id]; p != nil {
		p.gen++
		return
	}
	j.addLocked(id, path)
	if !cont.IsZero() {
		j.pending[id].continues = cont
		j.appendLocked(recCont, id, cont[:])
	}
}

// addLocked makes id, not pending, pending at path.
func (j *journal) addLocked(id fs.FileID, path string) {
	j.pending[id] = &pendingFile{path: path, gen: 1, durable: true}
	j.appendLocked(recDirty, id, pathPayload(path))
}

// keep makes id pending at path if it is not: a change of it that is
// left unrecorded (an excluded path, see exclude.go), which a new file's
// writer may have made with no Dirtied (passthrough writes bypass the
// mount). A pending id takes path as its hint (a new file's Dirtied may
// have come before it had one).
func (j *journal) keep(id fs.FileID, path string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if id.IsZero() {
		return
	}
	if p := j.pending[id]; p != nil {
		if p.path != path {
			p.path = path
			j.appendLocked(recMoved, id, pathPayload(path))
		}
		return
	}
	j.addLocked(id, path)
}

// forget cleans pending id, an excluded file that path named and an
// unlink (or a rename over it) removed, unless a change of it waits to
// be recorded. The mount knows no other link of it (see the README's
// limits): one that has another link is no longer pending, so a
// snapshot holds its newest revision, if it has one, and a mount
// without the pattern does not redo it.
func (j *journal) forget(id fs.FileID, path string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if p := j.pending[id]; p != nil && p.path == path && len(p.stamps) == 0 {
		j.cleanLocked(id)
	}
}

// undirtied takes back the last dirtied of id: its writer changed
// nothing. The file is clean at once if everything reported before is
// durably recorded, else when the last of those reports is.
func (j *journal) undirtied(id fs.FileID) {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := j.pending[id]
	if p == nil || p.gen == 0 {
		return
	}
	p.gen--
	if len(p.stamps) == 0 && p.durable && p.settled == p.gen {
		j.cleanLocked(id)
	}
}

// reported stamps a Change of a pending file with the file's gen.
func (j *journal) reported(c *fs.Change) {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := j.pending[c.ID]
	if p == nil || c.Report == 0 {
		return
	}
	if p.stamps == nil {
		p.stamps = map[uint64]uint64{}
	}
	p.stamps[c.Report] = p.gen
}

// recorded notes that the sink finished c (ok: its revision is durable).
// Reports of one file are recorded in order, so every stamp up to c's is
// done with; the file is clean if no Dirtied came after c's report.
func (j *journal) recorded(c *fs.Change, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.recordedLocked(c, ok)
}

// recordedAll is recorded of the changes of a window, in order (errs[i]
// is cs[i]'s; a nil change is skipped), their clean records appended
// with one write.
func (j *journal) recordedAll(cs []*fs.Change, errs []error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.gathering = true
	for i, c := range cs {
		if c != nil {
			j.recordedLocked(c, errs[i] == nil)
		}
	}
	j.gathering = false
	j.writeLocked(j.gathered)
	j.gathered = j.gathered[:0]
}

func (j *journal) recordedLocked(c *fs.Change, ok bool) {
	p := j.pending[c.ID]
	if p == nil {
		return
	}
	g, stamped := p.stamps[c.Report]
	if !stamped {
		return
	}
	for f, s := range p.stamps {
		if s <= g {
			delete(p.stamps, f)
		}
	}
	p.settled, p.durable = g, ok
	if ok && g == p.gen {
		j.cleanLocked(c.ID)
	}
}

// redone notes that the redo of id finished, started at gen.
func (j *journal) redone(id fs.FileID, gen uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := j.pending[id]
	switch {
	case p == nil:
	case p.gen == gen:
		j.cleanLocked(id)
	case len(p.stamps) == 0:
		p.settled, p.durable = gen, true
	}
}

func (j *journal) cleanLocked(id fs.FileID) {
	delete(j.pending, id)
	j.appendLocked(recClean, id, nil)
	if j.size > compactAt && j.size > int64(8*64*len(j.pending)) {
		if err := j.rewriteLocked(false); err != nil {
			j.log.Warn("pending journal not compacted", "err", err)
		}
	}
}

// renamed keeps the path hints of pending files, and notes a pending
// file renamed over another (an editor's atomic save), whose history it
// continues if it has none of its own yet.
func (j *journal) renamed(ev fs.Rename) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if ev.Dir {
		// An exchange moves what was under To to From too.
		for id, p := range j.pending {
			to := ""
			if rest, ok := strings.CutPrefix(p.path, ev.From+"/"); ok {
				to = ev.To + "/" + rest
			} else if rest, ok := strings.CutPrefix(p.path, ev.To+"/"); ok && ev.Exchange {
				to = ev.From + "/" + rest
			}
			if to != "" {
				p.path = to
				j.appendLocked(recMoved, id, pathPayload(p.path))
			}
		}
		return
	}
	if p := j.pending[ev.ID]; p != nil && !ev.ID.IsZero() {
		p.path = ev.To
		j.appendLocked(recMoved, ev.ID, pathPayload(p.path))
		if !ev.Replaced.IsZero() && !ev.Exchange {
			p.continues = ev.Replaced
			j.appendLocked(recCont, ev.ID, ev.Replaced[:])
		}
	}
	if p := j.pending[ev.Replaced]; p != nil && ev.Exchange && !ev.Replaced.IsZero() {
		p.path = ev.From
		j.appendLocked(recMoved, ev.Replaced, pathPayload(p.path))
	}
}

// sync makes the appended records durable.
func (j *journal) sync() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.unsynced && !j.unsyncedName || j.f == nil {
		return
	}
	if err := j.f.Sync(); err != nil {
		j.log.Warn("pending journal: fsync failed", "err", err)
		return
	}
	j.unsynced = false
	if j.unsyncedName {
		if err := index.SyncDir(filepath.Dir(j.path)); err != nil {
			j.log.Warn("pending journal: fsync of its directory failed", "err", err)
			return
		}
		j.unsyncedName = false
	}
}

// clean reports whether id has no pending entry: every change made to
// its live file through this mount (Dirtied comes before the change
// reaches the file) is in a durable revision, and none is under way.
func (j *journal) clean(id fs.FileID) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.pending[id] == nil
}

// entries returns the pending files, for the redo.
func (j *journal) entries() map[fs.FileID]pendingFile {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make(map[fs.FileID]pendingFile, len(j.pending))
	for id, p := range j.pending {
		out[id] = pendingFile{path: p.path, continues: p.continues, gen: p.gen}
	}
	return out
}

// close compacts the journal to its pending entries (normally none after
// a clean unmount) and closes it.
func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	err := j.rewriteLocked(true)
	if err != nil && j.f != nil {
		// No room for a new journal (a full disk): the old one, its
		// blocks reserved, takes the pending entries again instead (a
		// superset of what it says is pending: a redo of a file that is
		// not is a comparison that records nothing).
		b, at := j.snapshotLocked(), j.size
		j.writeLocked(b)
		if serr := j.f.Sync(); serr == nil && j.size == at+int64(len(b)) {
			j.log.Warn("pending journal not rewritten; appended its pending entries", "err", err)
			err = nil
		}
	}
	if j.f != nil {
		err = errors.Join(err, j.f.Close())
		j.f = nil
	}
	return err
}

// gen returns the gen of pending id (0 if it is not pending).
func (j *journal) gen(id fs.FileID) uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if p := j.pending[id]; p != nil {
		return p.gen
	}
	return 0
}

// hint returns the path hint of pending id.
func (j *journal) hint(id fs.FileID) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if p := j.pending[id]; p != nil {
		return p.path
	}
	return ""
}

// continues returns the file pending id replaced, if any.
func (j *journal) continues(id fs.FileID) fs.FileID {
	j.mu.Lock()
	defer j.mu.Unlock()
	if p := j.pending[id]; p != nil {
		return p.continues
	}
	return fs.FileID{}
}
