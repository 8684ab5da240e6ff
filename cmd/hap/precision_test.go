package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hap/plan"
)

// plan --precision prices the step in the arithmetic named and records it:
// BERT-Base (batch 256) under dp-ev on a100-8 runs faster in TF32 than in
// FP32 (0.0588 against 0.2095 s measured: its matmuls on the tensor cores)
// and faster again in BF16 (0.0378 s: the 16-bit rate, 2-byte
// activations); an FP32 plan records no precision (the bytes it had before
// the flag), the others record theirs, simulate and explain price and say
// it, and precisions a device lacks or hap does not know are refused in
// one line.
func TestPlanPrecision(t *testing.T) {
	dir := t.TempDir()
	step := map[string]float64{}
	for _, p := range []string{"fp32", "tf32", "bf16"} {
		f := filepath.Join(dir, p+".json")
		if code, out, errs := runCLI("plan", "--model", "bert-base", "--batch", "256", "--cluster", "a100-8", "--strategy", "dp-ev", "--precision", p, "-o", f); code != 0 {
			t.Fatalf("plan --precision %s: %d %s %s", p, code, out, errs)
		}
		pl, err := plan.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		want := p
		if p == "fp32" {
			want = ""
		}
		if got := string(pl.Options.Precision); got != want {
			t.Errorf("--precision %s: the plan records %q, want %q", p, got, want)
		}
		step[p] = pl.Cost.StepSeconds
		code, out, errs := runCLI("simulate", f)
		if code != 0 || !strings.Contains(out, "step time") {
			t.Fatalf("simulate %s: %d %s %s", p, code, out, errs)
		}
		_, ex, _ := runCLI("explain", f)
		if said := strings.Contains(ex, "priced in "+p); said != (p != "fp32") {
			t.Errorf("explain of the %s plan says its precision: %v\n%s", p, said, ex)
		}
	}
	t.Logf("bert-base dp-ev on a100-8: fp32 %.4g s, tf32 %.4g s, bf16 %.4g s", step["fp32"], step["tf32"], step["bf16"])
	if !(step["tf32"] < 0.8*step["fp32"] && step["bf16"] < 0.8*step["tf32"]) {
		t.Errorf("steps fp32 %g, tf32 %g, bf16 %g s: want each at least 20%% faster than the one before", step["fp32"], step["tf32"], step["bf16"])
	}
	f := filepath.Join(dir, "x.json")
	if code, _, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--precision", "tf32", "-o", f); code != 1 || !strings.Contains(errs, "V100-SXM2-16GB (Volta) has no TF32") || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Errorf("tf32 on V100s: exit %d, %q; want one line naming the device", code, errs)
	}
	if code, _, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--precision", "fp8", "-o", f); code != 2 || !strings.Contains(errs, `unknown precision "fp8"`) {
		t.Errorf("--precision fp8: exit %d, %q; want a usage error", code, errs)
	}
	// An edited plan that names a precision hap does not know is refused.
	data, err := os.ReadFile(filepath.Join(dir, "bf16.json"))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(data), `"precision": "bf16"`, `"precision": "fp8"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI("simulate", bad); code == 0 || !strings.Contains(errs, `options.precision "fp8"`) {
		t.Errorf("simulate of a plan with precision fp8: exit %d, %q", code, errs)
	}
}
