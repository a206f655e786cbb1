package deltafs_test

import (
	"os"
	"strings"
	"testing"
)

// TestCIRunsREADMETestCommand keeps README.md and .ci/run in step: the
// test command on the README's first screen (the line marked "# run the
// tests") must be the command CI runs, with -race.
func TestCIRunsREADMETestCommand(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	var command string
	for line := range strings.Lines(string(readme)) {
		if before, ok := strings.CutSuffix(strings.TrimSpace(line), "# run the tests"); ok {
			command = strings.TrimSpace(before)
			break
		}
	}
	if command == "" || !strings.Contains(command, "-race") {
		t.Fatalf("README.md has no test command with -race marked %q (found %q)", "# run the tests", command)
	}
	if !strings.Contains(string(ci), " "+command+"\n") {
		t.Fatalf(".ci/run does not run the README's test command %q", command)
	}
}
