package main

import (
	"archive/tar"
	"bufio"
	"fmt"
	"os"
	"time"

	"github.com/deltafs/deltafs/bench/workload"
)

// treeSpec is M3's generated source tree: Dirs directories of Files files
// each (text of 200 B to 16 KiB, most small, like a source tree), under
// one top directory "tree".
type treeSpec struct {
	Dirs, Files int
	Seed        uint64
}

var m3Tree = treeSpec{Dirs: 500, Files: 20, Seed: 43}

// writeTar writes the tree as a tar file at path and returns the number
// of files and their bytes.
func (s treeSpec) writeTar(path string) (files int, bytes int64, err error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	tw := tar.NewWriter(bw)
	tx := workload.NewText(s.Seed)
	r := tx.Rand()
	hdr := func(name string, mode int64, size int64, typ byte) error {
		return tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: size, Typeflag: typ,
			ModTime: timeZero, Uname: "bench", Gname: "bench"})
	}
	if err := hdr("tree/", 0o755, 0, tar.TypeDir); err != nil {
		return 0, 0, err
	}
	for d := range s.Dirs {
		dir := fmt.Sprintf("tree/pkg%02d/sub%03d/", d%25, d)
		if d < 25 {
			if err := hdr(fmt.Sprintf("tree/pkg%02d/", d), 0o755, 0, tar.TypeDir); err != nil {
				return 0, 0, err
			}
		}
		if err := hdr(dir, 0o755, 0, tar.TypeDir); err != nil {
			return 0, 0, err
		}
		for i := range s.Files {
			// Skewed sizes: the product of two uniforms favours small files.
			n := 200 + int(r.Float64()*r.Float64()*16000)
			if err := hdr(fmt.Sprintf("%sfile%03d.go", dir, i), 0o644, int64(n), tar.TypeReg); err != nil {
				return 0, 0, err
			}
			if _, err := tw.Write(tx.Fill(n)); err != nil {
				return 0, 0, err
			}
			files, bytes = files+1, bytes+int64(n)
		}
	}
	if err := tw.Close(); err != nil {
		return 0, 0, err
	}
	return files, bytes, bw.Flush()
}

// timeZero is the fixed modification time of every generated entry.
var timeZero = time.Unix(1_700_000_000, 0)
