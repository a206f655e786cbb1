package mount

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/deltafs/deltafs/index"
)

// Automatic snapshots are told from the snapshots a user names by their
// name alone, and that name is reserved: only the automatic snapshotter
// creates a snapshot, or renames one, to a name of the form
// auto-YYYY-MM-DDTHH:MM:SSZ (see CheckSnapshotName); mkdir in .snapshots,
// "deltafs snapshot create|rename" and the control socket refuse it. A
// reserved name, not a flag in the snapshot's index record, because the
// name is what a user sees in "ls .snapshots" and "snapshot list", so
// what --keep-snapshots may retire is plain from the listing; renaming an
// automatic snapshot to a name of one's own keeps it for good; and the
// snapshot record and its decoder stay as they are, so every store, old
// or new, reads the same with any version. (A snapshot given such a name
// by hand before the rule existed counts as automatic: rename it to keep
// it.)

// autoPrefix starts the name of every automatic snapshot; only those are
// ever retired.
const autoPrefix = "auto-"

// autoLayout is the UTC time of an automatic snapshot in its name.
const autoLayout = "2006-01-02T15:04:05Z"

// AutoName names the automatic snapshot taken at t, e.g.
// auto-2026-11-30T02:15:00Z.
func AutoName(t time.Time) string { return autoPrefix + t.UTC().Format(autoLayout) }

// isAuto reports whether name is an automatic snapshot's name.
func isAuto(name string) bool {
	rest, ok := strings.CutPrefix(name, autoPrefix)
	if !ok {
		return false
	}
	_, err := time.Parse(autoLayout, rest)
	return err == nil
}

// CheckSnapshotName returns an error wrapping index.ErrBadName unless a
// user may give a snapshot name: index.CheckSnapshotName's rules, and not the
// name of an automatic snapshot, which is reserved for them.
func CheckSnapshotName(name string) error {
	if err := index.CheckSnapshotName(name); err != nil {
		return err
	}
	if isAuto(name) {
		return fmt.Errorf("%w: %q: names auto-YYYY-MM-DDTHH:MM:SSZ are reserved for automatic snapshots", index.ErrBadName, name)
	}
	return nil
}

// autoSnapshots takes a snapshot every interval until ctx ends, and
// after each one deletes the oldest automatic snapshots beyond keep
// (keep <= 0 keeps them all). Snapshots a user named are never deleted.
// A failure is logged and retried at the next tick.
type autoSnapshots struct {
	s        *snapshotter
	every    time.Duration
	keep     int
	log      *slog.Logger
	now      func() time.Time
	nameFunc func(time.Time) string
}

func (a *autoSnapshots) run(ctx context.Context) {
	t := time.NewTicker(a.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.tick(ctx)
		}
	}
}

// tick takes one automatic snapshot and retires old ones.
func (a *autoSnapshots) tick(ctx context.Context) {
	name := a.nameFunc(a.now())
	if _, err := a.s.create(ctx, name); err != nil && !errors.Is(err, index.ErrExists) {
		a.log.Warn("automatic snapshot failed", "name", name, "err", err)
		return
	}
	if err := a.retire(ctx); err != nil {
		a.log.Warn("retiring automatic snapshots failed", "err", err)
	}
}

// retire deletes the oldest automatic snapshots beyond a.keep.
func (a *autoSnapshots) retire(ctx context.Context) error {
	if a.keep <= 0 {
		return nil
	}
	list, err := a.s.List(ctx)
	if err != nil {
		return err
	}
	list = slices.DeleteFunc(list, func(s index.Snapshot) bool { return !isAuto(s.Name) })
	slices.SortStableFunc(list, func(x, y index.Snapshot) int { return cmp.Compare(x.ID, y.ID) })
	for len(list) > a.keep {
		if err := a.s.Delete(ctx, list[0].Name); err != nil && !errors.Is(err, index.ErrNotFound) {
			return err
		}
		list = list[1:]
	}
	return nil
}
