package index

import "os"

// SyncDir fsyncs the directory dir, so that the names made, renamed or
// removed in it survive a power cut: an fsync of a file makes its data
// durable, not its name. The index needs it for badger's files
// (powercut.go), the store for its segments and shadows, the mount for
// its journal: it lives here, at the bottom of the imports, for all three.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
