package mount

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/objstore"
)

// Offline serves snapshot commands and stats on a store that is not
// mounted: it opens (and locks) the store directly. A snapshot taken
// offline walks the whole live tree (there is no dirty tracking without
// a mount) and records any live file whose content no revision holds.
type Offline struct {
	st   *objstore.Store
	sink *storeSink
	snap *snapshotter
	hist *historian
}

// OpenOffline opens the store in dir; readOnly suffices for listing and
// stats. A mounted store fails with the store's *objstore.LockError.
func OpenOffline(dir string, readOnly bool, log *slog.Logger) (*Offline, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	st, err := objstore.Open(dir, objstore.Config{ReadOnly: readOnly, Holder: "deltafs snapshot (offline)", Logger: log})
	if err != nil {
		return nil, err
	}
	o := &Offline{st: st}
	live := filepath.Join(dir, liveDir)
	if !readOnly {
		if err := noSaveToRedo(dir); err != nil {
			return nil, errors.Join(err, st.Close())
		}
		if err := os.Mkdir(live, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, errors.Join(fmt.Errorf("create %s: %w", live, err), st.Close())
		}
		if o.sink, err = openStoreSink(st, filepath.Join(dir, idsFile), log); err != nil {
			return nil, errors.Join(err, st.Close())
		}
	}
	ls := &lockedSink{sink: o.sink}
	o.snap = newSnapshotter(st, fs.NewTreeBuilder(live), &liveRevs{st: st, ls: ls, live: live}, log)
	o.snap.sink = ls
	o.hist = &historian{st: st, dir: dir, snaps: o.snap}
	if o.sink != nil {
		o.hist.ls = ls
	}
	return o, nil
}

// Controller returns what the control socket would serve.
func (o *Offline) Controller() Controller { return controller{o.snap, o.hist} }

// Close closes the store and releases its lock.
func (o *Offline) Close() error {
	var errs []error
	if o.sink != nil {
		errs = append(errs, o.sink.Close())
	}
	return errors.Join(append(errs, o.st.Close())...)
}

// noSaveToRedo fails if the pending journal of the store in dir names a
// new file that continues another's history (a save killed before its
// new file was recorded): recorded offline, it would start a history of
// its own; the next mount's redo binds it.
func noSaveToRedo(dir string) error {
	cont, err := continuedFiles(dir)
	if err != nil {
		return err
	}
	for _, path := range cont {
		return fmt.Errorf("%s: a mount was killed during a save of %s, whose new file continues a history: mount it once to finish the save, then run this again", dir, path)
	}
	return nil
}
