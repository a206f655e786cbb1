package mount

import "syscall"

// raiseFileLimit raises the soft limit on open descriptors to the hard
// limit. The live tree keeps a descriptor per open handle and per change
// waiting to be recorded (up to a cap, see fs.Change.Open), and a default
// soft limit of 1024 is soon reached by a build or an untar in the mount.
// (Go's runtime does the same at start since 1.19; a mount embedded in a
// program that lowered it gets it back here.)
func raiseFileLimit() {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil || lim.Cur >= lim.Max {
		return
	}
	lim.Cur = lim.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}
