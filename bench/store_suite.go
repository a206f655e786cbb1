package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/deltafs/deltafs/bench/workload"
)

func storeSuite() Suite {
	return Suite{
		Name: "store",
		Doc:  "S1-S3: the revlog store beside git fast-import/gc/repack and Mercurial",
		Run:  runStoreSuite,
		Children: map[string]ChildFunc{
			"ingest": childIngest, "read": childRead, "readall": childReadAll,
			"gitimport": childGitImport, "hgingest": childHgIngest,
		},
	}
}

func runStoreSuite(env *Env) (Report, error) {
	missing := env.ensureTools([]string{"git", "hg"}, []string{"git", "mercurial"})
	rep := Report{Intro: storeIntro(env, missing)}
	s1, err := env.runS1(workload.StoreS1(), missing)
	if err != nil {
		return rep, fmt.Errorf("S1: %w", err)
	}
	s2, err := env.runS2(workload.StoreS2(), missing)
	if err != nil {
		return rep, fmt.Errorf("S2: %w", err)
	}
	s3, err := env.runS3(workload.StoreS3())
	if err != nil {
		return rep, fmt.Errorf("S3: %w", err)
	}
	rep.Tables = append(rep.Tables, s1.tables()...)
	rep.Tables = append(rep.Tables, s2.table(), s3.table(), storeTargets(s1, s2, s3))
	rep.Notes = storeNotes(env, s1)
	return rep, nil
}

// freshDir returns an empty directory under the work directory.
func (e *Env) freshDir(name string) (string, error) {
	dir := filepath.Join(e.Work, name)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	return dir, os.MkdirAll(filepath.Dir(dir), 0o755)
}

// dropCaches writes back dirty pages and drops the page cache, so that the
// next read comes from disk. It reports whether it could (root only).
func dropCaches() bool {
	if err := syncAll(); err != nil {
		return false
	}
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200) == nil
}

func readFileString(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
