package testutil

import (
	"runtime"
	"syscall"
)

// Nobody is the uid and gid of the unprivileged user tests act as.
const Nobody = 65534

// AsNobody runs op on a thread whose effective uid and gid are nobody's
// (no effective capabilities, so no CAP_FSETID nor CAP_DAC_OVERRIDE).
// Only that thread changes credentials (raw setresuid, not the
// process-wide syscall.Setresuid), and it ends with its goroutine.
func AsNobody(op func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with us
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, ^uintptr(0), Nobody, ^uintptr(0)); e != 0 {
			done <- e
			return
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, ^uintptr(0), Nobody, ^uintptr(0)); e != 0 {
			done <- e
			return
		}
		done <- op()
	}()
	return <-done
}
