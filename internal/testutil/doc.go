// Package testutil holds helpers shared by the tests of deltafs packages.
//
// It owns test-only concerns: deciding whether FUSE tests can run
// (RequireFUSE), deterministic test data (Bytes), and, later, helpers
// that mount a filesystem or open a store in a temporary directory.
//
// Invariants: nothing here is imported by non-test code (arch_test.go
// enforces it); helpers generate their data deterministically from a
// seed, so a failing test fails the same way on every run; helpers clean
// up after themselves with t.Cleanup.
package testutil
