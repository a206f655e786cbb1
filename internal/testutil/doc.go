// Package testutil holds helpers shared by the tests of deltafs packages.
//
// It owns test-only concerns: deciding whether FUSE tests can run
// (RequireFUSE), deterministic test data (Bytes), mounting a node tree in
// a temporary directory (Mount), and child processes that announce they
// are ready on stdout, such as a mount (StartReady). Its subpackage
// storetest makes stores (it imports objstore, which testutil cannot);
// crashfs is a FUSE file system that simulates power cuts.
//
// Invariants: nothing here is imported by non-test code (arch_test.go
// enforces it); helpers generate their data deterministically from a
// seed, so a failing test fails the same way on every run; helpers clean
// up after themselves with t.Cleanup.
package testutil
