package mount

import (
	"fmt"

	"github.com/deltafs/deltafs/fs"
)

// assignPending gives a store file to every file the journal holds
// pending that the sink has none for, in one index transaction and one
// fsync of the ids file; a snapshot does it before its build, with the
// live tree not yet frozen. Such a file is one whose content is in no
// revision yet after the recorder's backlog was recorded: an excluded
// file never recorded (exclude.go), or one a writer still holds open.
// The build records each of them (liveRevs.Revision), and allocating
// their store files there went one synced index transaction and one
// fsync of live.ids per file, with the live tree frozen: 2,000 new
// excluded files made a snapshot take 3.7-4.7 s, 0.2 s now
// (bench/scripts/exclude_snapshot.sh; 18 s on a loaded machine).
//
// A file that continues another's history (a rename over it, still
// pending) or whose own history another file took (forked) is left to
// the build, which allocates its store file as the recorder would.
func (l *lockedSink) assignPending(pending map[fs.FileID]pendingFile) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sink
	var ids []fs.FileID
	var names []string
	for id, p := range pending {
		_, known := s.ids[id]
		_, forked := s.forked[id]
		_, adopting := s.adopting[id]
		if id.IsZero() || known || forked || adopting || !p.continues.IsZero() {
			continue
		}
		ids, names = append(ids, id), append(names, p.path)
	}
	if len(ids) == 0 {
		return nil
	}
	fids, err := s.st.NewFiles(names)
	if err != nil {
		return fmt.Errorf("store files for %d pending files: %w", len(ids), err)
	}
	for i, id := range ids {
		if err := s.bind(id, fids[i]); err != nil {
			return err
		}
	}
	return s.syncIDs()
}
