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
// (mount(2) directly when root, fusermount3 otherwise; AllowOther adds
// default_permissions so that the kernel checks permissions; ReadOnly
// mounts "ro") -> Ready -> wait for the context (SIGINT/SIGTERM in the
// CLI) or an outside unmount -> unmount, lazily detaching a busy mount ->
// wait for the server to stop, so that every close has been reported ->
// record everything pending -> close the live tree and the store, which
// releases the lock; the whole shutdown has a deadline. It stays in the
// foreground.
//
// Store layout added by this package: live/ (current content of every
// file, served by fs), live.ids (the map from the live tree's FileIDs
// to the store's, see storesink.go) and, while mounted, control.sock
// (the control socket of the CLI, see control.go).
//
// Snapshots (snapshot.go): mkdir in .snapshots, the control socket and
// the automatic snapshots (--snapshot-every, --keep-snapshots) all go
// through one snapshotter: it waits until everything reported is
// recorded, lets fs's TreeBuilder re-serialise the directories that
// changed (files still open for writing are taken as they are: their
// live content becomes a revision if none holds it), and records the
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
//
// Recording: fs reports a Change when the last writable handle of a file
// closes (or on fsync); the Recorder queues it and one background
// goroutine hands it to a Sink, so close never waits. The store sink
// reads the live file through the descriptor the Change carries and
// Puts it (the store chooses the delta base: the file's previous
// revision, a copy source as second parent and hint). fsync reports of
// one file are coalesced to at most one revision per FsyncInterval, and
// a new file's first revision is held briefly so that an editor's
// atomic save (write a temp file, rename it over the original) continues
// the original's history as a small delta. Sync, and so unmount, waits
// for all of it.
//
// The dirty ranges of a Change become a copy/insert delta against the
// file's previous revision (delta.EncodeWrites, reading only the written
// bytes), carried into Put, which verifies it and keeps it unless its own
// is smaller. Not yet: objstore.Put still takes the whole fulltext, so
// recording reads the whole live file (files over 4 GiB are not
// recorded); and an interrupted recording is not redone from the live
// file at the next mount.
package mount
