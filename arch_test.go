package deltafs_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
)

// module is the import path of this module.
const module = "github.com/deltafs/deltafs"

// layers ranks the module's top-level directories. A package may import
// packages of its own top-level directory and of strictly lower layers:
//
//	cmd/deltafs -> mount -> fs -> objstore -> index
//	                                objstore -> delta
//
// delta and index share the bottom layer, so neither imports the other
// nor anything else of ours; so does internal/spill (unlinked scratch
// files for big texts, used by objstore, fs and mount). Each package
// under internal/ is placed on its own. Two directories sit outside the ladder:
// internal/testutil may be imported only by tests (and by bench), and
// bench may import anything. A new top-level directory must be added
// here before anything imports it.
var layers = map[string]int{
	"delta":          0,
	"index":          0,
	"internal/spill": 0,
	"objstore":       1,
	"fs":             2,
	"mount":          3,
	"cmd":            4,
}

const (
	testutilDir = "internal/testutil"
	benchDir    = "bench"
)

// topDir returns the part of a module-relative package path that decides
// its place: "internal/testutil" for it and its subpackages, "internal/X"
// for any other package under internal/, else the first path element.
func topDir(rel string) string {
	if rel == testutilDir || strings.HasPrefix(rel, testutilDir+"/") {
		return testutilDir
	}
	first, rest, _ := strings.Cut(rel, "/")
	if first == "internal" && rest != "" {
		second, _, _ := strings.Cut(rest, "/")
		return first + "/" + second
	}
	return first
}

// checkImport returns nil if the package from may import to, where both
// are full import paths and test says whether the import comes from a
// _test.go file.
func checkImport(from, to string, test bool) error {
	rel, ok := strings.CutPrefix(to, module+"/")
	if !ok {
		return nil // standard library or third party
	}
	fromRel := strings.TrimPrefix(strings.TrimPrefix(from, module), "/")
	src, dst := topDir(fromRel), topDir(rel)
	switch {
	case src == dst:
		return nil
	case dst == benchDir || dst == "cmd":
		return fmt.Errorf("%s imports %s: nothing may import %s/", from, to, dst)
	case fromRel == "" || src == benchDir:
		return nil // the root holds only tests; bench may import anything
	case dst == testutilDir:
		if test {
			return nil
		}
		return fmt.Errorf("%s imports %s from non-test code", from, to)
	}
	if src == testutilDir {
		_, known := layers[dst]
		if !known {
			return fmt.Errorf("%s imports %s: %s/ is not in the layer table of arch_test.go", from, to, dst)
		}
		return nil
	}
	return checkLayers(from, to, src, dst)
}

// checkLayers allows an import only from a higher layer to a lower one.
func checkLayers(from, to, src, dst string) error {
	ls, okSrc := layers[src]
	ld, okDst := layers[dst]
	switch {
	case !okSrc:
		return fmt.Errorf("%s: %s/ is not in the layer table of arch_test.go", from, src)
	case !okDst:
		return fmt.Errorf("%s imports %s: %s/ is not in the layer table of arch_test.go", from, to, dst)
	case ls <= ld:
		return fmt.Errorf("%s imports %s: %s/ may not import %s/ (imports go cmd -> mount -> fs -> objstore -> index|delta)", from, to, src, dst)
	}
	return nil
}

func TestCheckImport(t *testing.T) {
	m := func(rel string) string { return module + "/" + rel }
	tests := []struct {
		from, to string
		test, ok bool
	}{
		{m("cmd/deltafs"), m("mount"), false, true},
		{m("cmd/deltafs"), m("delta"), false, true},
		{m("mount"), m("fs"), false, true},
		{m("fs"), m("objstore"), false, true},
		{m("objstore"), m("index"), false, true},
		{m("objstore"), m("delta"), false, true},
		{m("objstore/segment"), m("objstore"), false, true},
		{m("delta"), "github.com/klauspost/compress/zstd", false, true},
		{m("delta"), m("internal/testutil"), true, true},
		{m("fs"), m("internal/testutil"), true, true},
		{m("internal/testutil"), m("mount"), false, true},
		{m("bench"), m("objstore"), false, true},
		{m("bench/workload"), m("internal/testutil"), false, true},
		{module, m("fs"), true, true},

		{m("delta"), m("index"), false, false},
		{m("index"), m("delta"), false, false},
		{m("index"), m("objstore"), false, false},
		{m("objstore"), m("fs"), false, false},
		{m("objstore"), m("fs"), true, false},
		{m("fs"), m("mount"), false, false},
		{m("mount"), m("cmd/deltafs"), false, false},
		{m("objstore"), m("internal/testutil"), false, false},
		{m("fs"), m("bench"), true, false},
		{m("internal/testutil"), m("cmd/deltafs"), false, false},
		{m("fs"), m("internal/newthing"), false, false},
		{m("objstore"), m("internal/spill"), false, true},
		{m("mount"), m("internal/spill"), false, true},
		{m("internal/spill"), m("objstore"), false, false},
		{m("internal/spill"), m("delta"), false, false},
		{m("newthing"), m("delta"), false, false},
	}
	for _, tt := range tests {
		err := checkImport(tt.from, tt.to, tt.test)
		if (err == nil) != tt.ok {
			t.Errorf("checkImport(%s, %s, test=%v) = %v, want allowed=%v", tt.from, tt.to, tt.test, err, tt.ok)
		}
	}
}

// TestImportDirection lists every package of the module with its
// imports and test imports and fails on any import the layering forbids.
func TestImportDirection(t *testing.T) {
	const format = `{{.ImportPath}}{{"\t"}}{{join .Imports " "}}{{"\t"}}{{join .TestImports " "}} {{join .XTestImports " "}}`
	cmd := exec.Command("go", "list", "-e", "-f", format, "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	packages, ours := 0, 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(fields) != 3 {
			t.Fatalf("unexpected go list line %q", line)
		}
		packages++
		for i, imports := range fields[1:] {
			for _, imp := range strings.Fields(imports) {
				if strings.HasPrefix(imp, module+"/") {
					ours++
				}
				if err := checkImport(fields[0], imp, i == 1); err != nil {
					t.Error(err)
				}
			}
		}
	}
	if packages < 3 || ours == 0 {
		t.Fatalf("go list found %d packages and %d imports of ours; the check is not looking:\n%s", packages, ours, out)
	}
}

// No built binary is committed: the deltafs binary a build leaves at the
// top is ignored (.gitignore), and one under another name (dfs, 22 MB,
// came in with a commit) bloats every clone and goes stale at once.
func TestNoCommittedBinaries(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		testutil.SkipOrFail(t, "git ls-files: %v", err) // CI runs in a clone
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		b, err := os.ReadFile(name)
		if err != nil {
			continue // deleted in the work tree
		}
		if bytes.HasPrefix(b, []byte("\x7fELF")) || bytes.HasPrefix(b, []byte("MZ")) || bytes.HasPrefix(b, []byte{0xcf, 0xfa, 0xed, 0xfe}) {
			t.Errorf("%s is a committed binary (%d bytes)", name, len(b))
		}
	}
}
