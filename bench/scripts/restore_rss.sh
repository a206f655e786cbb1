#!/bin/bash
# restore_rss.sh DELTAFS BENCH [ROUNDS] [OLD_DELTAFS] [SIZE_MIB]: the
# mount's peak RSS while `deltafs restore` brings back a big revision
# over a small one, through the mount.
#
# Per round, on a new store and a fresh mount: writes a SIZE_MIB
# (default 128) file of the bench's data (BENCH's M1 writer) into the
# mount and syncs it (revision 0), then 1 MiB over it (revision 1), then
# `deltafs restore --rev 0`: prints the mount's peak RSS (VmHWM, reset
# first), the command's (GNU time's %M), and whether the file holds
# revision 0's bytes. With OLD_DELTAFS, each round measures that build
# too, in turn. Shares its setup with copy_rss.sh (rss_lib.sh).
#
#   go build -o /tmp/deltafs ./cmd/deltafs && go build -o /tmp/bench ./bench
#   sudo bench/scripts/restore_rss.sh /tmp/deltafs /tmp/bench 3
set -u
D=$1 B=$2 N=${3:-3} OLD=${4:-} MIB=${5:-128}
W=$(mktemp -d)
. "$(dirname "$0")/rss_lib.sh"
rss_setup $((MIB << 20))

one() { # one BIN LABEL
	local bin=$1 label=$2 m0 m1 c
	mount_new $bin
	cat $W/src/data >$W/mnt/f && sync $W/mnt/f && sleep 0.5 # past the new-file grace
	head -c 1M /dev/zero | tr '\0' x >$W/mnt/f && sync $W/mnt/f && sleep 0.5
	$bin log $W/mnt/f >/dev/null
	echo 5 >/proc/$pid/clear_refs
	m0=$(status_kib VmHWM)
	/usr/bin/time -f %M -o $W/time $bin restore $W/mnt/f --rev 0 >/dev/null 2>$W/err || { echo "restore failed: $(cat $W/err)" >&2; exit 1; }
	m1=$(status_kib VmHWM)
	c=$(cmp -s $W/mnt/f $W/src/data && echo ok || echo DIFFERENT)
	echo "$label | mount's peak RSS $((m0 / 1024)) -> $((m1 / 1024)) MiB | restore command $(($(cat $W/time) / 1024)) MiB | content $c | $($bin log $W/mnt/f | tail -1 | awk '{print $4}')"
	unmount $bin
}

rounds
