package fs

// OpenHandles returns how many handles of the live file at rel (below
// the root) are open, as the node counts them: a test waits for it to
// drop to learn that the kernel sent the releases of closed files.
func (f *FS) OpenHandles(rel string) int {
	n := f.liveNode(rel)
	if n == nil {
		return 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cached + n.passed
}
