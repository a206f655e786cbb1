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
# written and recorded, and RssAnon then. With OLD_DELTAFS, each round
# measures that build too, in turn. Shares its setup with
# old_revision_open.sh (rss_lib.sh).
#
#   go build -o /tmp/deltafs ./cmd/deltafs && go build -o /tmp/bench ./bench
#   sudo bench/scripts/copy_rss.sh /tmp/deltafs /tmp/bench 3
set -u
D=$1 B=$2 N=${3:-3} OLD=${4:-}
W=$(mktemp -d)
. "$(dirname "$0")/rss_lib.sh"
rss_setup $((256 << 20))

one() { # one BIN LABEL
	local bin=$1 label=$2 rss0 anon0
	mount_new $bin
	cat $W/src/data >$W/mnt/a && sync $W/mnt/a
	echo 5 >/proc/$pid/clear_refs
	rss0=$(status_kib VmRSS)
	anon0=$(status_kib RssAnon)
	sample_anon
	cat $W/src/data >$W/mnt/b && sync $W/mnt/b
	sleep 1
	echo "$label | RSS before b $((rss0 / 1024)) MiB (anon $((anon0 / 1024))) | peak RSS $(($(status_kib VmHWM) / 1024)) MiB | peak RssAnon sampled $(peak_anon_mib) MiB | RssAnon after $(($(status_kib RssAnon) / 1024)) MiB | b: $($bin log --store $W/store b 2>&1 | awk '{print $4}' | tr '\n' ' ')"
	unmount $bin
}

rounds
