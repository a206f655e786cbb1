#!/bin/bash
# old_revision_open.sh DELTAFS BENCH [ROUNDS] [OLD_DELTAFS]: what holding
# a big old revision open costs the mount.
#
# Per round, on a new store: copies a 1 GiB file of the bench's text
# (BENCH's M1 writer) into the mount, takes a snapshot, changes 7 bytes
# in the middle of the file in place, then opens the snapshot's copy
# (timed: the open rebuilds it), reads it whole twice with cat (timed)
# and compares it with the source, and prints the mount's RSS before the
# open, while the file is open and after it is closed, and the highest
# RssAnon sampled every 20 ms during the open. With OLD_DELTAFS,
# each round measures that build too, in turn, for a before/after pair.
# With WHICH=changed, a second snapshot is taken after the change and its
# copy is the one opened: a delta on the first revision, not a fulltext.
#
#   go build -o /tmp/deltafs ./cmd/deltafs && go build -o /tmp/bench ./bench
#   sudo bench/scripts/old_revision_open.sh /tmp/deltafs /tmp/bench 3
set -u
D=$1 B=$2 N=${3:-3} OLD=${4:-}
W=$(mktemp -d)
. "$(dirname "$0")/rss_lib.sh"
rss_setup 1073741824
SRC=$W/src/data
WHICH=${WHICH:-first}
WANT=$SRC
if [ "$WHICH" = changed ]; then
	WANT=$W/src/changed
	cp $SRC $WANT
	printf changed | dd of=$WANT bs=1 seek=$((512 << 20)) conv=notrunc status=none
fi

now() { date +%s.%N; }
secs() { printf '%.2f' "$(echo "$2 - $1" | bc)"; }

one() { # one BIN LABEL
	local bin=$1 label=$2
	mount_new $bin
	cp $SRC $W/mnt/big && sync $W/mnt/big
	mkdir $W/mnt/.snapshots/s
	printf changed | dd of=$W/mnt/big bs=1 seek=$((512 << 20)) conv=notrunc status=none
	sync $W/mnt/big
	local snap=$W/mnt/.snapshots/s/big
	if [ "$WHICH" = changed ]; then
		mkdir $W/mnt/.snapshots/s2
		snap=$W/mnt/.snapshots/s2/big
		echo small >$W/mnt/big # the snapshot's copy is no longer the live file's
		sync $W/mnt/big
	fi
	local rss0 rss1 rss2 t0 t1 t2 t3 peak same=same
	rss0=$(status_kib VmRSS)
	sample_anon
	t0=$(now); exec 3<$snap; t1=$(now)
	peak=$(peak_anon_mib)
	cat $snap >/dev/null; t2=$(now)
	cat $snap >/dev/null; t3=$(now)
	cmp -s $WANT $snap || same=DIFFERENT
	sleep 1
	rss1=$(status_kib VmRSS)
	exec 3<&-
	sleep 2
	rss2=$(status_kib VmRSS)
	echo "$label ($WHICH revision) | open $(secs $t0 $t1) s | first read $(secs $t1 $t2) s | second read $(secs $t2 $t3) s | RSS before $((rss0 / 1024)) MiB, open $((rss1 / 1024)) MiB, closed $((rss2 / 1024)) MiB | peak RssAnon during the open $peak MiB | content $same"
	unmount $bin
}

rounds
