package mount

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

// Connect finds the store that path names (a store directory, or any path
// inside a deltafs mount) and returns a Controller for it: the running
// mount's, through its control socket, or, when the store is not
// mounted, the store opened directly (read-only if readOnly). close
// releases it.
func Connect(ctx context.Context, path string, readOnly bool, log *slog.Logger) (c Controller, close func() error, err error) {
	store, err := StoreOf(path)
	if err != nil {
		return nil, nil, err
	}
	// A connection is the whole probe: asking the mount for anything
	// (the snapshot list was asked once) costs it work for every command.
	if conn, err := dial(ctx, store); !errors.Is(err, ErrNotMounted) {
		if err != nil {
			return nil, nil, err
		}
		conn.Close()
		return remote{dir: store}, func() error { return nil }, nil
	}
	o, err := OpenOffline(store, readOnly, log)
	if err != nil {
		return nil, nil, err
	}
	return o.Controller(), o.Close, nil
}

// StoreOf returns the store directory path names: path itself if it
// holds a store, else the store of the deltafs mount that contains path
// (the mount's source in /proc/self/mountinfo). A path that does not
// exist is no store either: both fail matching ErrNoStore.
func StoreOf(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if abs, err = filepath.EvalSymlinks(abs); errors.Is(err, fs.ErrNotExist) {
		return "", missing(path)
	} else if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	_, err = os.Lstat(filepath.Join(abs, "FORMAT"))
	if err == nil {
		return abs, nil
	}
	mnt, src := containingMount(abs)
	if mnt == "" {
		if errors.Is(err, fs.ErrPermission) {
			// A directory this user cannot look into (a store is 0700):
			// say so, not that it holds no store.
			return "", fmt.Errorf("%s: %w", abs, fs.ErrPermission)
		}
		return "", fmt.Errorf("%s: %w", abs, ErrNoStore)
	}
	if err := mountStore(abs, mnt, src); err != nil {
		return "", err
	}
	return src, nil
}

// mountStore checks that src, the source of the deltafs mount on mnt
// that holds abs, is a store this user may open.
func mountStore(abs, mnt, src string) error {
	if !filepath.IsAbs(src) {
		return fmt.Errorf("%s: the deltafs mount on %s does not name its store", abs, mnt)
	}
	if _, err := os.Lstat(filepath.Join(src, "FORMAT")); errors.Is(err, fs.ErrPermission) {
		// Another user's mount (--allow-other lets them in): its store
		// is 0700.
		return fmt.Errorf("%s: the store %s of the deltafs mount on %s: %w", abs, src, mnt, fs.ErrPermission)
	} else if err != nil {
		return fmt.Errorf("%s: the deltafs mount on %s does not name its store", abs, mnt)
	}
	return nil
}

// containingMount returns the deepest deltafs mount point holding abs and
// that mount's source.
func containingMount(abs string) (mnt, src string) {
	for _, m := range mounts(fsType) {
		if m.holds(abs) && len(m.point) > len(mnt) {
			mnt, src = m.point, m.source
		}
	}
	return mnt, src
}

// remote is the Controller of a running mount, reached through its
// control socket.
type remote struct{ dir string }

func (r remote) call(ctx context.Context, req Request) (Response, error) {
	return Call(ctx, r.dir, req)
}

func snapOf(i SnapshotInfo) index.Snapshot {
	return index.Snapshot{ID: index.SnapshotID(i.ID), Name: string(i.Name), Time: i.Time.UnixNano()}
}

func (r remote) CreateSnapshot(ctx context.Context, name string) (index.Snapshot, error) {
	resp, err := r.call(ctx, Request{Op: "create", Name: ByteString(name)})
	if err != nil {
		return index.Snapshot{}, err
	}
	if resp.Snapshot == nil {
		return index.Snapshot{}, errEmpty
	}
	return snapOf(*resp.Snapshot), nil
}

func (r remote) ListSnapshots(ctx context.Context) ([]index.Snapshot, error) {
	resp, err := r.call(ctx, Request{Op: "list"})
	out := make([]index.Snapshot, len(resp.Snapshots))
	for i, s := range resp.Snapshots {
		out[i] = snapOf(s)
	}
	return out, err
}

func (r remote) DeleteSnapshot(ctx context.Context, name string) error {
	_, err := r.call(ctx, Request{Op: "delete", Name: ByteString(name)})
	return err
}

func (r remote) RenameSnapshot(ctx context.Context, from, to string) error {
	_, err := r.call(ctx, Request{Op: "rename", Name: ByteString(from), To: ByteString(to)})
	return err
}

func (r remote) Stats(ctx context.Context) (Stats, error) {
	resp, err := r.call(ctx, Request{Op: "stats"})
	if err != nil {
		return Stats{}, err
	}
	if resp.Stats == nil {
		return Stats{}, errEmpty
	}
	return *resp.Stats, nil
}

func (r remote) Log(ctx context.Context, t Target) (FileLog, error) {
	resp, data, err := callData(ctx, r.dir, Request{Op: "log", Path: ByteString(t.Path), File: t.File, Rows: true})
	if err != nil {
		return FileLog{}, err
	}
	if resp.Log == nil {
		return FileLog{}, errEmpty
	}
	if resp.DataBytes > 0 { // else a mount that answers in JSON only
		if resp.Log.Revisions, err = readRows(data); err != nil {
			return FileLog{}, fmt.Errorf("control socket of %s: %w", r.dir, err)
		}
	}
	return *resp.Log, nil
}

func (r remote) Cat(ctx context.Context, t Target, spec RevSpec) (FileRev, Text, error) {
	resp, text, err := callText(ctx, r.dir, Request{Op: "cat", Path: ByteString(t.Path), File: t.File, Spec: spec})
	if err != nil {
		return FileRev{}, nil, err
	}
	out, err := fileRevOf(resp)
	if err != nil {
		if text != nil {
			text.Close()
		}
		return out, nil, err
	}
	if text == nil { // an empty revision
		return out, &revText{}, nil
	}
	return out, text, nil
}

func (r remote) Restore(ctx context.Context, t Target, rev *uint32) (FileRev, error) {
	resp, err := r.call(ctx, Request{Op: "restore", Path: ByteString(t.Path), File: t.File, Spec: RevSpec{Rev: rev}})
	if err != nil {
		return FileRev{}, err
	}
	return fileRevOf(resp)
}

// fileRevOf is the FileRev of cat's or restore's answer; a mount of an
// older deltafs sends no file.
func fileRevOf(resp Response) (FileRev, error) {
	if resp.Revision == nil {
		return FileRev{}, errEmpty
	}
	out := FileRev{Revision: *resp.Revision}
	if resp.File != nil {
		out.FileInfo = *resp.File
	}
	return out, nil
}

func (r remote) Deleted(ctx context.Context, dir string) ([]DeletedFile, error) {
	resp, err := r.call(ctx, Request{Op: "deleted", Path: ByteString(dir)})
	return resp.Deleted, err // none: omitted
}

var errEmpty = errors.New("control socket: empty answer")
