# untar_lib.sh: sourced by untar_cpus.sh and untar_burn.sh, not run.
#
# untar KIND SERVERCPUS TARCPUS LABEL untars $TAR into a fresh ext4 image
# under $W, served by KIND: loopback (the bench binary $B's go-fuse
# loopback child) or deltafs ($D, on a new store), the server pinned to
# SERVERCPUS and tar to TARCPUS (taskset lists; all online CPUs for
# neither pinned). Prints the untar's wall time and the server's CPU.
# Exits if the server does not mount.

untar() {
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
		echo "untar: $kind did not mount: $(cat $W/out)" >&2
		exit 1
	fi
	c0=$(awk '{print $14+$15}' /proc/$pid/stat)
	t0=$(date +%s.%N)
	taskset -c $tcpu tar -xf "$TAR" -C $W/base/mnt
	t1=$(date +%s.%N)
	c1=$(awk '{print $14+$15}' /proc/$pid/stat)
	printf '%-8s %-22s untar %5.2f s  server CPU %5.2f s\n' $kind "$label" \
		"$(echo "$t1-$t0" | bc)" "$(echo "($c1-$c0)/100" | bc -l)"
	if [ $kind = loopback ]; then kill -TERM $pid; else $D umount $W/base/mnt; fi
	wait $pid
	umount $W/base && rm -f $W/img
}

# all online CPUs, as a taskset list
all=$(cat /sys/devices/system/cpu/online)
