#!/bin/bash
# untar_cpus.sh BENCHBIN DELTAFS TAR [RUNS]: what placing the FUSE
# server and its caller on CPUs costs a latency-bound untar.
#
# Untars TAR (M3's tree) into a go-fuse loopback mount (the bench's own
# loopback child) and into a deltafs mount, each on a fresh ext4 image,
# RUNS times (default 3), in four settings taking turns:
#   free      server and tar placed by the scheduler (as in the bench)
#   same      server and tar both pinned to CPU 0 (taskset)
#   apart     server pinned to CPU 1, tar to CPU 0
#   haltpoll  free, with the guest's haltpoll cpuidle governor allowed to
#             poll up to 200 us before halting an idle CPU (its
#             guest_halt_poll_ns, the kernel's default; restored
#             afterwards). Run only where that governor is in use.
# Needs two CPUs or more (0 and 1 online) and root.
# Prints the untar's wall time and the server's CPU for each; for
# deltafs the recording of the new files is included in that CPU only as
# far as it ran during the untar.
#
#   go build -o /tmp/benchbin ./bench && go build -o /tmp/deltafs ./cmd/deltafs
#   go run ./bench mount -only M3 -n 1 -work /tmp/m3work   # leaves m3-tree.tar
#   sudo bench/scripts/untar_cpus.sh /tmp/benchbin /tmp/deltafs /tmp/m3work/m3-tree.tar
set -u
B=$1 D=$2 TAR=$3 RUNS=${4:-3}
HP=/sys/module/haltpoll/parameters/guest_halt_poll_ns
W=$(mktemp -d)
HP0=$(cat $HP 2>/dev/null || true)
cleanup() {
	[ -n "$HP0" ] && echo "$HP0" >$HP
	$D umount $W/base/mnt 2>/dev/null
	umount -l $W/base/mnt 2>/dev/null
	umount -l $W/base 2>/dev/null
	rm -rf $W
}
trap cleanup EXIT

. "$(dirname "$0")/untar_lib.sh"

case $all in 0 | 0-0) echo "untar_cpus: needs CPUs 0 and 1 online (has $all)" >&2 && exit 1 ;; esac
if [ -n "$HP0" ] && [ "$(cat /sys/devices/system/cpu/cpuidle/current_governor 2>/dev/null)" != haltpoll ]; then
	HP0= # the parameter is there, but its governor does not run
fi
for _ in $(seq "$RUNS"); do
	for kind in loopback deltafs; do
		untar $kind $all $all free
		untar $kind 0 0 same
		untar $kind 1 0 apart
		if [ -n "$HP0" ]; then
			echo 200000 >$HP && [ "$(cat $HP)" = 200000 ] || exit 1
			untar $kind $all $all haltpoll
			echo "$HP0" >$HP
		fi
	done
done
