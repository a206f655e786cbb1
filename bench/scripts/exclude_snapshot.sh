#!/bin/bash
# exclude_snapshot.sh DELTAFS N [RUNS]: what a snapshot costs after N new
# files the mount leaves out of history (--exclude '*.tmp'), and after N
# changed ones.
#
# Mounts a new store on a fresh ext4 image with DELTAFS (a built
# `deltafs`), writes N 10-20 byte files d/fI.tmp, takes a snapshot,
# rewrites them all, takes another; prints both mkdir times. RUNS times
# (default 1), each from a new image and store.
#
#   go build -o /tmp/deltafs ./cmd/deltafs
#   sudo bench/scripts/exclude_snapshot.sh /tmp/deltafs 2000 3
set -u
B=$1 N=$2 RUNS=${3:-1}
W=$(mktemp -d)
trap '$B umount $W/base/mnt 2>/dev/null; wait; umount -l $W/base 2>/dev/null; rm -rf $W' EXIT

since() { echo "$(date +%s.%N) - $1" | bc; }

for r in $(seq "$RUNS"); do
	mkdir -p $W/base && truncate -s 4G $W/img && mkfs.ext4 -q -F $W/img &&
		mount -o loop $W/img $W/base && mkdir $W/base/mnt || exit 1
	$B mount --exclude '*.tmp' $W/base/s.dfs $W/base/mnt >$W/out 2>&1 &
	for i in $(seq 100); do mountpoint -q $W/base/mnt && break; sleep 0.1; done
	mountpoint -q $W/base/mnt || { cat $W/out; exit 1; }
	mkdir $W/base/mnt/d
	for i in $(seq 1 "$N"); do printf 'scratch %d\n' $i >$W/base/mnt/d/f$i.tmp; done
	sleep 1 # the kernel's releases of the closed files
	t=$(date +%s.%N)
	mkdir $W/base/mnt/.snapshots/new || exit 1
	new=$(since $t)
	for i in $(seq 1 "$N"); do printf 'changed scratch %d\n' $i >$W/base/mnt/d/f$i.tmp; done
	sleep 1
	t=$(date +%s.%N)
	mkdir $W/base/mnt/.snapshots/changed || exit 1
	changed=$(since $t)
	cmp -s $W/base/mnt/.snapshots/new/d/f1.tmp <(printf 'scratch 1\n') || { echo "snapshot new: wrong content"; exit 1; }
	printf 'run %d: %d excluded files: snapshot after they are new %.2f s, after they changed %.2f s\n' "$r" "$N" "$new" "$changed"
	$B umount $W/base/mnt
	wait
	umount $W/base && rm -f $W/img
done
