package main

import (
	"strings"
	"testing"
)

// TestUnknownHelpTopicAndShell: "help" and "completion" with an argument
// they do not know fail as an unknown command does (one line naming it,
// exit 2, nothing on stdout); the known ones still print and succeed.
func TestUnknownHelpTopicAndShell(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "nosuch"}, `deltafs: help: unknown help topic "nosuch"`},
		{[]string{"help", "snapshot", "nosuch"}, `deltafs: help: unknown help topic "snapshot nosuch"`},
		{[]string{"help", "mount", "extra"}, `deltafs: help: unknown help topic "mount extra"`},
		{[]string{"completion", "nosh"}, `deltafs: completion: unknown shell "nosh": give bash, fish, powershell, zsh`},
		{[]string{"completion", "bash", "extra"}, "deltafs: completion bash: expects 0 arguments, got 1"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			requireOneErrorLine(t, runBinary(t, nil, tt.args...), exitUsage, tt.want)
		})
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "versioned FUSE filesystem"},
		{[]string{"help", "mount"}, "deltafs mount [flags] STORE MOUNTPOINT"},
		{[]string{"help", "snapshot", "list"}, "deltafs snapshot list STORE|PATH"},
		{[]string{"completion"}, "bash"},
		{[]string{"completion", "bash"}, "# bash completion V2 for deltafs"},
		{[]string{"completion", "zsh"}, "#compdef deltafs"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if r := runBinary(t, nil, tt.args...); r.code != exitOK || r.stderr != "" || !strings.Contains(r.stdout, tt.want) {
				t.Errorf("exit %d, stderr %q, stdout without %q:\n%s", r.code, r.stderr, tt.want, r.stdout)
			}
		})
	}
}
