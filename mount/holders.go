package mount

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Holder is a process that keeps a mount busy: it has files open in it,
// or its working or root directory, its executable or a mapped file is
// in it.
type Holder struct {
	PID   int
	Name  string // the command name (/proc/PID/comm)
	Files int    // descriptors open on files in the mount
}

func (h Holder) String() string {
	return fmt.Sprintf("%s (pid %d)", h.Name, h.PID)
}

// Holders returns the processes using the mount at mnt (absolute, with
// symlinks resolved), as far as /proc shows them to this user (all of
// them for root), lowest pid first. It only reads links and text in /proc
// and never touches the mount itself; a process leaving meanwhile is
// skipped. Call it before a lazy unmount: once detached, /proc no longer
// shows paths under mnt.
func Holders(mnt string) []Holder {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Holder
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if h, ok := holderOf(pid, mnt); ok {
			out = append(out, h)
		}
	}
	return out
}

// holderOf tells whether process pid uses the mount at mnt.
func holderOf(pid int, mnt string) (Holder, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	h := Holder{PID: pid}
	fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
	for _, fd := range fds {
		if under(readLink(filepath.Join(dir, "fd", fd.Name())), mnt) {
			h.Files++
		}
	}
	used := h.Files > 0
	for _, l := range []string{"cwd", "root", "exe"} {
		used = used || under(readLink(filepath.Join(dir, l)), mnt)
	}
	if !used {
		maps, _ := os.ReadFile(filepath.Join(dir, "maps"))
		used = strings.Contains(string(maps), " "+mnt+"/")
	}
	if !used {
		return Holder{}, false
	}
	comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
	h.Name = strings.TrimSpace(string(comm))
	return h, true
}

func readLink(p string) string {
	s, _ := os.Readlink(p)
	return s
}

// under reports whether path is mnt or inside it.
func under(path, mnt string) bool {
	return path == mnt || strings.HasPrefix(path, mnt+"/")
}

// WithoutSelf returns hs as a message names them, self being the pid of
// the mount's own process (the mount's shutdown: its own; deltafs
// umount: the store lock's). That process holds a file in its
// mount point only while a restore writes the revision it brings back
// through it (named so, not "deltafs (pid N)", which read as the mount
// waiting for itself); with no file open there it is no holder (its
// working directory is the directory under the mount point).
func WithoutSelf(hs []Holder, self int) []Holder {
	out := hs[:0:0]
	for _, h := range hs {
		switch {
		case h.PID != self:
			out = append(out, h)
		case h.Files > 0:
			h.Name = "a deltafs restore"
			out = append(out, h)
		}
	}
	return out
}

// DescribeHolders names the holders for a message: "sleep (pid 12), vim
// (pid 40)", at most four and a count of the others; "" for none.
func DescribeHolders(hs []Holder) string {
	const most = 4
	names := make([]string, 0, most+1)
	for i, h := range hs {
		if i == most {
			names = append(names, fmt.Sprintf("%d more", len(hs)-most))
			break
		}
		names = append(names, h.String())
	}
	return strings.Join(names, ", ")
}

// BusyMount says that a shutdown waits for processes to let go of the
// mount (Config.Busy).
type BusyMount struct {
	MountPoint string
	Holders    []Holder      // as far as /proc shows them; may be empty
	Wait       time.Duration // the longest the shutdown waits
}

// OpenFiles is the number of files the holders have open in the mount.
func (b BusyMount) OpenFiles() int {
	n := 0
	for _, h := range b.Holders {
		n += h.Files
	}
	return n
}
