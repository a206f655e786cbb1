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

untar() { # untar KIND SERVERCPUS TARCPUS LABEL
	local kind=$1 scpu=$2 tcpu=$3 label=$4 pid i c0 c1 t0 t1
	mkdir -p $W/base && truncate -s 8G $W/img && mkfs.ext4 -q -F $W/img &&
		mount -o loop $W/img $W/base && mkdir $W/base/mnt $W/base/backing || exit 1
	if [ $kind = loopback ]; then
		taskset -c $scpu $B __child mount loopback $W/base/backing $W/base/mnt >$W/out 2>&1 &
	else
		taskset -c $scpu $D mount $W/base/store $W/base/mnt >$W/out 2>&1 &
	fi
	pid=$!
	for i in $(seq 100); do mountpoint -q $W/base/mnt && break; sleep 0.05; done
	if ! kill -0 $pid 2>/dev/null || ! mountpoint -q $W/base/mnt; then
		echo "untar_cpus: $kind did not mount: $(cat $W/out)" >&2
		exit 1
	fi
	c0=$(awk '{print $14+$15}' /proc/$pid/stat)
	t0=$(date +%s.%N)
	taskset -c $tcpu tar -xf "$TAR" -C $W/base/mnt
	t1=$(date +%s.%N)
	c1=$(awk '{print $14+$15}' /proc/$pid/stat)
	printf '%-8s %-9s untar %5.2f s  server CPU %5.2f s\n' $kind "$label" \
		"$(echo "$t1-$t0" | bc)" "$(echo "($c1-$c0)/100" | bc -l)"
	if [ $kind = loopback ]; then kill -TERM $pid; else $D umount $W/base/mnt; fi
	wait $pid
	umount $W/base && rm -f $W/img
}

all=$(cat /sys/devices/system/cpu/online)
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
