#!/bin/bash
# unclean_mount.sh DELTAFS TAR [RUNS]: how long a mount takes to serve
# after a clean end, after an unclean end in the same boot (the check by
# stat), and after an unclean end followed by a restart (every live file
# hashed), each with a warm and a cold page cache.
#
# Untars TAR into a new store through the mount once, unmounts it, then
# per run and case: sets the store's mark as that case leaves it (none;
# this boot's id; another boot's), drops the caches for the cold runs,
# and times `deltafs mount` from its start to its ready line.
#
#   go build -o /tmp/deltafs ./cmd/deltafs
#   go run ./bench mount -only M3 -n 1 -work /tmp/m3work   # leaves m3-tree.tar
#   sudo bench/scripts/unclean_mount.sh /tmp/deltafs /tmp/m3work/m3-tree.tar 3
set -u
D=$1 TAR=$2 RUNS=${3:-3}
W=$(mktemp -d)
trap '$D umount $W/mnt 2>/dev/null; wait; rm -rf $W' EXIT
mkdir -p $W/mnt
$D mount $W/s.dfs $W/mnt >$W/log 2>&1 &
for _ in $(seq 100); do grep -q mounted $W/log && break; sleep 0.1; done
tar -xf "$TAR" -C $W/mnt
$D umount $W/mnt
wait
echo "live tree: $(du -sh $W/s.dfs/live | cut -f1), $(find $W/s.dfs/live -type f | wc -l) files"

for r in $(seq "$RUNS"); do
	for mark in clean same-boot restarted; do
		for cache in warm cold; do
			rm -f $W/s.dfs/mounted
			case $mark in
			same-boot) tr -d '\n' </proc/sys/kernel/random/boot_id >$W/s.dfs/mounted ;;
			restarted) printf 'a boot before this one' >$W/s.dfs/mounted ;;
			esac
			[ $cache = cold ] && { sync; echo 3 >/proc/sys/vm/drop_caches; }
			t0=$(date +%s.%N)
			$D mount $W/s.dfs $W/mnt >$W/log 2>&1 &
			for _ in $(seq 6000); do grep -q mounted $W/log && break; sleep 0.005; done
			t1=$(date +%s.%N)
			printf 'run %d %-10s %-4s ready after %.3f s\n' "$r" $mark $cache "$(echo "$t1-$t0" | bc)"
			$D umount $W/mnt
			wait
		done
	done
done
