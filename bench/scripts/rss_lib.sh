# rss_lib.sh: sourced by copy_rss.sh and old_revision_open.sh, not run.
# They set D (deltafs), B (bench binary), N (rounds), OLD (an older
# deltafs, or empty) and W (a fresh work directory), and define
# one BIN LABEL, a round measured with BIN.

# rss_setup SIZE: removes W at exit (unmounting first), and writes SIZE
# bytes of the bench's data (its M1 writer) to $W/src/data.
rss_setup() {
	trap 'for b in $D $OLD; do $b umount $W/mnt 2>/dev/null; done; umount -l $W/mnt 2>/dev/null; wait; rm -rf $W' EXIT
	mkdir -p $W/src
	$B __child mount seqwrite -dir $W/src -size $1 >/dev/null || exit 1
}

# mount_new BIN: BIN mounts a new store $W/store on $W/mnt, in the
# background (its pid in pid); exits if it has not mounted in 5 s.
mount_new() {
	rm -rf $W/store $W/mnt && mkdir $W/mnt
	$1 mount $W/store $W/mnt >$W/out 2>&1 &
	pid=$!
	for _ in $(seq 100); do mountpoint -q $W/mnt && return; sleep 0.05; done
	echo "$1 did not mount: $(cat $W/out)" >&2
	exit 1
}

# unmount BIN: unmounts the store mount_new mounted and waits for it.
unmount() {
	$1 umount $W/mnt
	wait $pid
}

# status_kib FIELD: the mount's FIELD of /proc/PID/status, in KiB.
status_kib() { awk "/^$1:/ {print \$2}" /proc/$pid/status; }

# sample_anon starts sampling the mount's RssAnon every 20 ms;
# peak_anon_mib stops it and prints the highest sample, in MiB.
sample_anon() {
	(while :; do status_kib RssAnon; sleep 0.02; done >$W/anon) &
	sampler=$!
}
peak_anon_mib() {
	kill $sampler
	wait $sampler 2>/dev/null
	echo $(($(sort -n $W/anon | tail -1) / 1024))
}

# rounds runs N rounds, each of OLD (if set) and then D.
rounds() {
	for r in $(seq $N); do
		[ -n "$OLD" ] && one $OLD "round $r before"
		one $D "round $r"
	done
}
