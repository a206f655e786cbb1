#!/bin/bash
# cat_rss.sh DELTAFS BENCH [ROUNDS] [OLD_DELTAFS] [SIZE_MIB]: the memory
# of deltafs cat and restore of a big old revision, through a mount and
# offline.
#
# Per round, on a new store: writes a SIZE_MIB (default 128) file of the
# bench's data (BENCH's M1 writer) into the mount and syncs it (revision
# 0, a chunked fulltext), then 4 KiB in place at 1 MiB and syncs it
# (revision 1, a delta on it). Then, with the mount's peak RSS reset
# (clear_refs): `deltafs cat --rev 0` and `--rev 1` through the mount,
# printing each command's peak RSS (GNU time's %M) and the mount's peak
# (VmHWM); and after unmounting: offline `cat --rev 0` and `restore
# --rev 0`, each command's peak RSS. Every cat's output is compared with
# the file it should be. With OLD_DELTAFS, each round measures that build
# too, in turn.
#
#   go build -o /tmp/deltafs ./cmd/deltafs && go build -o /tmp/bench ./bench
#   sudo bench/scripts/cat_rss.sh /tmp/deltafs /tmp/bench 3
set -u
D=$1 B=$2 N=${3:-3} OLD=${4:-} MIB=${5:-128}
W=$(mktemp -d)
. "$(dirname "$0")/rss_lib.sh"
rss_setup $((MIB << 20))
cp $W/src/data $W/v1
printf '%4096s' x | dd of=$W/v1 bs=4096 seek=256 conv=notrunc status=none

# peak_kib CMD...: runs CMD with stdout to $W/got and prints its peak RSS.
peak_kib() {
	/usr/bin/time -f %M -o $W/time "$@" >$W/got 2>$W/err || { echo "$* failed: $(cat $W/err)" >&2; exit 1; }
	cat $W/time
}

# same FILE: says whether $W/got holds FILE's bytes.
same() { cmp -s $W/got $1 && echo ok || echo DIFFERENT; }

one() { # one BIN LABEL
	local bin=$1 label=$2 c0 c1 c2 c3
	mount_new $bin
	cat $W/src/data >$W/mnt/f && sync $W/mnt/f && sleep 0.5 # past the new-file grace
	dd if=$W/v1 of=$W/mnt/f bs=4096 skip=256 seek=256 count=1 conv=notrunc,fsync status=none
	sleep 1
	echo 5 >/proc/$pid/clear_refs
	local m0=$(status_kib VmHWM)
	c0=$(peak_kib $bin cat --rev 0 $W/mnt/f) && c0="$((c0 / 1024)) MiB ($(same $W/src/data))"
	c1=$(peak_kib $bin cat --rev 1 $W/mnt/f) && c1="$((c1 / 1024)) MiB ($(same $W/v1))"
	local m1=$(status_kib VmHWM)
	unmount $bin
	c2=$(peak_kib $bin cat --store $W/store --rev 0 f) && c2="$((c2 / 1024)) MiB ($(same $W/src/data))"
	c3=$(peak_kib $bin restore --store $W/store --rev 0 f) && c3="$((c3 / 1024)) MiB ($(cmp -s $W/store/live/f $W/src/data && echo ok || echo DIFFERENT))"
	echo "$label | mounted: cat --rev 0 $c0, cat --rev 1 $c1, mount's peak RSS $((m0 / 1024)) -> $((m1 / 1024)) MiB | offline: cat --rev 0 $c2, restore --rev 0 $c3"
}

rounds
