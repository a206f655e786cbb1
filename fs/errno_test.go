package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
)

type otherCorrupt struct{}

func (otherCorrupt) Error() string { return "segment checksum mismatch" }
func (otherCorrupt) Corrupt() bool { return true }

func TestToErrno(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("file 7 rev 3: %w", fmt.Errorf("read: %w", err)) }
	tests := []struct {
		name string
		err  error
		want syscall.Errno
		logs bool
	}{
		{"nil", nil, 0, false},
		{"not found", wrap(fs.ErrNotExist), syscall.ENOENT, false},
		{"path error", wrap(&os.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}), syscall.ENOENT, false},
		{"read-only", wrap(ErrReadOnly), syscall.EROFS, false},
		{"cancelled", wrap(context.Canceled), syscall.EINTR, false},
		{"deadline", wrap(context.DeadlineExceeded), syscall.EINTR, false},
		{"corrupt", wrap(ErrCorrupt), syscall.EIO, true},
		{"corrupt of another package", wrap(otherCorrupt{}), syscall.EIO, true},
		{"errno passes through", wrap(syscall.ENOSPC), syscall.ENOSPC, false},
		{"exists", wrap(fs.ErrExist), syscall.EEXIST, false},
		{"other", wrap(errors.New("disk on fire")), syscall.EIO, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			if got := toErrno(log, "read", tt.err); got != tt.want {
				t.Fatalf("toErrno(%v) = %v, want %v", tt.err, got, tt.want)
			}
			lines := strings.Count(buf.String(), "\n")
			if tt.logs && lines != 1 || !tt.logs && lines != 0 {
				t.Fatalf("%d log lines, want logging=%v: %q", lines, tt.logs, buf.String())
			}
		})
	}
}
