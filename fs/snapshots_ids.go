package fs

import "strings"

// checkIDGiven is called after Revisions.Revision of the live regular
// file at path (rel in the live tree), which had no FileID: if the
// Revisions gave it one (the mount does, so that the file's later
// revisions continue one history), the xattr moved the file's ctime
// behind the kernel's back, and the live tree, if one is attached
// (attachIDs), invalidates the kernel's attributes of its node. Files
// made through the mount have their ID from the start (Create, Mknod);
// this is for a store's older files.
func (b *TreeBuilder) checkIDGiven(path, rel string) {
	b.mu.Lock()
	given := b.idGiven
	b.mu.Unlock()
	if given != nil && !readID(path).IsZero() {
		given(rel)
	}
}

// attachIDs makes the builder call given with the live path of every
// file that a build gave a FileID.
func (b *TreeBuilder) attachIDs(given func(rel string)) {
	b.mu.Lock()
	b.idGiven = given
	b.mu.Unlock()
}

// idGiven invalidates the kernel's attributes of the live file at rel
// if the kernel knows it: a snapshot gave it its FileID. The node is
// found by name from the root (go-fuse knows every name the kernel
// looked up); a file the kernel knows by another hard link only is
// missed, and shows its old ctime until its attributes expire.
func (f *FS) idGiven(rel string) {
	in := f.root.EmbeddedInode()
	for _, name := range strings.Split(rel, "/") {
		if in = in.GetChild(name); in == nil {
			return
		}
	}
	_ = in.NotifyContent(-1, 0) // attributes only
}
