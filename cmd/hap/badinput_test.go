package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// badInputLimit is the longest one case of the bad-input corpus may run:
// each is refused at once, or ends by a limit it sets itself; a case past
// this is a hang.
const badInputLimit = 90 * time.Second

// TestBadInputCorpus runs every case under testdata/badinput: a directory
// holding cmd (the arguments, one a line), the input files the arguments
// name (relative to the case's directory, where the command runs), and
// want: the exit status on its first line and the first line of stderr on
// its second. No case may panic, hang or be accepted silently; a change
// to what one prints shows up as a diff of its want file (go test -update
// rewrites them). Cases cover each class of issue 70: unbounded reads,
// sizes that overflow or exhaust memory, time limits, plans edited or
// trusted on load, outputs over inputs, malformed models and clusters.
func TestBadInputCorpus(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("testdata", "badinput"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 20 {
		t.Fatalf("only %d cases in %s", len(entries), root)
	}
	for _, ent := range entries {
		if !ent.IsDir() {
			continue
		}
		t.Run(ent.Name(), func(t *testing.T) {
			dir := filepath.Join(root, ent.Name())
			raw, err := os.ReadFile(filepath.Join(dir, "cmd"))
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
			// The command runs in a copy, so that a case that writes
			// (or, if broken, overwrites) leaves the corpus as it is.
			work := t.TempDir()
			if err := os.CopyFS(work, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			t.Chdir(work)
			type result struct {
				code   int
				stderr string
			}
			done := make(chan result, 1)
			go func() {
				code, _, stderr := runCLI(args...)
				done <- result{code, stderr}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(badInputLimit):
				t.Fatalf("hap %s ran past %v", strings.Join(args, " "), badInputLimit)
			}
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
				t.Fatalf("hap %s crashed:\n%s", strings.Join(args, " "), r.stderr)
			}
			first, _, _ := strings.Cut(r.stderr, "\n")
			got := fmt.Sprintf("%d\n%s\n", r.code, first)
			wantPath := filepath.Join(dir, "want")
			if *update {
				if err := os.WriteFile(wantPath, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantPath)
			if err != nil {
				t.Fatalf("%v (go test -run TestBadInputCorpus -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("hap %s:\n got exit %s\nwant exit %s", strings.Join(args, " "), quoteLines(got), quoteLines(string(want)))
			}
			if code, _ := strconv.Atoi(strings.SplitN(string(want), "\n", 2)[0]); code != 0 && first == "" {
				t.Errorf("hap %s failed without saying why", strings.Join(args, " "))
			}
		})
	}
}

func quoteLines(s string) string {
	code, line, _ := strings.Cut(strings.TrimRight(s, "\n"), "\n")
	return fmt.Sprintf("%s, stderr %q", code, line)
}
