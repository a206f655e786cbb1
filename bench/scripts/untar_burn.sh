#!/bin/bash
# untar_burn.sh BENCHBIN TAR [RUNS]: what a busy second core costs a
# latency-bound untar through a FUSE mount.
#
# Untars TAR into a plain go-fuse loopback mount (the bench's own
# loopback child) on a fresh ext4 image, RUNS times (default 3), each
# time twice: once on an otherwise idle machine, and once while a
# SCHED_IDLE busy loop (the lowest priority Linux has) spins on the
# other core. Prints wall time and the server's CPU for each.
#
#   go build -o /tmp/benchbin ./bench
#   go run ./bench mount -only M3 -n 1 -work /tmp/m3work   # leaves m3-tree.tar
#   sudo bench/scripts/untar_burn.sh /tmp/benchbin /tmp/m3work/m3-tree.tar
set -u
B=$1 TAR=$2 RUNS=${3:-3}
W=$(mktemp -d)
trap 'umount -l $W/base/mnt 2>/dev/null; umount -l $W/base 2>/dev/null; rm -rf $W' EXIT

. "$(dirname "$0")/untar_lib.sh"

for _ in $(seq "$RUNS"); do
	untar loopback $all $all "idle second core"
	chrt -i 0 sh -c 'while :; do :; done' &
	burner=$!
	untar loopback $all $all "SCHED_IDLE busy loop"
	kill $burner
	wait $burner 2>/dev/null
done
