package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A plan written with -o names its model and cluster files relative to
// itself, so that explain, simulate and verify find them from any working
// directory; --model and --cluster read them from elsewhere, and must be
// the same inputs (the plan's hashes).
func TestPlansWorkFromAnyDirectory(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	if err := os.MkdirAll("in", 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI("models", "export", "mlp-tiny", "-o", "in/m.json"); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI("plan", "--model", "in/m.json", "--cluster", "paper-8", "-o", "out/p.json"); code == 0 {
		t.Fatalf("plan into a missing directory: exit 0: %s", errs)
	}
	if err := os.MkdirAll("out", 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI("plan", "--model", "in/m.json", "--cluster", "paper-8", "-o", "out/p.json"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	doc, err := os.ReadFile("out/p.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte(`"spec": "../in/m.json"`)) {
		t.Fatalf("the plan does not name its model relative to itself:\n%s", doc[:min(len(doc), 400)])
	}
	plan := filepath.Join(root, "out", "p.json")
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"explain", plan}, {"simulate", plan}, {"verify", plan, "--steps", "1"}} {
		if code, _, errs := runCLI(args...); code != 0 {
			t.Errorf("%s from another directory: exit %d: %s", args[0], code, errs)
		}
	}
	if code, _, errs := runCLI("explain", plan, "--model", filepath.Join(root, "in", "m.json")); code != 0 {
		t.Errorf("explain --model (the same model): exit %d: %s", code, errs)
	}
	code, _, errs := runCLI("explain", plan, "--model", "mlp")
	if code == 0 || !strings.Contains(errs, "given in place of the plan's ../in/m.json") {
		t.Errorf("explain --model (another model): exit %d: %s", code, errs)
	}
	code, _, errs = runCLI("explain", plan, "--cluster", "paper-16")
	if code == 0 || !strings.Contains(errs, "cluster paper-16 (given in place of the plan's paper-8) no longer matches") {
		t.Errorf("explain --cluster (another cluster): exit %d: %s", code, errs)
	}
}

// An output that names one of the command's inputs is refused before
// anything is written; the input is left as it was.
func TestOutputOverAnInputIsRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	if code, _, errs := runCLI("models", "export", "mlp-tiny", "-o", "m.json"); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	before, err := os.ReadFile("m.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("m.json", "alias.json"); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{"m.json", "./m.json", "alias.json"} {
		code, _, errs := runCLI("plan", "--model", "m.json", "--cluster", "paper-8", "-o", out)
		if code != 2 || !strings.Contains(errs, "is the --model file: refusing to overwrite an input") {
			t.Errorf("plan -o %s: exit %d: %s", out, code, errs)
		}
	}
	if after, _ := os.ReadFile("m.json"); !bytes.Equal(after, before) {
		t.Fatal("the model file changed")
	}
	if code, _, errs := runCLI("plan", "--model", "m.json", "--cluster", "paper-8", "-o", "p.json"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	code, _, errs := runCLI("simulate", "p.json", "--trace", "p.json")
	if code != 2 || !strings.Contains(errs, "--trace p.json is the plan file") {
		t.Errorf("simulate --trace over the plan: exit %d: %s", code, errs)
	}
}

// A file argument is read up to a size that fits its format: an endless
// one is one error, not a machine out of memory.
func TestEndlessInputsAreOneError(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--model", "/dev/zero", "--cluster", "paper-8"}, "model /dev/zero: file too large"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "/dev/zero"}, "cluster file /dev/zero: file too large"},
		{[]string{"explain", "/dev/zero"}, "plan /dev/zero: file too large"},
	} {
		code, _, errs := runCLI(c.args...)
		if code != 1 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, %q; want one line with %q", c.args, code, errs, c.want)
		}
	}
}

// --time-limit bounds the whole command, however small: a share of it
// that rounded to 0 once read as no limit at all (1ns searched for
// minutes). The bound checked is loose, a property rather than a timing:
// the search it guards against ran 148 s on this case.
func TestTinyTimeLimitsHold(t *testing.T) {
	began := time.Now()
	code, out, errs := runCLI("plan", "--model", "bert-base-tiny", "--cluster", "paper-16", "--time-limit", "1ns", "--devices", "all")
	took := time.Since(began)
	if code != 0 && !strings.Contains(errs, "--time-limit 1ns ran out") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if took > 60*time.Second {
		t.Fatalf("--time-limit 1ns took %v: %s%s", took, out, errs)
	}
}
