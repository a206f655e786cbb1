// Package storetest makes deltafs stores for tests of the packages above
// objstore (mount, cmd/deltafs). It lives apart from testutil because it
// imports objstore, whose own tests import testutil.
package storetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/objstore"
)

// LiveDir is the directory of a store that holds the live tree (the
// mount's own constant is unexported).
const LiveDir = "live"

// NewOffline creates a store in a temporary directory whose live tree
// holds files (slash-separated path -> content) that no revision records
// yet, as a store is after a crash or before its first mount. It returns
// the store's directory.
func NewOffline(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	st, err := objstore.Open(dir, objstore.Config{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, LiveDir)
	if err := os.MkdirAll(live, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(live, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
