#!/bin/bash
# restore_inplace_rss.sh DELTAFS BENCH [SIZE_MIB]: peak RSS of restoring
# a revision that an in-place write made (stored from its written
# ranges, its content hash deferred), through the mount and offline.
#
# On a new store and a fresh mount: writes a SIZE_MIB (default 200) file
# of the bench's data (BENCH's M1 writer), then two 4 KiB in-place writes
# (revisions 1 and 2); `deltafs restore --rev 1` through the mount (the
# mount's peak RSS, VmHWM reset first, and the command's, GNU time's %M);
# one more in-place write, unmount, and `deltafs restore --rev 1` on the
# unmounted store (the command's peak RSS). Prints whether each restore
# left revision 1's bytes, then the file's log.
#
#   go build -o /tmp/deltafs ./cmd/deltafs && go build -o /tmp/bench ./bench
#   sudo bench/scripts/restore_inplace_rss.sh /tmp/deltafs /tmp/bench
set -u
D=$1 B=$2 MIB=${3:-200} OLD=
W=$(mktemp -d)
. "$(dirname "$0")/rss_lib.sh"
rss_setup $((MIB << 20))

poke() { # poke BLOCK: a 4 KiB in-place write at 4 KiB block BLOCK
	head -c 4096 /dev/urandom | dd of=$W/mnt/f bs=4k seek=$1 conv=notrunc status=none
	sleep 0.3
}
mount_new $D
cp $W/src/data $W/mnt/f && sync $W/mnt/f && sleep 0.5 # past the new-file grace
poke 100
cp $W/mnt/f $W/rev1
poke 300
echo 5 >/proc/$pid/clear_refs
m0=$(status_kib VmHWM)
/usr/bin/time -f %M -o $W/time $D restore $W/mnt/f --rev 1 >/dev/null || exit 1
m1=$(status_kib VmHWM)
echo "through the mount: mount's peak RSS $((m0 / 1024)) -> $((m1 / 1024)) MiB, restore command $(($(cat $W/time) / 1024)) MiB, content $(cmp -s $W/mnt/f $W/rev1 && echo ok || echo DIFFERENT)"
poke 500
unmount $D
/usr/bin/time -f %M -o $W/time $D restore --store $W/store f --rev 1 >/dev/null || exit 1
echo "offline: restore command $(($(cat $W/time) / 1024)) MiB, content $(cmp -s $W/store/live/f $W/rev1 && echo ok || echo DIFFERENT)"
$D log --store $W/store f
