// Package workload generates the deterministic data every deltafs
// benchmark runs on: text-like bytes (lines of words from a fixed
// vocabulary, compressible about 3-4x by zstd, like source code or prose),
// small edits of that text (insert, delete, replace), and revision chains
// built from them (the D1-D4 delta workloads).
//
// Invariant: the same seed gives the same bytes, on every run and every
// machine. All randomness comes from math/rand/v2's PCG seeded from the
// caller's seed; nothing reads the clock or global random state. Changing
// the output of a generator changes every published figure, so do it only
// together with a fresh run of the benchmarks.
package workload
