#!/bin/bash
# ls_warm.sh BENCHBIN N DELTAFS...: a warm ls -l of a directory of N
# empty files, on the go-fuse loopback (the bench's own loopback child)
# and on each deltafs binary given, each on a fresh directory under
# /tmp: the files are made through the mount, one ls -l is not timed,
# three are. Prints wall, user and system time of each timed ls. Needs
# root.
#
#   go build -o /tmp/benchbin ./bench && go build -o /tmp/deltafs ./cmd/deltafs
#   sudo bench/scripts/ls_warm.sh /tmp/benchbin 50000 /tmp/deltafs-before /tmp/deltafs
set -u
B=$1 N=$2
shift 2
W=$(mktemp -d)
trap 'umount -l $W/m 2>/dev/null; rm -rf $W' EXIT

one() {
	local kind=$1 bin=$2 label=$3 pid i
	rm -rf $W/m $W/backing $W/store && mkdir -p $W/m $W/backing
	if [ $kind = loopback ]; then
		$B __child mount loopback $W/backing $W/m >$W/out 2>&1 &
	else
		$bin mount $W/store $W/m >$W/out 2>&1 &
	fi
	pid=$!
	for i in $(seq 100); do mountpoint -q $W/m && break; sleep 0.05; done
	mountpoint -q $W/m || { echo "ls_warm: $label did not mount: $(cat $W/out)" >&2; exit 1; }
	mkdir $W/m/d && (cd $W/m/d && seq 1 $N | xargs touch)
	ls -l $W/m/d >/dev/null
	for i in 1 2 3; do
		/usr/bin/time -f "$label: ls -l of $N files %e s wall, %U s user, %S s system" ls -l $W/m/d >/dev/null
	done
	if [ $kind = loopback ]; then kill -TERM $pid; else $bin umount $W/m; fi
	wait $pid
}

one loopback "" loopback
for d in "$@"; do one deltafs $d "$d"; done
