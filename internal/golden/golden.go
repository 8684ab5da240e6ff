// Package golden compares a test's output with a golden file under the
// test package's testdata directory, or rewrites the file when the test
// binary runs with its -update flag (each test package declares its own:
// flags belong to the binary, not to this package).
//
// It is imported by tests only, and imports nothing of hap.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Compare checks got against testdata/name; with update set it writes
// got there instead. A missing file or a difference fails the test with
// both texts and how to accept the new one.
func Compare(t testing.TB, name string, got []byte, update bool) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file (run go test -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
