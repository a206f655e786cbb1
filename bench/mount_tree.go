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
	err = s.walk(func(name string, data []byte) error {
		h := &tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeDir, ModTime: timeZero, Uname: "bench", Gname: "bench"}
		if data != nil {
			h.Mode, h.Size, h.Typeflag = 0o644, int64(len(data)), tar.TypeReg
			files, bytes = files+1, bytes+int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	if err := tw.Close(); err != nil {
		return 0, 0, err
	}
	return files, bytes, bw.Flush()
}

// walk generates the tree in order: fn gets each directory (its path
// ends in "/", data nil) before what it holds, and each file with its
// bytes (never nil; fn may keep them).
func (s treeSpec) walk(fn func(path string, data []byte) error) error {
	tx := workload.NewText(s.Seed)
	r := tx.Rand()
	if err := fn("tree/", nil); err != nil {
		return err
	}
	for d := range s.Dirs {
		dir := fmt.Sprintf("tree/pkg%02d/sub%03d/", d%25, d)
		if d < 25 {
			if err := fn(fmt.Sprintf("tree/pkg%02d/", d), nil); err != nil {
				return err
			}
		}
		if err := fn(dir, nil); err != nil {
			return err
		}
		for i := range s.Files {
			// Skewed sizes: the product of two uniforms favours small files.
			n := 200 + int(r.Float64()*r.Float64()*16000)
			if err := fn(fmt.Sprintf("%sfile%03d.go", dir, i), tx.Fill(n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// timeZero is the fixed modification time of every generated entry.
var timeZero = time.Unix(1_700_000_000, 0)
