package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/deltafs/deltafs/index"
)

// A repack in progress lives beside the live store:
//
//	repack/                  the shadow store: a store of the same layout
//	repack/FORMAT            written when the shadow is created
//	repack/OPTIONS           the options it was started with; a resumed run
//	                         with other options starts over
//	repack/index/            badger: one new Entry per revision done (same
//	                         RevID, new base, kind, chain facts and place),
//	                         FileMeta.Revs = revisions of the file done, tail
//	repack/segments/         the new records
//	repack/SWITCH            written once every revision is in the shadow:
//	                         from then on the switch only rolls forward
//	segments.old/            the old segments during the swap
//	repack.done/             the shadow after the swap, being removed
//
// The switch: (1) copy every shadow entry into the live index (file records
// get the new latest snapshot, the tail becomes the shadow's tail), in as many
// transactions as needed; (2) rename segments/ to segments.old/ and
// repack/segments/ to segments/; (3) remove segments.old/; (4) rename
// repack/ to repack.done/ and remove it. Every step can be repeated, so
// Open, finding repack/SWITCH, runs the switch again from the start before
// it reads anything. Without SWITCH the live store is untouched and Open
// leaves the shadow alone for the next repack to resume.
const (
	shadowName   = "repack"
	switchName   = "SWITCH"
	optionsName  = "OPTIONS"
	oldSegsName  = "segments.old"
	doneName     = "repack.done"
	segmentsName = "segments"
	switchChunk  = 1024 // entries per live-index transaction of the switch
)

// openShadow opens the shadow store of an interrupted repack with the same
// options and kept segments, or creates a fresh one.
func openShadow(dir string, opt RepackOptions, kept map[uint32]bool) (*Store, error) {
	sdir := filepath.Join(dir, shadowName)
	layout, from, err := keptOptions(dir, kept)
	if err != nil {
		return nil, err
	}
	want := shadowOptions(opt) + layout
	cfg := Config{Logger: opt.Logger, SegmentSize: opt.SegmentSize, CacheBytes: 16 << 20, LatestBytes: 1,
		MaxChainLen: opt.MaxChain, MaxReadRatio: opt.MaxReadRatio}.withDefaults()
	got, err := os.ReadFile(filepath.Join(sdir, optionsName))
	if err == nil && string(got) == want {
		if _, err := readFormat(sdir); err == nil {
			return openLocked(sdir, cfg, nil, false)
		}
	}
	if err == nil {
		opt.Logger.Info("repack options changed: starting over", "was", string(got), "now", want)
	}
	if err := removeShadow(sdir); err != nil {
		return nil, err
	}
	// Durably: the switch copies the shadow's entries into the live index
	// once SWITCH is in it, so its name must survive a power cut.
	if err := mkdirAllSync(sdir, 0o700); err != nil {
		return nil, err
	}
	s, err := openLocked(sdir, cfg, nil, true)
	if err != nil {
		return nil, err
	}
	if err := startSegmentsAt(s, from); err != nil {
		s.closeKeepLock()
		return nil, err
	}
	// OPTIONS last: its presence says the shadow is usable.
	if err := WriteFileSync(filepath.Join(sdir, optionsName), []byte(want), 0o600); err != nil {
		s.closeKeepLock()
		return nil, fmt.Errorf("objstore: repack: %w", err)
	}
	return s, nil
}

// removeShadow removes an unusable shadow, OPTIONS first: a removal cut
// short must not leave a half-removed shadow that looks usable.
func removeShadow(sdir string) error {
	err := os.Remove(filepath.Join(sdir, optionsName))
	if err == nil {
		err = index.SyncDir(sdir)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("objstore: repack: %w", err)
	}
	if err := os.RemoveAll(sdir); err != nil {
		return fmt.Errorf("objstore: repack: %w", err)
	}
	return nil
}

// dropFailedShadow removes the shadow of a repack (or gc) that failed
// with err before its switch, and returns err. Kept, it would only hold
// the space the next run needs: a run that failed for want of space
// (ENOSPC) left it behind, and the next resumed it and failed the same
// way, growing it. Two kinds of shadow stay: one with SWITCH, a
// completed repack the next Open rolls forward whatever happened after
// (never touched here), and an interrupted run's (ctx cancelled: Ctrl-C),
// which the next run resumes like a killed one's.
func dropFailedShadow(ctx context.Context, dir string, log *slog.Logger, err error) error {
	sdir := filepath.Join(dir, shadowName)
	if err == nil || ctx.Err() != nil || exists(filepath.Join(sdir, switchName)) || !exists(sdir) {
		return err
	}
	if rerr := removeShadow(sdir); rerr != nil {
		return errors.Join(err, rerr)
	}
	log.Info("removed the failed repack's shadow", "dir", sdir, "err", err)
	return err
}

// shadowOptions are the options whose change makes a shadow unusable.
func shadowOptions(o RepackOptions) string {
	s := fmt.Sprintf("window %d\nmax-chain %d\nmax-read-ratio %g\nreuse %v\n", o.Window, o.MaxChain, o.MaxReadRatio, o.Reuse)
	if o.keep != nil {
		s += gcMark
	}
	if o.salvage {
		s += "salvage\n"
	}
	return s
}

// writeSwitch marks the shadow complete: from here the switch rolls forward.
func writeSwitch(dir string) error {
	if err := WriteFileSync(filepath.Join(dir, shadowName, switchName), []byte("switch\n"), 0o600); err != nil {
		return fmt.Errorf("objstore: repack: %w", err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// recoverRepack completes a switch that was interrupted and removes what a
// finished one left behind. Called by Open and Repack with the lock held,
// before anything else reads the store.
func recoverRepack(dir string, log *slog.Logger) error {
	if exists(filepath.Join(dir, shadowName, switchName)) {
		log.Warn("completing an interrupted repack switch", "store", dir)
		return finishSwitch(dir, log, nil)
	}
	if err := os.RemoveAll(filepath.Join(dir, doneName)); err != nil {
		return fmt.Errorf("objstore: remove finished repack: %w", err)
	}
	return nil
}

// finishSwitch runs (or runs again) every step of the switch. stop, if not
// nil, is a test hook that can end it after a named step, as a crash would.
func finishSwitch(dir string, log *slog.Logger, stop func(step string) error) error {
	sdir, done := filepath.Join(dir, shadowName), filepath.Join(dir, doneName)
	if stop == nil {
		stop = func(string) error { return nil }
	}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"copied", func() error { return copyShadow(dir, sdir, log) }},
		{"swapped", func() error { return swapSegments(dir, sdir) }},
		{"old-removed", func() error { return os.RemoveAll(filepath.Join(dir, oldSegsName)) }},
		{"renamed", func() error { return errors.Join(os.Rename(sdir, done), index.SyncDir(dir)) }},
		{"removed", func() error { return os.RemoveAll(done) }},
	}
	for _, st := range steps {
		if err := st.fn(); err != nil {
			return fmt.Errorf("objstore: repack switch: %s: %w", st.name, err)
		}
		if err := stop(st.name); err != nil {
			return err
		}
	}
	return nil
}

// copyShadow writes every shadow entry into the live index.
func copyShadow(dir, sdir string, log *slog.Logger) error {
	sdb, err := index.Open(filepath.Join(sdir, "index"), index.Options{Logger: log})
	if err != nil {
		return err
	}
	defer sdb.Close()
	ldb, err := index.Open(filepath.Join(dir, "index"), index.Options{Logger: log})
	if err != nil {
		return err
	}
	defer ldb.Close()
	if err := checkComplete(ldb, sdb); err != nil {
		return err
	}
	tail, err := sdb.Tail()
	if err != nil {
		return err
	}
	gc := isGCShadow(sdir)
	// One batch across files: a store of many small files would otherwise
	// cost a commit (an fsync) per file. Copying again after a crash
	// writes the same rows, so chunks may end anywhere.
	b := index.Batch{Files: map[index.FileID]index.FileMeta{}, Tail: tail}
	flush := func() error {
		if len(b.Entries) == 0 && len(b.Files) == 0 {
			return nil
		}
		err := ldb.Commit(&b)
		b.Entries, b.Files = b.Entries[:0], map[index.FileID]index.FileMeta{}
		return err
	}
	if !gc {
		err = copyMerged(ldb, sdb, &b, flush)
	} else {
		err = sdb.Files(nil, func(f index.FileID, sm index.FileMeta) error {
			lm, err := ldb.File(f)
			if err != nil {
				return err
			}
			lm.LastSnap, lm.HasSnap = sm.LastSnap, sm.HasSnap
			b.Files[f] = lm // carries the record of a file with no kept revision, too
			if err := copyFile(ldb, sdb, f, &b, flush); err != nil {
				return err
			}
			return deleteRemoved(ldb, sdb, f)
		})
	}
	if err != nil {
		return err
	}
	return ldb.Commit(&b) // the shadow's tail, even if no row changed
}

// copyFile adds file f's shadow entries to b, flushing it every
// switchChunk entries, except those the live index holds as they are
// (kept whole, or copied verbatim to the same place: see repack_keep.go).
// A dedup entry takes the chain facts of its target's new entry (its
// target may be in a file done after it).
func copyFile(ldb, sdb *index.DB, f index.FileID, b *index.Batch, flush func() error) error {
	live := map[index.Rev]index.Entry{} // one file's: bounded like its history
	err := ldb.Revisions(nil, f, func(e index.Entry) error {
		live[e.Rev] = e
		return nil
	})
	if err != nil {
		return err
	}
	return sdb.Revisions(nil, f, func(e index.Entry) error {
		if e.Kind == index.KindDedup {
			te, err := sdb.Entry(e.Base)
			if err != nil {
				return fmt.Errorf("dedup %v: %w", e.ID(), err)
			}
			e.ChainLen, e.ChainBytes, e.Seg, e.Off = te.ChainLen, te.ChainBytes, te.Seg, te.Off
		}
		le, ok := live[e.Rev]
		if ok && le == e {
			return nil
		}
		if ok && le.HashIndexed() && (!e.HashIndexed() || le.Hash != e.Hash) {
			b.Unhash = append(b.Unhash, le) // a salvage found it lost
		}
		b.Entries = append(b.Entries, e)
		if len(b.Entries) >= switchChunk {
			return flush()
		}
		return nil
	})
}

// swapSegments puts the shadow's segments in place of the live ones. Each
// state a crash can leave is recognised by which directories exist.
func swapSegments(dir, sdir string) error {
	segs, old, fresh := filepath.Join(dir, segmentsName), filepath.Join(dir, oldSegsName), filepath.Join(sdir, segmentsName)
	if !exists(fresh) {
		return nil // already swapped
	}
	if exists(segs) && exists(old) {
		// Only an empty directory made after the first rename can be here.
		if err := os.Remove(segs); err != nil {
			return err
		}
	}
	if exists(segs) {
		if err := os.Rename(segs, old); err != nil {
			return err
		}
	}
	if err := os.Rename(fresh, segs); err != nil {
		return err
	}
	return errors.Join(index.SyncDir(dir), index.SyncDir(sdir))
}

// InterruptedRepackBytes returns the bytes an interrupted repack left in
// the store's shadow (STORE/repack): the next repack with the same
// options resumes from them, any other discards them; 0 if there is no
// shadow. A shadow ready to switch is not left over: Open finishes it.
func (s *Store) InterruptedRepackBytes() (int64, error) {
	var n int64
	err := filepath.WalkDir(filepath.Join(s.dir, shadowName), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return n, err
}
