// Command bench reproduces every figure in BENCHMARKS.md with one command:
//
//	go run ./bench all          # every suite
//	go run ./bench delta        # one suite
//	go run ./bench delta -n 5   # medians of 5 runs (the default)
//
// It owns the benchmark harness: a registry of suites, the measuring
// helpers, and the markdown report. Workload data comes from the
// deterministic generators of package bench/workload.
//
// How it measures. Each measurement of deltafs code runs in a fresh child
// process (the bench binary re-executed with a hidden subcommand) with
// GOMAXPROCS=1, so that the figures are for one core, each repeat starts
// with a clean heap, and the child's peak RSS (getrusage ru_maxrss) belongs
// to that measurement alone. The child times only the operation itself
// (inputs are read from files first) and reports wall and CPU time of that
// region. Baselines (xdelta3, zstd) run as external processes on the same
// files; their wall, user+system CPU and peak RSS are those of the whole
// process, which includes reading the inputs from the page cache.
// Throughput is target bytes per CPU second (MB = 10^6 bytes), because
// CPU time does not suffer from other load on the machine as wall time does.
// Every figure is the median of -n runs.
//
// Suites: delta (D1-D4, codecs beside xdelta3 and zstd), store (S1-S3,
// objstore beside git fast-import/gc/repack and Mercurial, fed the same
// revisions by a generating child) and mount (M1-M6: a native directory,
// a go-fuse loopback served by this binary, and `deltafs mount` built from
// the checkout, each repeat on a fresh directory, store and mount).
//
// The report goes to stdout and to bench/out/SUITE.md (the -out flag).
package main
