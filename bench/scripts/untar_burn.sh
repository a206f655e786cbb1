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

untar() { # untar LABEL
	mkdir -p $W/base && truncate -s 8G $W/img && mkfs.ext4 -q -F $W/img &&
		mount -o loop $W/img $W/base && mkdir $W/base/mnt $W/base/backing || exit 1
	$B __child mount loopback $W/base/backing $W/base/mnt >$W/out 2>&1 &
	local pid=$! i c0 c1 t0 t1
	for i in $(seq 100); do grep -q ready $W/out && break; sleep 0.1; done
	c0=$(awk '{print $14+$15}' /proc/$pid/stat)
	t0=$(date +%s.%N)
	tar -xf "$TAR" -C $W/base/mnt
	t1=$(date +%s.%N)
	c1=$(awk '{print $14+$15}' /proc/$pid/stat)
	printf '%-22s untar %.2f s  server CPU %.2f s\n' "$1" "$(echo "$t1-$t0" | bc)" "$(echo "($c1-$c0)/100" | bc -l)"
	kill -TERM $pid
	wait $pid
	umount $W/base && rm -f $W/img
}

for _ in $(seq "$RUNS"); do
	untar "idle second core"
	chrt -i 0 sh -c 'while :; do :; done' &
	burner=$!
	untar "SCHED_IDLE busy loop"
	kill $burner
	wait $burner 2>/dev/null
done
