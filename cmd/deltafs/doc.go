// Command deltafs is the command-line face of deltafs.
//
// It owns argument parsing (spf13/cobra), turning errors into one line on
// stderr, and the process exit code. Each command family lives in its own
// file (cmd_delta.go, cmd_version.go, ...); exit codes and the mapping
// from errors to them live only in exitcodes.go.
//
// Every command runs through run(args, stdin, stdout, stderr), which
// returns the exit code instead of exiting, so tests drive the whole CLI
// in-process; main only wires it to the real process.
//
// Conventions: results go to stdout, errors to stderr as exactly one line
// "deltafs: <command>: <message>"; a usage error (bad flag, wrong number
// of arguments, unknown command) exits with 2 and names the --help to
// read instead of printing the whole usage.
package main
