package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/spf13/cobra"
)

// offlineLogger is the logger of a command that works on a store itself
// (repack, gc, and the commands that open an unmounted store): its
// warnings are one plain line on stderr each, as its errors are,
//
//	deltafs: repack: memory limit below one job's texts; using window 1 (limit 1, largest 8388608)
//
// with no time or level. The mount's own log is a daemon's, with times
// and levels (runMount).
func offlineLogger(cmd *cobra.Command) *slog.Logger {
	prefix := "deltafs: "
	if cmd.HasParent() {
		prefix += strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ") + ": "
	}
	return slog.New(&plainHandler{w: cmd.ErrOrStderr(), mu: new(sync.Mutex), prefix: prefix})
}

// plainHandler writes records of level Warn and above as "PREFIX message
// (key value, ...)", one line each.
type plainHandler struct {
	w      io.Writer
	mu     *sync.Mutex // shared by the handlers derived from one: one line at a time
	prefix string
	attrs  []slog.Attr // from WithAttrs, keys already qualified by their groups
	group  string      // "g." from WithGroup
}

func (h *plainHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *plainHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(h.prefix)
	b.WriteString(oneLine(r.Message))
	attrs := append([]slog.Attr{}, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, qualify(h.group, a)...)
		return true
	})
	for i, a := range attrs {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", a.Key, oneLine(a.Value.String()))
	}
	if len(attrs) > 0 {
		b.WriteString(")")
	}
	b.WriteString("\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *plainHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := *h
	h2.attrs = append([]slog.Attr{}, h.attrs...)
	for _, a := range as {
		h2.attrs = append(h2.attrs, qualify(h.group, a)...)
	}
	return &h2
}

func (h *plainHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.group += name + "."
	return &h2
}

// qualify resolves a and flattens a group into attributes whose keys
// name it: g.key. Empty attributes are dropped, as slog's handlers do.
func qualify(group string, a slog.Attr) []slog.Attr {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return nil
	}
	if a.Value.Kind() != slog.KindGroup {
		a.Key = group + a.Key
		return []slog.Attr{a}
	}
	if a.Key != "" {
		group += a.Key + "."
	}
	var out []slog.Attr
	for _, g := range a.Value.Group() {
		out = append(out, qualify(group, g)...)
	}
	return out
}

// oneLine folds whitespace runs, newlines included, into one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
