package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/deltafs/deltafs/index"
	"golang.org/x/sys/unix"
)

// What a salvage (salvage.go) finds before it rewrites a store: which
// revisions do not read, and for each, a text found elsewhere or none.

// salvagePlan is what Salvage found before it rewrites the store.
type salvagePlan struct {
	bad       map[index.RevID]bool // did not read back
	lost      map[index.RevID]bool // of them, lost
	lostList  []index.RevID
	fromLive  int64
	fromOther int64
	damaged   bool // the store holds a mark of damage
	// found holds, by content hash, the damaged revisions a text was
	// found for: the content of others of that hash (a dedup's target,
	// say, where the dedup came back from its live file).
	found map[uint64][]index.RevID
	// lostBefore holds the files with revisions an earlier salvage kept
	// as lost: a salvage killed after its switch left their live files
	// to record again (recordLostNewest).
	lostBefore map[index.FileID]bool
}

func (p *salvagePlan) recoveredCount() int64 { return int64(len(p.bad) - len(p.lost)) }

// recovered says whether id read back only through a brought-back text:
// repack stores it anew from its text, never from its old record.
func (p *salvagePlan) recovered(id index.RevID) bool { return p != nil && p.bad[id] && !p.lost[id] }

// isLost says whether the salvage keeps id as lost.
func (p *salvagePlan) isLost(id index.RevID) bool { return p != nil && p.lost[id] }

// nothing says there is nothing to salvage: every revision reads. A mark
// of damage with nothing lost (its segment put back) is removed here.
func (p *salvagePlan) nothing(s *Store) bool {
	if len(p.bad) > 0 {
		return false
	}
	if p.damaged {
		if err := s.clearDamage(); err != nil {
			s.log.Warn("salvage: cannot remove the mark of damage", "err", err)
		}
	}
	return true
}

// planSalvage reads every revision of s back and plans what Salvage does
// with those that do not read: it installs the texts it found for them
// in s (s.salvage), which rebuilds then start from.
func planSalvage(ctx context.Context, s *Store, liveFile func(index.FileID) (string, bool), log *slog.Logger) (*salvagePlan, error) {
	p := &salvagePlan{bad: map[index.RevID]bool{}, lost: map[index.RevID]bool{}, damaged: s.Damage() != nil,
		found: map[uint64][]index.RevID{}, lostBefore: map[index.FileID]bool{}}
	tail, err := s.idx.Tail()
	if err != nil {
		return nil, err
	}
	var bad []index.Entry
	cache := caches{full: newLRU[index.RevID](verifyCacheBytes)}
	err = s.idx.All(ctx, func(e index.Entry) error {
		if e.Lost() {
			p.lostBefore[e.File] = true
			return nil // lost by an earlier salvage: kept as it is
		}
		err := s.verifyOne(ctx, e.ID(), tail, cache)
		switch {
		case errors.Is(err, ErrCorrupt):
			p.bad[e.ID()] = true
			bad = append(bad, e)
		case err != nil:
			return err
		}
		return nil
	})
	if err != nil || len(bad) == 0 {
		return p, err
	}
	s.salvage = map[index.RevID]func() ([]byte, error){}
	for _, e := range bad {
		if src, fromLive := p.source(ctx, s, e, liveFile); src != nil {
			p.install(s, e, src)
			if fromLive {
				p.fromLive++
			} else {
				p.fromOther++
			}
		}
	}
	// What read through a bad record may read through a found text now;
	// what reads now may be the content another bad revision lacks.
	left := bad
	for changed := true; changed; {
		changed = false
		var still []index.Entry
		for _, e := range left {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if s.salvage[e.ID()] != nil {
				continue
			}
			_, err := s.rebuild(ctx, e.ID(), e, uncached())
			if err == nil {
				changed = true
				continue
			}
			if !errors.Is(err, ErrCorrupt) {
				return nil, err
			}
			if src, _ := p.source(ctx, s, e, nil); src != nil {
				p.install(s, e, src)
				p.fromOther++
				changed = true
				continue
			}
			still = append(still, e)
		}
		left = still
	}
	for _, e := range left {
		p.lost[e.ID()] = true
		p.lostList = append(p.lostList, e.ID())
		log.Warn("salvage: revision lost: no copy of its content is left", "file", e.File, "rev", e.Rev, "size", e.Size)
	}
	return p, nil
}

// install makes src the text rebuilds of e start from.
func (p *salvagePlan) install(s *Store, e index.Entry, src func() ([]byte, error)) {
	s.salvage[e.ID()] = src
	if e.Flags&index.FlagHashDeferred == 0 {
		p.found[e.Hash] = append(p.found[e.Hash], e.ID())
	}
}

// source finds e's content elsewhere: its file's live file (liveFile, if
// not nil), else a revision of the same hash and size that reads. It
// returns a reader of it, checked against e's hash, or nil.
func (p *salvagePlan) source(ctx context.Context, s *Store, e index.Entry, liveFile func(index.FileID) (string, bool)) (func() ([]byte, error), bool) {
	if e.Flags&index.FlagHashDeferred != 0 {
		return p.deferredFromLive(s, e, liveFile), true
	}
	check := func(text []byte, where string) ([]byte, error) {
		if uint64(len(text)) != e.Size || s.cfg.hash(text) != e.Hash {
			return nil, corrupt(e.ID(), &e, fmt.Errorf("salvage: %s changed since it was found to hold the revision", where))
		}
		return text, nil
	}
	if liveFile != nil {
		if path, ok := liveFile(e.File); ok && fileHolds(path, e) {
			return func() ([]byte, error) {
				text, err := os.ReadFile(path)
				if err != nil {
					return nil, fmt.Errorf("objstore: salvage: %w", err)
				}
				return check(text, path)
			}, true
		}
	}
	ids, err := s.byHash(e.Hash)
	if err != nil {
		return nil, false
	}
	for _, id := range append(ids, p.found[e.Hash]...) { // a found dedup is in no hash row
		if id == e.ID() {
			continue
		}
		ce, err := s.entry(id)
		if err != nil || ce.Size != e.Size || ce.Lost() {
			continue
		}
		if _, err := s.rebuild(ctx, id, ce, uncached()); err != nil {
			continue
		}
		return func() ([]byte, error) {
			text, err := s.rebuild(ctx, id, ce, uncached())
			if err != nil {
				return nil, err
			}
			return check(text, fmt.Sprintf("revision %v", id))
		}, false
	}
	return nil, false
}

// deferredFromLive returns a reader of e's content from its file's live
// file, for a revision with no content hash (stored from a delta alone:
// an in-place write, an append) that is its file's newest: the live file
// holds it when it has its size and was last changed before the
// revision's content was read, the rule the mount itself trusts to name
// a file's newest revision in a snapshot without reading it (package
// mount, unchangedSince). Nil otherwise. Its text gets its hash in the
// rewrite.
func (p *salvagePlan) deferredFromLive(s *Store, e index.Entry, liveFile func(index.FileID) (string, bool)) func() ([]byte, error) {
	if liveFile == nil {
		return nil
	}
	path, ok := liveFile(e.File)
	if !ok {
		return nil
	}
	if newest, ok, err := s.Latest(e.File); err != nil || !ok || newest.Rev != e.Rev {
		return nil
	}
	unchanged := func() bool {
		var st unix.Stat_t
		return unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG &&
			uint64(st.Size) == e.Size && st.Ctim.Nano() < e.Time-int64(liveSlack)
	}
	if !unchanged() {
		return nil
	}
	return func() ([]byte, error) {
		text, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("objstore: salvage: %w", err)
		}
		if !unchanged() || uint64(len(text)) != e.Size {
			return nil, corrupt(e.ID(), &e, fmt.Errorf("salvage: %s changed since it was found to hold the revision", path))
		}
		return text, nil
	}
}

// liveSlack is the mount's ctimeSlack: a file changed within this much
// of its revision's time may have changed after its content was read.
const liveSlack = 20 * time.Millisecond

// fileHolds reports whether the file at path has e's size and content
// hash, streamed through the hash.
func fileHolds(path string, e index.Entry) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || uint64(st.Size()) != e.Size {
		return false
	}
	h := xxhash.New()
	n, err := io.Copy(h, f)
	return err == nil && uint64(n) == e.Size && h.Sum64() == e.Hash
}

// salvageText returns the text a salvage found for id, if it found one.
func (s *Store) salvageText(id index.RevID) ([]byte, bool, error) {
	if s.salvage == nil {
		return nil, false, nil
	}
	src := s.salvage[id]
	if src == nil {
		return nil, false, nil
	}
	text, err := src()
	return text, true, err
}

// uncached are caches for a rebuild that keeps nothing: a salvage's
// checks must read the records, not texts read before.
func uncached() caches { return caches{full: newLRU[index.RevID](0)} }

// lostEntry is e kept as lost: no record, no base (index.FlagLost).
func lostEntry(e index.Entry) index.Entry {
	e.Kind, e.Base, e.Base2 = index.KindFull, index.NullRev, index.NullRev
	e.ChainLen, e.ChainBytes, e.Stored, e.Seg, e.Off = 0, 0, 0, 0, 0
	e.Flags = index.FlagLost | e.Flags&index.FlagHashDeferred
	return e
}
