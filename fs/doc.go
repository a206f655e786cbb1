// Package fs serves the live tree of a deltafs mount: a go-fuse node tree
// over a plain directory (the store's live/ directory) that holds the
// current content of every file, served loopback-style.
//
// It owns: every POSIX operation on the live tree; the reserved
// .snapshots and .history names at the root (they always appear as
// directories, and no user may create, remove or rename one there); the
// snapshot view under .snapshots (read-only directories built from the
// store's trees, see snapshots_view.go, over the Snapshots interface the
// mount implements); the history view under .history (a read-only mirror
// of the live directories where each regular file is a directory of its
// revisions, see history_dir.go, over the History interface the mount
// implements);
// building snapshot trees from the live directory with dirty tracking,
// so that a snapshot re-serialises only the directories that changed
// (TreeBuilder, snapshots_build.go and snapshots_hooks.go; a node
// removed or replaced under the walk is left out or described again,
// ErrVanished, never failing the build); the identity
// of live files (FileID, kept in
// the xattr user.deltafs.id of the live file, hidden from users); and
// telling a Recorder what changed.
//
// It never reads or writes the revision store (it does not import
// objstore): history is the Recorder's business, and the Recorder must
// work in the background, so that close stays fast.
//
// # I/O modes
//
// Read-only opens use FUSE passthrough: the kernel reads the live file
// itself, at close to native speed. So does the writable open of Create
// and of an open with O_TRUNC (the mount asks for CAP_ATOMIC_O_TRUNC, so
// the flag reaches Open instead of a SETATTR after a plain open):
// the change of a file started over is recorded whole anyway (no
// previous revision, or one diffed against the new text, see package
// mount), so its written ranges are worth nothing and its writes need
// not cross the server. Its change is reported Whole (ranges unknown,
// detected by size and mtime), and Dirtied is called before the open
// returns. Other writable opens use the kernel's cached I/O mode, so
// that every write reaches the file handle, which adds the written range
// to the file's session (a coalesced set of byte ranges plus the
// smallest truncation). The kernel refuses to mix the two modes on one
// inode, so a read-only open made while a cached writer is open uses the
// cached mode too (and so does a Create then), and any writable open
// made while a passthrough handle is open must use passthrough: it is
// Whole as well. A writer of a big file opened just after the last such
// handle was closed waits briefly for its release instead
// (iomode_wait.go): Whole would make each of its recordings read the
// whole file.
//
// The price of the rule: a file created new and then kept open for
// in-place writes with many fsyncs (a database created fresh, a log
// appended and synced line by line) is Whole at every fsync, and each
// recorded fsync reads and diffs the whole file, until every handle of
// it is closed and it is opened again (then in the cached mode, with
// ranges).
//
// # What a write costs, and the kernel options that could lower it
//
// A write through a cached handle is one FUSE round trip (WRITE) and a
// pwrite of the live file. The loopback pays one round trip too (a
// passthrough write makes the kernel ask for security.capability first),
// so the two run close; we pay the recording on top.
//   - handle_killpriv_v2 is on (options.go, killpriv.go): without it the
//     kernel sends a GETXATTR security.capability before every WRITE,
//     two round trips per write. We drop setuid and setgid ourselves.
//   - The writeback cache (CAP_WRITEBACK_CACHE) is off: it would batch
//     small writes in the page cache and hand them to us later, still
//     with their ranges, but the kernel turns FUSE passthrough off for
//     a connection that negotiates it (passthrough_test.go fails with
//     it: every read goes through the server), and reads at passthrough
//     speed are worth more. It would also hand mtime, ctime and size to
//     the kernel, and would make "before the change reaches the live
//     file" (Dirtied) mean the first WRITE of dirty pages, not the
//     write(2).
//   - A passthrough writer whose ranges we would still learn: the kernel
//     reports nothing about passthrough writes (no event carries a
//     range; fanotify and inotify say only that a file changed), and
//     the live directory's file system (ext4 here) has no reflinks whose
//     extents could be compared after the fact. Such a writer's change
//     is Whole, and recording it reads the whole file.
//
// # Sessions and reports
//
// A file's session starts with its first writable open and ends when its
// last writable handle is released (the kernel sends RELEASE after
// close(2) returns, so a writable open made right after a close waits a
// little for that release: `echo a > f; echo b > f` is two revisions,
// not one session); if the content changed, the
// Recorder's Changed gets one Change with the dirty ranges, the prefix of
// the previous revision that survives (Kept) and the size. fsync reports
// the changes so far and starts a new session. truncate(2) by path with
// no writer open is reported at once. Reads, chmod, chown, utimens,
// xattrs and renames report no content change. Renames, unlinks, rmdirs
// and links are reported by their own methods, with FileIDs, so that a
// recorder can carry history across "mv a b" and an editor's atomic
// save. Before a session's first change reaches the live file (a write,
// a truncation, an allocation, a copy into it, or the open of a
// passthrough writer, whose writes we never see), the Recorder's Dirtied
// is called, once per session (dirtying.go): a recorder journals the
// file there, so that a change that dies with the mount can be redone.
// A passthrough writer's session is dirtied at its open (or at the
// fsync that started it) without a change seen; if it ends with none
// (write, fsync, close: an editor's save), its Dirtied is taken back
// (Undirtier), and an fsync with nothing new starts no session.
//
// Each Change carries the live file reopened read-only (Content), so a
// recorder reads the right inode after a rename or unlink (with
// Config.ReadSmallNew, a small new file's last report carries its bytes
// instead, read at the release: Change.Data, capture.go); past
// maxContentFds pending changes it carries the file's handle instead
// (name_to_handle_at(2), no descriptor), which Change.Open resolves when
// the recorder gets to it (by path and FileID where handles need
// privileges we lack). A handle dies with the file's last name, so an
// unlink or rename that removes the last name of such a file first opens
// it for its pending changes (keepRemoved; past maxKeptFds of those it
// waits until the recorder has read the file instead). A recorder
// reads the live file later, in the background; so that it never reads a
// later version, a writable open or a truncate of a file whose previous
// change is still queued waits for that recording (Recorder.Wait), and
// fsync waits for its own report to be recorded (or, with nothing new
// to report, for the file's last report: an fsync retried after EINTR).
// A recorder may hold a
// change back on purpose (fsync coalescing); Wait does not wait for those:
// the data is durable in the live file, and the held change merges with
// the next.
//
// # Snapshots of one instant
//
// Every operation that changes the live tree holds the live tree's
// freeze shared while it changes the live directory and notes what it
// did; a snapshot holds it exclusively while it reads the live tree
// (FS.Freeze), so a snapshot falls between operations and is
// crash-consistent. The writes of a passthrough writer never reach us
// and are not held. The rules that keep the freeze from deadlocking
// (no operation waits, for the recorder or anything else, while it holds
// it) are in freeze.go.
//
// # Kernel caching
//
// The kernel keeps the live tree's entries, negative entries and
// attributes for liveTimeout (an hour), the .snapshots and .history
// views' for a second: every change to the live directory comes through
// the kernel, which keeps its cache right by itself, and what the
// server changes on its own it reports (cache.go). READDIRPLUS of a
// live directory sends plain entries for the children the kernel holds.
// A file's listing of revisions under .history is kept by the kernel
// too (FOPEN_CACHE_DIR), and dropped by the server when it may be older
// than the listing an open asks for (history_cache.go).
//
// # Errors
//
// One function, toErrno in errno.go, turns errors of our own making into
// errnos (not found ENOENT, read-only EROFS, cancelled EINTR, corrupt EIO
// with a log line, anything else EIO with a log line); go-fuse's own
// conversion does not unwrap %w chains.
//
// O_TMPFILE is refused (EOPNOTSUPP): a nameless file could later be
// linked into the tree through a descriptor.
package fs
