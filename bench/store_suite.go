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
	var s1 *s1Result
	var s2 *s2Result
	var s3 *s3Result
	if env.Opts.selected("S1") {
		r, err := env.runS1(workload.StoreS1(), missing)
		if err != nil {
			return rep, fmt.Errorf("S1: %w", err)
		}
		s1 = &r
		rep.Tables = append(rep.Tables, r.tables()...)
	}
	if env.Opts.selected("S2") {
		r, err := env.runS2(workload.StoreS2(), missing)
		if err != nil {
			return rep, fmt.Errorf("S2: %w", err)
		}
		s2 = &r
		rep.Tables = append(rep.Tables, r.table())
	}
	if env.Opts.selected("S3") {
		r, err := env.runS3(workload.StoreS3())
		if err != nil {
			return rep, fmt.Errorf("S3: %w", err)
		}
		s3 = &r
		rep.Tables = append(rep.Tables, r.table())
	}
	rep.Tables = append(rep.Tables, storeTargets(s1, s2, s3))
	rep.Notes = storeNotes(env, s1 == nil || s1.cold)
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
