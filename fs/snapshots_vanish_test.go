package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// openRevs is a Revisions that stores nothing: it opens the file as the
// mount's does, and says ErrVanished when it is gone or not a file.
type openRevs struct{ opened []string }

func (r *openRevs) Revision(ctx context.Context, id FileID, path string, size int64) (index.RevID, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return index.RevID{}, 0, fmt.Errorf("%w: %w", ErrVanished, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return index.RevID{}, 0, fmt.Errorf("%w: not a file", ErrVanished)
	}
	r.opened = append(r.opened, filepath.Base(path))
	return index.RevID{}, size, nil
}

// TestBuildSkipsVanishedNodes removes or replaces nodes between the
// build's stat of them and what it does next (list xattrs, read a
// directory, a link, a file's content): a removed node is left out, a
// replaced one is described as it is now, and the build succeeds. (The
// build failed with ENOENT: "snapshot: /churna.0.tmp: open ...: no such
// file or directory".) Their directory is listed again at the next build.
func TestBuildSkipsVanishedNodes(t *testing.T) {
	live := t.TempDir()
	mk := func(rel string) { must(t, os.MkdirAll(filepath.Join(live, rel), 0o755)) }
	wr := func(rel string) { must(t, os.WriteFile(filepath.Join(live, rel), []byte(rel), 0o644)) }
	ln := func(rel string) { must(t, os.Symlink("target", filepath.Join(live, rel))) }
	mk("gone_dir/sub")
	wr("gone_dir/sub/f")
	wr("gone_file")
	ln("gone_link")
	mk("dir_to_file")
	wr("dir_to_file/f")
	wr("file_to_dir")
	ln("link_to_file")
	wr("file_to_fifo")
	mk("kept/inner")
	wr("kept/inner/gone_deep")
	wr("kept/stays")
	changes := map[string]func(path string){
		"gone_dir":  func(p string) { must(t, os.RemoveAll(p)) },
		"gone_file": func(p string) { must(t, os.Remove(p)) },
		"gone_link": func(p string) { must(t, os.Remove(p)) },
		"dir_to_file": func(p string) {
			must(t, os.RemoveAll(p))
			must(t, os.WriteFile(p, []byte("now a file"), 0o644))
		},
		"file_to_dir":          func(p string) { must(t, os.Remove(p)); must(t, os.Mkdir(p, 0o755)) },
		"link_to_file":         func(p string) { must(t, os.Remove(p)); must(t, os.WriteFile(p, nil, 0o644)) },
		"file_to_fifo":         func(p string) { must(t, os.Remove(p)); must(t, syscall.Mkfifo(p, 0o644)) },
		"kept/inner/gone_deep": func(p string) { must(t, os.Remove(p)) },
	}
	b := NewTreeBuilder(live)
	b.testAfterStat = func(rel string) {
		if f := changes[rel]; f != nil {
			delete(changes, rel) // once
			f(filepath.Join(live, rel))
		}
	}
	revs := &openRevs{}
	var built *Built
	err := b.Build(context.Background(), revs, nil, func(out *Built) error { built = out; return nil })
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if len(changes) != 0 {
		t.Fatalf("the hook never ran for %v", changes)
	}
	root := built.Decoded[built.Root.Tree]
	got := map[string]string{}
	for _, e := range root.Entries {
		switch {
		case e.IsDir():
			got[e.Name] = "dir"
		case e.IsSymlink():
			got[e.Name] = "link"
		case e.IsRegular():
			got[e.Name] = "file"
		default:
			got[e.Name] = fmt.Sprintf("mode %o", e.Mode)
		}
	}
	want := map[string]string{"dir_to_file": "file", "file_to_dir": "dir", "link_to_file": "file",
		"file_to_fifo": "mode 10644", "kept": "dir"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("root entries %v, want %v", got, want)
	}
	kept := built.Decoded[root.Entries[3].Tree] // dir_to_file file_to_dir file_to_fifo kept
	inner := built.Decoded[kept.Entries[0].Tree]
	if len(kept.Entries) != 2 || len(inner.Entries) != 0 {
		t.Fatalf("kept: %d entries, kept/inner %d; want stays and an empty inner", len(kept.Entries), len(inner.Entries))
	}
	if fmt.Sprint(revs.opened) != "[dir_to_file stays link_to_file]" {
		t.Fatalf("read %v", revs.opened)
	}
	// The directories that lost a node are listed again at the next build.
	b.testAfterStat = nil
	err = b.Build(context.Background(), revs, nil, func(out *Built) error { built = out; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if built.Stats.Listed != 2 { // the root, kept/inner (kept only lies above it)
		t.Fatalf("second build: %+v, want the root and kept/inner listed again", built.Stats)
	}
}

// TestBuildReportsOtherErrors: a failure that is not a vanished node
// still fails the build.
func TestBuildReportsOtherErrors(t *testing.T) {
	live := t.TempDir()
	must(t, os.WriteFile(filepath.Join(live, "f"), nil, 0o644))
	b := NewTreeBuilder(live)
	bad := errors.New("store broken")
	err := b.Build(context.Background(), failRevs{bad}, nil, func(*Built) error { return nil })
	if !errors.Is(err, bad) {
		t.Fatalf("build: %v, want %v", err, bad)
	}
}

type failRevs struct{ err error }

func (r failRevs) Revision(context.Context, FileID, string, int64) (index.RevID, int64, error) {
	return index.RevID{}, 0, r.err
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
