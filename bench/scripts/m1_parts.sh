#!/bin/bash
# m1_parts.sh DELTAFS BENCH [ROUNDS]: where M1's "write + recording"
# goes, step by step, against a go-fuse loopback mount, in turn.
#
# Writes a 1 GiB file of the bench's text (BENCH's own M1 writer, so the
# same bytes) into a native directory once, as the source; then per
# round, for the loopback and for deltafs on a new store: copies it into
# the mount in 1 MiB blocks (a small Go program: create, write, fsync,
# close, each step timed), then takes a snapshot (deltafs only: it waits
# for the new file's first revision), and prints each step's time, the
# server's CPU over the whole sequence and, for deltafs, the bytes
# stored.
#
#   go build -o /tmp/deltafs ./cmd/deltafs && go build -o /tmp/bench ./bench
#   sudo bench/scripts/m1_parts.sh /tmp/deltafs /tmp/bench 3
set -u
D=$1 B=$2 N=${3:-3}
W=$(mktemp -d)
trap '$D umount $W/mnt 2>/dev/null; umount -l $W/mnt 2>/dev/null; kill %1 2>/dev/null; wait; rm -rf $W' EXIT

mkdir -p $W/src $W/tool
cat >$W/tool/main.go <<'GO'
package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	src, err := os.Open(os.Args[1])
	if err != nil {
		panic(err)
	}
	t0 := time.Now()
	f, err := os.Create(os.Args[2])
	if err != nil {
		panic(err)
	}
	buf := make([]byte, 1<<20)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				panic(err)
			}
		}
		if err == io.EOF {
			break
		}
	}
	t1 := time.Now()
	if err := f.Sync(); err != nil {
		panic(err)
	}
	t2 := time.Now()
	f.Close()
	fmt.Printf("write %d ms fsync %d ms close %d ms", t1.Sub(t0).Milliseconds(), t2.Sub(t1).Milliseconds(), time.Since(t2).Milliseconds())
}
GO
printf 'module m1parts\ngo 1.26\n' >$W/tool/go.mod
(cd $W/tool && go build -o $W/writer .) || exit 1
$B __child mount seqwrite -dir $W/src -size 1073741824 >/dev/null || exit 1
ms() { date +%s%N; }
for r in $(seq "$N"); do
	for kind in loopback deltafs; do
		rm -rf $W/back $W/store $W/mnt && mkdir -p $W/back $W/mnt
		if [ $kind = loopback ]; then
			$B __child mount loopback $W/back $W/mnt >$W/srv.log 2>&1 &
		else
			$D mount $W/store $W/mnt >$W/srv.log 2>&1 &
		fi
		P=$!
		for i in $(seq 100); do mountpoint -q $W/mnt && break; sleep 0.05; done
		mountpoint -q $W/mnt || { cat $W/srv.log; exit 1; }
		sync
		echo 3 >/proc/sys/vm/drop_caches
		cat $W/src/data >/dev/null
		c0=$(awk '{print $14+$15}' /proc/$P/stat)
		parts=$($W/writer $W/src/data $W/mnt/data)
		t=$(ms)
		[ $kind = deltafs ] && { mkdir $W/mnt/.snapshots/s || exit 1; }
		snap=$((($(ms) - t) / 1000000))
		c1=$(awk '{print $14+$15}' /proc/$P/stat)
		if [ $kind = deltafs ]; then
			$D umount $W/mnt
			wait $P
			stored=" stored $($D stats --json $W/store | sed -n 's/.*"stored_bytes": *\([0-9]*\).*/\1/p') B"
		else
			kill -INT $P
			wait $P
			stored=""
		fi
		echo "round $r $kind: $parts, snapshot $snap ms, server CPU $(((c1 - c0) * 10)) ms$stored"
	done
done
