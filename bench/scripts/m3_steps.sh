#!/bin/bash
# m3_steps.sh BENCHBIN TAR RUNS DELTAFS...: M3's untar, git add+commit
# and rm -rf, timed step by step, on the go-fuse loopback (the bench's own
# loopback child) and on each deltafs binary given (e.g. builds of two
# commits), each on a fresh ext4 image, the kinds taking turns in each of
# RUNS rounds. Prints each step's wall time and the server's CPU (for
# deltafs, the recording of new files only as far as it ran during the
# step). Needs root.
#
#   go build -o /tmp/benchbin ./bench
#   git worktree add /tmp/before REV && (cd /tmp/before && go build -o /tmp/deltafs-before ./cmd/deltafs)
#   go build -o /tmp/deltafs ./cmd/deltafs
#   go run ./bench mount -only M3 -n 1 -work /tmp/m3work   # leaves m3-tree.tar
#   sudo bench/scripts/m3_steps.sh /tmp/benchbin /tmp/m3work/m3-tree.tar 3 /tmp/deltafs-before /tmp/deltafs
set -u
B=$1 TAR=$2 RUNS=$3
shift 3
W=$(mktemp -d)
cleanup() {
	umount -l $W/base/mnt 2>/dev/null
	umount -l $W/base 2>/dev/null
	rm -rf $W
}
trap cleanup EXIT

# one KIND BIN LABEL: mount, time the steps, unmount.
one() {
	local kind=$1 bin=$2 label=$3 pid i
	mkdir -p $W/base && truncate -s 8G $W/img && mkfs.ext4 -q -F $W/img &&
		mount -o loop $W/img $W/base && mkdir $W/base/mnt $W/base/backing || exit 1
	if [ $kind = loopback ]; then
		$B __child mount loopback $W/base/backing $W/base/mnt >$W/out 2>&1 &
	else
		$bin mount $W/base/store $W/base/mnt >$W/out 2>&1 &
	fi
	pid=$!
	for i in $(seq 100); do mountpoint -q $W/base/mnt && break; sleep 0.05; done
	if ! kill -0 $pid 2>/dev/null || ! mountpoint -q $W/base/mnt; then
		echo "m3_steps: $label did not mount: $(cat $W/out)" >&2
		exit 1
	fi
	local tree=$W/base/mnt/tree
	step() {
		local name=$1 c0 c1 t0 t1
		shift
		c0=$(awk '{print $14+$15}' /proc/$pid/stat)
		t0=$(date +%s.%N)
		"$@" || { echo "m3_steps: $label $name failed" >&2; exit 1; }
		t1=$(date +%s.%N)
		c1=$(awk '{print $14+$15}' /proc/$pid/stat)
		printf '%-28s %-6s %6.2f s  server CPU %5.2f s\n' "$label" $name \
			"$(echo "$t1-$t0" | bc)" "$(echo "($c1-$c0)/100" | bc -l)"
	}
	step untar tar -xf "$TAR" -C $W/base/mnt
	git init -q $tree
	step git sh -c "cd $tree && git add -A && git -c gc.auto=0 -c user.name=bench -c user.email=bench@localhost commit -q -m tree"
	step rm-rf rm -rf $tree
	if [ $kind = loopback ]; then kill -TERM $pid; else $bin umount $W/base/mnt; fi
	wait $pid
	umount $W/base && rm -f $W/img
}

for r in $(seq $RUNS); do
	one loopback "" loopback
	for d in "$@"; do one deltafs $d "$d"; done
done
