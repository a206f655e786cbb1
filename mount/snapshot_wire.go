package mount

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/objstore"
)

// snapshotParts is what a mount adds for snapshots: the snapshotter
// behind .snapshots and the control socket, the dirty-tracking tree
// builder, and the automatic snapshots.
type snapshotParts struct {
	snap     *snapshotter
	revs     *liveRevs       // nil on a read-only mount
	reserve  func() error    // store files for the pending files (reservePending)
	hist     *historian      // log, cat and restore on the control socket
	tree     *fs.TreeBuilder // nil on a read-only mount
	ctl      *controlServer
	stopAuto context.CancelFunc
	autoDone chan struct{}
	warmDone chan struct{} // closed when the snapshot list is cached
}

// newSnapshotParts builds the snapshotter of a mount over st; ls is nil
// on a read-only mount (no snapshot can be taken there), as is jnl, the
// mount's pending journal.
func newSnapshotParts(st *objstore.Store, live string, ls *lockedSink, jnl *journal, cfg Config) *snapshotParts {
	snap := newSnapshotter(st, nil, nil, cfg.Logger)
	p := &snapshotParts{snap: snap, hist: &historian{st: st, dir: filepath.Dir(live), ls: ls, snaps: snap}}
	if ls != nil {
		p.tree = fs.NewTreeBuilder(live)
		revs := &liveRevs{st: st, ls: ls, live: live}
		p.revs = revs
		if jnl != nil {
			revs.clean = jnl.clean
			p.reserve = func() error { return ls.reservePending(jnl) }
		}
		p.snap.b, p.snap.revs, p.snap.sink = p.tree, revs, ls
		if cfg.testRevisions != nil {
			p.snap.revs = cfg.testRevisions(revs)
		}
	}
	return p
}

// fsConfig adds the snapshot parts to the live tree's configuration.
func (p *snapshotParts) fsConfig(c fs.Config) fs.Config {
	c.Snapshots, c.Tree = p.snap, p.tree
	return c
}

// prepareWith makes snapshots wait for the releases of closed writable
// handles (the kernel sends RELEASE after close(2) returns) and for the
// recorder, and take the open writers of fsys.
func (p *snapshotParts) prepareWith(rec *Recorder, fsys *fs.FS) {
	p.hist.rec, p.hist.waitClosed = rec, fsys.WaitFileReleases
	if p.revs != nil {
		p.revs.successor = rec.Successor
	}
	p.hist.writing = func(ino uint64) bool {
		for _, w := range fsys.Writers() {
			if w.Node == ino {
				return true
			}
		}
		return false
	}
	p.snap.prepare = func(ctx context.Context) error {
		fsys.WaitReleases(ctx)
		if err := rec.Sync(ctx); err != nil || p.reserve == nil {
			return err
		}
		return p.reserve()
	}
	p.snap.freeze, p.snap.writers = fsys.Freeze, fsys.Writers
}

// start opens the control socket in the store directory and starts the
// automatic snapshots, once the mount serves.
func (p *snapshotParts) start(store string, cfg Config) error {
	ctl, err := serveControl(store, uint32(os.Getuid()), controller{p.snap, p.hist}, cfg.Logger)
	if err != nil {
		return err
	}
	p.ctl = ctl
	p.warmDone = make(chan struct{})
	go func() { defer close(p.warmDone); p.snap.warm(context.Background()) }()
	if cfg.SnapshotEvery > 0 && p.tree != nil {
		ctx, cancel := context.WithCancel(context.Background())
		p.stopAuto, p.autoDone = cancel, make(chan struct{})
		a := &autoSnapshots{s: p.snap, every: cfg.SnapshotEvery, keep: cfg.KeepSnapshots, log: cfg.Logger, now: time.Now, nameFunc: AutoName}
		go func() { defer close(p.autoDone); a.run(ctx) }()
	}
	return nil
}

// stop ends the automatic snapshots and closes the control socket; the
// mount then records what is pending and closes the store.
func (p *snapshotParts) stop() error {
	if p.stopAuto != nil {
		p.stopAuto()
		<-p.autoDone
	}
	if p.warmDone != nil {
		<-p.warmDone // the store closes next
	}
	if p.ctl == nil {
		return nil
	}
	err := p.ctl.Close()
	p.ctl = nil
	return err
}
