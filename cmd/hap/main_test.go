package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = dispatch(&env{stdout: &out, stderr: &errb}, args)
	return code, out.String(), errb.String()
}

func TestModelsJSONListsTheZoo(t *testing.T) {
	code, out, errs := runCLI("models", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rows []struct {
		Name   string  `json:"name"`
		Params int64   `json:"params"`
		FLOPs  float64 `json:"flops_per_sample"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rows {
		got[r.Name] = r.Params
		if r.FLOPs <= 0 {
			t.Errorf("%s: FLOPs per sample %v", r.Name, r.FLOPs)
		}
	}
	for _, n := range []string{"mlp", "vgg19", "vit", "bert-base", "bert-moe", "gpt2", "mlp-tiny", "vgg19-tiny", "vit-tiny", "bert-base-tiny", "bert-moe-tiny", "gpt2-tiny"} {
		if got[n] == 0 {
			t.Errorf("zoo lacks %s", n)
		}
	}
}

func TestExportThenTrainFromFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "m.json")
	if code, _, errs := runCLI("models", "export", "mlp-tiny", "--batch", "4", "-o", f); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	code, out, errs := runCLI("train", "--model", f, "--steps", "3", "--json")
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errs)
	}
	var rows []struct{ Loss float64 }
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("rows %q: %v", out, err)
	}
}

// Bad input: one line on stderr, non-zero exit, never a panic.
func TestBadInputGetsOneClearLine(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.json")
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, nil, 0o644)
	notPlan := filepath.Join(dir, "cluster.yaml")
	os.WriteFile(notPlan, []byte("nodes:\n  - device: rtx 4090\n    count: 1\n"), 0o644)
	wrongType := filepath.Join(dir, "wrong.json")
	os.WriteFile(wrongType, []byte("{\"schema\":\n 3}"), 0o644)
	os.WriteFile(broken, []byte(`{"format":"hap.graph","version":1,"name":"x","tensors":[{"name":"x","kind":"input","dtype":"float32","shape":[2,-1]}],"ops":[]}`), 0o644)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"models", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"models", "export", "vit"}, 2, "missing -o FILE"},
		{[]string{"models", "export", "nope", "-o", "x"}, 2, `unknown model "nope"`},
		{[]string{"models", "export", "vit", "-o", filepath.Join(dir, "no", "such", "dir.json")}, 1, "no such file or directory"},
		{[]string{"train"}, 2, "missing --model"},
		{[]string{"train", "--model", "mlp-tiny", "--steps", "0"}, 2, "--steps"},
		{[]string{"train", "--model", "mlp-tiny", "--dtype", "int64"}, 2, "--dtype"},
		{[]string{"train", "--model", "nope"}, 1, `unknown model "nope"`},
		{[]string{"train", "--model", broken}, 1, `tensors[0] ("x"): field "shape"`},
		{[]string{"train", "--model", broken, "--batch", "3"}, 1, "broken.json"},
		// 0 means "the default" only when the flag is left out.
		{[]string{"train", "--model", "mlp-tiny", "--batch", "0"}, 2, "--batch 0: must be positive"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--node-limit", "0"}, 2, "--node-limit 0: must be positive"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--batch", "-3"}, 2, "--batch -3: must be positive"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--bound-lps", "0"}, 2, "--bound-lps 0: must be positive"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "--bound-lps", "4"}, 2, "--bound-lps proves the synthesizer's bound"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--time-limit", "0s"}, 2, "--time-limit 0s: must be positive"},
		{[]string{"verify", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "--experts", "0"}, 2, "--experts 0"},
		{[]string{"bench", "--suite", "paper", "--node-limit", "-1"}, 2, "--node-limit -1"},
		{[]string{"models", "export", "vit", "--batch", "0", "-o", filepath.Join(dir, "x.json")}, 2, "--batch 0"},
		{[]string{"run", filepath.Join(dir, "p.json"), "--nproc", "0"}, 2, "--nproc 0"},
		{[]string{"profile", "-o", filepath.Join(dir, "p.json"), "--block", "0"}, 2, "--block 0"},
		{[]string{"explain", empty}, 1, "empty.json: not a plan document (hap plan -o writes one): empty document"},
		{[]string{"simulate", notPlan}, 1, "cluster.yaml: not a plan document (hap plan -o writes one): line 1: invalid character"},
		{[]string{"verify", wrongType}, 1, `wrong.json: not a plan document (hap plan -o writes one): line 2: field "schema": got JSON number, want string`},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", filepath.Join(dir, "no-such.yaml")}, 1, "no such file"},
	}
	for _, c := range cases {
		code, _, errs := runCLI(c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", c.args, code, c.code, errs)
		}
		if strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: stderr %q, want one line mentioning %q", c.args, errs, c.want)
		}
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{}, {"help"}, {"models", "--help"}, {"train", "--help"}} {
		if code, out, _ := runCLI(args...); code != 0 || out == "" {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
}

func TestDurationReadsWithoutENotation(t *testing.T) {
	for _, tc := range []struct {
		s    float64
		want string
	}{
		{0, "0 s"}, {2, "2.000 s"}, {0.8342, "0.8342 s"}, {0.01, "0.01000 s"}, {1234.56, "1235 s"},
		{0.007021, "7.021 ms"}, {1.227e-6, "1.227 µs"}, {3e-9, "3.000 ns"},
	} {
		if got := duration(tc.s); got != tc.want {
			t.Errorf("duration(%g) = %q, want %q", tc.s, got, tc.want)
		}
	}
	for _, tc := range []struct {
		g    float64
		want string
	}{{7.2e-16, "0%"}, {0.595, "59.5%"}, {0.0025, "0.25%"}} {
		if got := gapPercent(tc.g); got != tc.want {
			t.Errorf("gapPercent(%g) = %q, want %q", tc.g, got, tc.want)
		}
	}
}

func TestDurationsOfOneLineShareAUnit(t *testing.T) {
	if got := durationIn(0.005193, 0.02939); got != "0.005193 s" {
		t.Errorf("durationIn(0.005193, 0.02939) = %q, want seconds like the reference", got)
	}
	if got := durationIn(2.5e-4, 1.2e-3); got != "0.2500 ms" {
		t.Errorf("durationIn(2.5e-4, 1.2e-3) = %q, want ms", got)
	}
	// Far below the line's unit, a value takes its own (mlp-tiny's
	// compute beside a 1 ms step read 2.754e-05 ms).
	if got := durationIn(2.754e-8, 1.052e-3); got != "0.02754 µs" {
		t.Errorf("durationIn(2.754e-8, 1.052e-3) = %q, want µs", got)
	}
}

func TestFigureReadsWithoutENotation(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, "0"}, {4e-5, "<0.001"}, {0.00102, "0.00102"}, {0.351, "0.351"}, {154.2, "154"}, {1234.5, "1234"}, {-2, "-2"}} {
		if got := figure(tc.v); got != tc.want {
			t.Errorf("figure(%g) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// hap run trains every step on hap train's synthetic batch: the loss falls
// and matches single-device training's, step for step, to float32 rounding.
func TestRunLossesAreTrainLosses(t *testing.T) {
	pf := filepath.Join(t.TempDir(), "p.json")
	if code, _, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", "paper-8", "-o", pf); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	losses := func(args ...string) []float64 {
		code, out, errs := runCLI(append(args, "--steps", "4", "--json")...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var rows []struct{ Loss float64 }
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 4 {
			t.Fatalf("%v: output %q: %v", args, out, err)
		}
		var l []float64
		for _, r := range rows {
			l = append(l, r.Loss)
		}
		return l
	}
	run, train := losses("run", pf), losses("train", "--model", "mlp-tiny")
	for k := range train {
		if math.Abs(run[k]-train[k]) > 1e-5*math.Abs(train[k]) {
			t.Errorf("step %d: hap run loss %v, hap train %v", k+1, run[k], train[k])
		}
		if k > 0 && !(run[k] < run[k-1]) {
			t.Errorf("step %d: loss %v did not fall from %v", k+1, run[k], run[k-1])
		}
	}
}

// hap models cost prices a model's compute by op class on one GPU, beside
// the matmul-only figure, and refuses a device outside the catalog.
func TestModelsCost(t *testing.T) {
	code, out, errs := runCLI("models", "cost", "--model", "vgg19-tiny", "--device", "P100-PCIE-16GB")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"on one P100-PCIE-16GB (fp32)", "conv", "matmul", "total", "matmul-only:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, _, errs = runCLI("models", "cost", "--model", "vgg19-tiny", "--device", "Z900")
	if code == 0 || !strings.Contains(errs, "Z900") || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Errorf("unknown device: exit %d: %q; want one line naming it", code, errs)
	}
	// The precisions hap plan takes, spelled as it takes them; one the
	// device lacks, or an unknown one, refused in a line.
	if code, out, errs := runCLI("models", "cost", "--model", "bert-base", "--device", "A100-SXM4-80GB", "--precision", "TF32"); code != 0 || !strings.Contains(out, "(tf32)") {
		t.Errorf("--precision TF32: exit %d: %s %s", code, out, errs)
	}
	for _, bad := range [][]string{{"--device", "V100-SXM2-16GB", "--precision", "bf16"}, {"--precision", "fp8"}} {
		args := append([]string{"models", "cost", "--model", "vgg19-tiny"}, bad...)
		if code, _, errs := runCLI(args...); code == 0 || strings.Count(strings.TrimSpace(errs), "\n") > 0 || !strings.Contains(errs, "precision") && !strings.Contains(errs, "BF16") {
			t.Errorf("%v: exit %d: %q; want one line", bad, code, errs)
		}
	}
}
