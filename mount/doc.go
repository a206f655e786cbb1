// Package mount owns the life of a deltafs mount: checking the mount
// point, opening (or creating) and locking the store, mounting the live
// tree of package fs, and shutting down in order; and the Recorder that
// turns what the live tree reports into revisions in the store.
//
// Lifecycle (Run): check the mount point (exists, is an empty directory,
// does not overlap the store either way) and /dev/fuse, before anything
// is created -> open the store with objstore.Open, which takes the store
// lock (a second mount of the same store fails with an error naming the
// holder) and creates the store when new -> create STORE/live -> mount
// (mount(2) directly when root, fusermount3 otherwise; the kernel checks
// permissions and POSIX ACLs on every mount, see fs.Options; ReadOnly
// mounts "ro") -> Ready -> wait for the context (SIGINT/SIGTERM in the
// CLI) or an outside unmount -> unmount, lazily detaching a busy mount
// (Config.Busy first hears which processes hold it, holders.go; closing
// Config.GiveUp ends the wait) -> wait for the server to stop, so that
// every close has been reported ->
// record everything pending -> close the live tree and the store, which
// releases the lock; the whole shutdown has a deadline. It stays in the
// foreground.
//
// Store layout added by this package: live/ (current content of every
// file, served by fs), live.ids (the map from the live tree's FileIDs
// to the store's, see storesink.go), pending.journal (the files whose
// live content may be newer than their history, see below) and, while
// mounted, control.sock (the control socket of the CLI, see control.go).
//
// Snapshots (snapshot.go): mkdir in .snapshots, the control socket and
// the automatic snapshots (--snapshot-every, --keep-snapshots) all go
// through one snapshotter: it waits until everything reported is
// recorded, takes the recorder's sink and freezes the live tree (fs's
// FS.Freeze: the operations that change it through the mount wait, so
// the snapshot is of one instant, crash-consistent, but for the writes
// of passthrough writers, which never reach the mount: see fs/freeze.go),
// lets fs's TreeBuilder re-serialise the directories that changed (files
// still open for writing are taken as they are: their live content
// becomes a revision if none holds it, appended to the store while
// frozen and committed after), thaws the live tree, and records the
// snapshot in the store. Offline (no mount), the same snapshotter works
// on the store directly, walking the whole live tree. The mount's
// source in /proc/self/mountinfo is the store directory, so that the
// CLI finds the store (and its control socket) from any path inside the
// mount.
//
// History (history_view.go): .history/PATH/ lists the revisions of the
// store file that the live file at PATH maps to (its live identity, then
// live.ids), after the recorder has recorded that file's changes closed
// before the call (Recorder.Flush); it reads that file's index rows only.
// "deltafs log", "cat" and "restore" (history.go) resolve a path the same
// way (history_ids.go; offline from live.ids) and are served on the
// control socket by the historian, or by the Offline store directly: log
// adds the snapshots holding each revision (the file's own hold rows,
// objstore.EachHolder, walked beside its revisions with no per-row
// allocation: history_held.go), cat sends the revision's bytes raw after its answer, and a
// restore in a mount writes the old content through the mount point and
// fsyncs, so that the live tree, its caches and the recorder see an
// ordinary write; the sink records it as a fulltext put whose second
// parent is the revision restored (usually a dedup of it). A path with
// no live file names the newest deleted file whose last path it is, and
// a restore makes it again, bound to the same store file
// (history_deleted.go). Names cross the socket as ByteStrings, byte for
// byte (wire_bytes.go).
//
// Recording: fs reports a Change when the last writable handle of a file
// closes (or on fsync); the Recorder queues it and one background
// goroutine hands it to a Sink, so close never waits. The store sink
// reads the live file through the Change (fs.Change.Open) and Puts it
// (the store chooses the delta base: the file's previous revision, a
// copy source as second parent and hint). A backlog of changes of
// distinct files is recorded in windows whose puts run at once and so
// share the store's group commits (storesink_batch.go): an untar costs
// a commit per window, not per file, and a window of small new files
// is put on threads of lower CPU priority while nobody waits for the
// recording, so that the requests of the program making them come
// first on the same cores. fsync reports of
// one file are coalesced to at most one revision per FsyncInterval
// while its writer keeps it open (its last close releases the held
// change: a closed change is a revision of its own), and
// a new file's first revision is held briefly so that an editor's
// atomic save (write a temp file, rename it over the original) continues
// the original's history as a small delta. Sync, and so unmount, waits
// for all of it. A writer that reopens a file (or truncates it) while
// its previous change is queued, or writes again through a handle it
// kept through an fsync (fs waits at the first change of each session),
// waits only until the sink has read that change from the live file
// (Recorder.WaitRead), not until it is stored:
// a file rewritten in a loop is written while its previous revision is
// put and committed.
//
// The dirty ranges of a Change become a copy/insert delta against the
// file's previous revision (delta.EncodeWrites, reading only the written
// bytes), carried into Put, which verifies it and keeps it unless its own
// is smaller; unless they cover most of the file (a rewrite, e.g. after
// O_TRUNC): then the whole file is diffed against the previous text, which
// stores only what changed. Otherwise the sink hands the live file to the
// store (objstore.Store.PutFrom), which reads it whole, or streams a big
// new file's first revision into its segment while reading it (M1: the
// time from fsync to a durable revision of a 1 GiB new file); files over
// 4 GiB are not recorded.
//
// A snapshot records what the recorder has not (a file open for
// writing, one changed offline) through liveRevs (snapshot_revs.go): the
// same streamed PutFrom, from a section of the live file exactly as long
// as the size the tree entry took from its stat (a writer appending
// meanwhile does not make the revision longer than its entry; a file
// that shrank gives a shorter revision, whose size the entry takes), and
// the store file is named by its live-relative path. A file over 4 GiB
// is not read: the snapshot lists it with its size and no revision, and
// its open inside the snapshot fails with EFBIG. A file's newest revision
// is named without reading the file when its stat says it did not change
// since (the ctime well before the revision's time), or when the change
// was a moment before it and the pending journal has no entry for the
// file (every change made through the mount is in a durable revision):
// a snapshot right after a small write into a big file costs the write.
// A file removed or replaced before it is opened gives fs.ErrVanished,
// and the build leaves it out or describes it again.
//
// # Crash safety
//
// Recording runs behind the live tree, so a mount killed (SIGKILL, a
// crash) between a write and its recording leaves a live file newer
// than its history. The pending journal (journal.go) names those files:
// fs calls Recorder.Dirtied once per write session, before the
// session's first change reaches the live file (the kernel keeps a
// write that reached the live file even if we die, so the entry must
// come first); the journal appends a record then, and a clean record
// once the sink has durably recorded a change of the file and no
// Dirtied came after that change's report (a counter per file, stamped
// on each report, so that a change reported while the previous one is
// being recorded keeps the file pending; a Dirtied taken back, by a
// passthrough writer that changed nothing, fs.Undirtier, takes its
// count back). The next mount queues a redo
// of every pending file on the Recorder before the mount serves
// (journal_redo.go): it finds the live file by its path hint or, if the
// hint is stale, by one walk of the live tree reading FileIDs; compares
// it with the file's newest revision (the same size and a ctime well
// before the revision's time, taken just before its content was read:
// unchanged, not read; else the size and the
// content hash in the index; after a restart the content always, since
// the disk's ctime may then be older than its data: see mountedFile in
// unclean.go); and records it when they differ. A file gone from the
// live tree is dropped. The redo runs in the Recorder's goroutine while
// the mount serves; Sync (snapshots, unmount) waits for all of it, and
// Wait and Flush of a file (its fsync, its history view) for that
// file's redo; so do (fs.RedoWaiter) the first writer of a file while
// any redo is queued, and an unlink of a file or a rename over it while
// its own redo is, which would otherwise change or remove what the redo
// is there to read. A clean unmount leaves the journal empty, but for the
// files of excluded paths (exclude.go), which stay pending: their
// content is in no revision, so snapshots read them and a rename out of
// the patterns redoes them. A read-only mount neither journals nor
// redoes: the next writable mount does.
//
// Why a log rather than one file per pending FileID or badger keys: one
// write(2) of ~60 bytes per session on the write path, against a
// create and an unlink of a directory entry (the store's badger belongs
// to objstore, and its commits are fsynced group commits). The journal
// is not fsynced per session: against a killed process, the page cache
// keeps every write(2) in order. Against a power cut, a recent entry
// may be lost while the kernel wrote the live file back; fsync narrows
// that: an fsync whose change the Recorder holds back (one revision per
// interval, a new file's grace) fsyncs the journal before it returns,
// and an fsync it does not hold back returns after the revision is
// durable. Revisions themselves are durable when Put returns. What is
// left (a power cut inside an fsync, after the live file's fsync and
// before its revision is durable; the kernel's writeback of a file
// never fsynced: a live content newer than its history with no durable
// entry to say so) is found after the cut: a mount that did not end
// cleanly leaves the store marked, and the next one checks every live
// file against its newest revision (unclean.go). An fsync of the
// journal before the live file's at every fsync that ends a write
// session would have closed the first case only, on the write path.
//
// Names and links: the sink applies renames to the index only for an
// atomic save (a file with no history yet, or a young one, renamed over
// one that has one continues that history, and the replaced inode, which
// a hard link or a descriptor may keep alive, loses it: see
// storesink_rename.go), or for a new file made at a path another file
// with a history left lately (renamed away, unlinked: Vim's default save,
// git checkout), which the Recorder remembers for a minute and marks on
// the new file's change (vacated.go); links and removes change nothing
// there.
// So the journal notes a pending file's new path (a hint) and, for a
// rename over another file, which file it replaced; the redo continues
// the replaced file's history when the pending file has none. The id
// map (live.ids) is appended and fsynced before a revision that needs it
// is put (a window of new files shares one fsync), so after a killed
// process or a power cut it holds every identity a revision refers to:
// a live file keeps its history, and gc never takes a live file's store
// file for a deleted file's. A pending file the map lost has no
// revision, and the redo gives it a new store identity.
// Files whose live filesystem keeps no FileID (no user xattrs) are not
// journaled.
package mount
