package mount

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/deltafs/deltafs/index"
)

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

// autoSnapshots takes a snapshot every interval until ctx ends, and
// after each one deletes the oldest automatic snapshots beyond keep
// (keep <= 0 keeps them all). Snapshots a user named are never deleted.
// A failure is logged and retried at the next tick.
type autoSnapshots struct {
	c        Controller
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
	if _, err := a.c.CreateSnapshot(ctx, name); err != nil && !errors.Is(err, index.ErrExists) {
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
	list, err := a.c.ListSnapshots(ctx)
	if err != nil {
		return err
	}
	list = slices.DeleteFunc(list, func(s index.Snapshot) bool { return !isAuto(s.Name) })
	slices.SortStableFunc(list, func(x, y index.Snapshot) int { return cmp.Compare(x.ID, y.ID) })
	for len(list) > a.keep {
		if err := a.c.DeleteSnapshot(ctx, list[0].Name); err != nil && !errors.Is(err, index.ErrNotFound) {
			return err
		}
		list = list[1:]
	}
	return nil
}
