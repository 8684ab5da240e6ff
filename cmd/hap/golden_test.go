package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"hap/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// buildVersions are the entries of a plan's solver.versions that name the
// build rather than anything that shapes the plan, masked in the golden
// plans: "hap" is the VCS state of the tree built (a commit, "+modified",
// or "dev" under go test), and "go" the toolchain, which CI and a
// developer's machine need not share. "hap-encoding" and "cbc" stay: a
// new formulation or another CBC may well make another plan, and the
// golden files say which made theirs.
var buildVersions = regexp.MustCompile(`("name": "(?:hap|go)",\s*"version": )"[^"]*"`)

// maskBuild replaces the build's versions in a plan document by a fixed
// string, failing the test unless it finds exactly the two entries: a
// change in how the document spells them must not slip past the mask.
func maskBuild(t *testing.T, doc []byte) []byte {
	t.Helper()
	if n := len(buildVersions.FindAll(doc, -1)); n != 2 {
		t.Fatalf("found %d of the hap and go version entries in the plan, want 2", n)
	}
	return buildVersions.ReplaceAll(doc, []byte(`${1}"(masked: the build's, not the plan's)"`))
}

// The plans hap plan makes for the tiny zoo models on a cluster of two GPU
// types (paper-8: 2 V100 + 6 P100) and one of three on three machines
// (modern-24: 8 A100 + 8 V100 + 8 T4), byte for byte: each is the plan
// document `hap plan --model M --cluster C --json` prints (the default
// device search, node limit and memory fraction; no wall time recorded, so
// the same inputs give the same bytes), its build versions masked. A
// change to the planner that changes a plan — its rules, lengths,
// program, simulated cost, proven bound, or the search's record — shows
// up here as a diff to review; accept it with
//
//	go test ./cmd/hap -run TestGoldenPlans -update
//
// All twelve take about 20 s on two cores.
func TestGoldenPlans(t *testing.T) {
	if *update {
		if err := os.MkdirAll(filepath.Join("testdata", "golden"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, cl := range []string{"paper-8", "modern-24"} {
		for _, m := range []string{"mlp-tiny", "vgg19-tiny", "vit-tiny", "bert-base-tiny", "bert-moe-tiny", "gpt2-tiny"} {
			t.Run(m+"/"+cl, func(t *testing.T) {
				code, out, errs := runCLI("plan", "--model", m, "--cluster", cl, "--json")
				if code != 0 {
					t.Fatalf("hap plan: exit %d: %s", code, errs)
				}
				golden.Compare(t, filepath.Join("golden", m+"."+cl+".plan.json"), maskBuild(t, []byte(out)), *update)
			})
		}
	}
}
