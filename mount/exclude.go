package mount

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/deltafs/deltafs/fs"
)

// Leaving files out of history (Config.Exclude, mount --exclude): a file
// whose path matches a pattern records no revision when it is closed or
// fsynced; it lives in the mount as any file does. Swap files, build
// output and databases' journals change often and are worth nothing
// later; their revisions filled stores and queued the recorder.
//
// What still holds an excluded file's content:
//   - A snapshot: it holds the file as it is then, as it holds every
//     file (the build records content no revision holds, see liveRevs),
//     so a snapshot stays the whole tree. That is the file's only
//     history.
//   - A rename that takes the file out of the patterns (a temp file of
//     an atomic save renamed over the file it replaces, a directory
//     renamed away from an excluded name): its content is recorded then,
//     from the live file, and continues the replaced file's history as
//     any atomic save does.
//
// The journal keeps an excluded file pending (its content is in no
// revision), which is what makes the two above find it: a snapshot reads
// a pending file instead of trusting its newest revision, and a rename
// out of the patterns redoes the pending files it moved. At the next
// mount, the redo of pending files leaves those still excluded pending;
// mounted without the pattern, they are recorded.
//
// Patterns are path.Match patterns. One without a slash matches any
// component of a path ("*.swp" a file anywhere, "node_modules" a
// directory and all below it); one with a slash matches from the mount's
// root ("build/*.o", "/tmp" the top-level tmp alone), and a directory it
// matches excludes all below it.
type excluder struct {
	anywhere []string   // patterns of one component
	rooted   [][]string // patterns from the root, by component
}

// newExcluder checks and compiles patterns.
func newExcluder(patterns []string) (*excluder, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	x := &excluder{}
	for _, p := range patterns {
		if err := CheckExclude(p); err != nil {
			return nil, err
		}
		rooted := strings.Contains(p, "/")
		p = strings.TrimPrefix(p, "/")
		if rooted {
			x.rooted = append(x.rooted, strings.Split(p, "/"))
		} else {
			x.anywhere = append(x.anywhere, p)
		}
	}
	return x, nil
}

// ErrBadExclude is the error of a pattern CheckExclude refuses.
var ErrBadExclude = errors.New("bad --exclude pattern")

// CheckExclude reports whether p is a pattern Config.Exclude takes: a
// valid path.Match pattern of non-empty components, none "." or "..",
// with at most a leading slash (which roots it).
func CheckExclude(p string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrBadExclude, p, why) }
	q := strings.TrimPrefix(p, "/")
	if q == "" {
		return bad("empty")
	}
	for _, c := range strings.Split(q, "/") {
		switch c {
		case "":
			return bad("an empty path component (a doubled or trailing slash)")
		case ".", "..":
			return bad(fmt.Sprintf("a %q component", c))
		}
		if _, err := path.Match(c, ""); err != nil {
			return bad("unbalanced [ ] or a trailing backslash")
		}
	}
	return nil
}

// excluded reports whether the live-relative path rel is left out of
// history; a nil x excludes nothing.
func (x *excluder) excluded(rel string) bool {
	if x == nil || rel == "" {
		return false
	}
	comps := strings.Split(rel, "/")
	for _, c := range comps {
		for _, p := range x.anywhere {
			if ok, _ := path.Match(p, c); ok {
				return true
			}
		}
	}
	for _, r := range x.rooted {
		if len(r) > len(comps) {
			continue
		}
		match := true
		for i, p := range r {
			if ok, _ := path.Match(p, comps[i]); !ok {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// leaving returns the redos of the pending files rename ev takes out of
// the patterns: each records the live file unless its newest revision
// holds it (journal_redo.go).
func (r journaled) leaving(ev fs.Rename) []*redo {
	x := r.x
	if x == nil || r.j == nil {
		return nil
	}
	var out []*redo
	add := func(id fs.FileID, rel string) {
		out = append(out, &redo{id: id, gen: r.j.gen(id), path: rel})
	}
	if !ev.Dir {
		if !ev.ID.IsZero() && x.excluded(ev.From) && !x.excluded(ev.To) {
			add(ev.ID, ev.To)
		}
		if ev.Exchange && !ev.Replaced.IsZero() && x.excluded(ev.To) && !x.excluded(ev.From) {
			add(ev.Replaced, ev.From)
		}
		return out
	}
	// The journal's hints follow the rename already (journal.renamed): a
	// pending file under To was under From, and after an exchange one
	// under From was under To.
	for id, p := range r.j.entries() {
		if rest, ok := strings.CutPrefix(p.path, ev.To+"/"); ok && x.excluded(ev.From+"/"+rest) && !x.excluded(p.path) {
			add(id, p.path)
		} else if rest, ok := strings.CutPrefix(p.path, ev.From+"/"); ok && ev.Exchange && x.excluded(ev.To+"/"+rest) && !x.excluded(p.path) {
			add(id, p.path)
		}
	}
	return out
}
