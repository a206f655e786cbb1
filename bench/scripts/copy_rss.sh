#!/bin/bash
# copy_rss.sh DELTAFS BENCH [ROUNDS] [OLD_DELTAFS]: the mount's peak RSS
# while it records a copy of a big file it holds already.
#
# Per round, on a new store: writes a 256 MiB file of the bench's data
# (BENCH's M1 writer) into the mount and syncs it (recorded), resets the
# mount's peak RSS (clear_refs) and notes its RSS then, writes the same
# bytes to a second file and syncs it (recorded as a dedup of the
# first), and prints the peak (VmHWM: file-backed pages mapped from the
# store count too), the highest RssAnon sampled every 20 ms while b is
# written and recorded, and RssAnon then. With OLD_DELTAFS, each round measures that
# build too, in turn.
#
#   go build -o /tmp/deltafs ./cmd/deltafs && go build -o /tmp/bench ./bench
#   sudo bench/scripts/copy_rss.sh /tmp/deltafs /tmp/bench 3
set -u
D=$1 B=$2 N=${3:-3} OLD=${4:-}
W=$(mktemp -d)
trap 'for b in $D $OLD; do $b umount $W/mnt 2>/dev/null; done; umount -l $W/mnt 2>/dev/null; wait; rm -rf $W' EXIT
mkdir -p $W/src
$B __child mount seqwrite -dir $W/src -size $((256 << 20)) >/dev/null || exit 1

one() { # one BIN LABEL
	local bin=$1 label=$2 pid
	rm -rf $W/store $W/mnt && mkdir $W/mnt
	$bin mount $W/store $W/mnt >$W/out 2>&1 &
	pid=$!
	for _ in $(seq 100); do grep -q ready $W/out 2>/dev/null && break; sleep 0.1; done
	cat $W/src/data >$W/mnt/a && sync $W/mnt/a
	echo 5 >/proc/$pid/clear_refs
	local rss0 anon0
	rss0=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
	anon0=$(awk '/RssAnon/ {print $2}' /proc/$pid/status)
	(while :; do awk '/RssAnon/ {print $2}' /proc/$pid/status; sleep 0.02; done >$W/anon) &
	local sampler=$!
	cat $W/src/data >$W/mnt/b && sync $W/mnt/b
	sleep 1
	kill $sampler
	wait $sampler 2>/dev/null
	echo "$label | RSS before b $((rss0 / 1024)) MiB (anon $((anon0 / 1024))) | peak RSS $(($(awk '/VmHWM/ {print $2}' /proc/$pid/status) / 1024)) MiB | peak RssAnon sampled $(($(sort -n $W/anon | tail -1) / 1024)) MiB | RssAnon after $(($(awk '/RssAnon/ {print $2}' /proc/$pid/status) / 1024)) MiB | b: $($bin log --store $W/store b 2>&1 | awk '{print $4}' | tr '\n' ' ')"
	$bin umount $W/mnt
	wait $pid
}

for r in $(seq $N); do
	[ -n "$OLD" ] && one $OLD "round $r before"
	one $D "round $r"
done
