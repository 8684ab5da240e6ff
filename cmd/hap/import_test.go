package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"hap/importer"
	"hap/ir"
)

const transformerTrace = "../../importer/testdata/transformer_encoder.aten.json"

// A raw trace (what hap_torch writes) imports without Python, and hap plan
// takes the graph.
func TestImportTraceThenPlan(t *testing.T) {
	dir := t.TempDir()
	g := filepath.Join(dir, "te.json")
	code, _, errs := runCLI("import", transformerTrace, "-o", g)
	if code != 0 {
		t.Fatalf("import: exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "98 ops") || !strings.Contains(errs, "attention dropout 0.1 dropped") {
		t.Errorf("stderr %q: want the op count and the note on attention dropout", errs)
	}
	if code, _, errs := runCLI("plan", "--model", g, "--cluster", "paper-8", "--devices", "0-1", "-o", filepath.Join(dir, "plan.json")); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
}

// An op hap does not know: one line with the op, the module and the doc,
// exit 1, and -o left as it was.
func TestImportUnknownOpWritesNothing(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(transformerTrace)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.aten.json")
	os.WriteFile(bad, []byte(strings.Replace(string(data), `"aten.native_layer_norm.default"`, `"aten.native_batch_norm.default"`, 1)), 0o644)
	out := filepath.Join(dir, "model.json")
	os.WriteFile(out, []byte("before\n"), 0o644)
	code, _, errs := runCLI("import", bad, "-o", out)
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errs)
	}
	for _, want := range []string{"aten.native_batch_norm.default", "module encoder.layers.0.norm1", "docs/import.md"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr %q lacks %q", errs, want)
		}
	}
	if n := strings.Count(strings.TrimSpace(errs), "\n"); n != 0 {
		t.Errorf("stderr is %d lines: %q", n+1, errs)
	}
	if got, _ := os.ReadFile(out); string(got) != "before\n" {
		t.Errorf("-o was overwritten: %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("import left files behind: %v", entries)
	}
}

func TestImportNeedsAFactory(t *testing.T) {
	code, _, errs := runCLI("import", "model.py")
	if code != 2 || !strings.Contains(errs, "FILE.py:FACTORY") {
		t.Errorf("exit %d, stderr %q; want a usage error naming FILE.py:FACTORY", code, errs)
	}
	code, _, errs = runCLI("import", "../../examples/torch/mlp.py:model", "--python", filepath.Join(t.TempDir(), "no-python"))
	if code != 1 || !strings.Contains(errs, "--python") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("exit %d, stderr %q; want one line pointing to --python", code, errs)
	}
}

// torchPython is an interpreter with torch and torchvision, or the test
// is skipped saying why.
func torchPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("HAP_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if err := exec.Command(py, "-c", "import torch, torchvision").Run(); err != nil {
		t.Skipf("skipping: %s has no torch and torchvision (set $HAP_PYTHON to one that does)", py)
	}
	return py
}

// The whole way: hap import runs the embedded exporter on an example
// factory, from another directory, and hap plan takes the graph.
func TestImportFactoryEndToEnd(t *testing.T) {
	py := torchPython(t)
	dir := t.TempDir()
	factory, err := filepath.Abs("../../examples/torch/mlp.py")
	if err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(dir, "mlp.json")
	code, _, errs := runCLI("import", factory+":model", "--python", py, "-o", g, "--raw", filepath.Join(dir, "mlp.aten.json"))
	if code != 0 {
		t.Fatalf("import: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI("plan", "--model", g, "--cluster", "paper-8", "-o", filepath.Join(dir, "plan.json")); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	// A factory that fails: its error in one line.
	broken := filepath.Join(dir, "broken.py")
	os.WriteFile(broken, []byte("def model():\n    raise ValueError('no such model')\n"), 0o644)
	code, _, errs = runCLI("import", broken+":model", "--python", py, "-o", filepath.Join(dir, "x.json"))
	if code != 1 || !strings.Contains(errs, "ValueError: no such model") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("exit %d, stderr %q; want the factory's error in one line", code, errs)
	}
}

// torch 2.x names training-mode batch norm _native_batch_norm_legit, with
// native_batch_norm's arguments and outputs: the same trace under either
// name imports to the same graph.
func TestImportBatchNormTorch2Name(t *testing.T) {
	py := torchPython(t)
	dir := t.TempDir()
	raw := filepath.Join(dir, "mobile.aten.json")
	if code, _, errs := runCLI("import", "testdata/torchref/ops.py:mobile", "--python", py, "-o", filepath.Join(dir, "m.json"), "--raw", raw); code != 0 {
		t.Fatalf("import: exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	renamed := bytes.ReplaceAll(data, []byte(`"aten.native_batch_norm.default"`), []byte(`"aten._native_batch_norm_legit.default"`))
	if bytes.Equal(renamed, data) {
		t.Fatal("the trace has no native_batch_norm")
	}
	a, err := importer.Import(data)
	if err != nil {
		t.Fatal(err)
	}
	b, err := importer.Import(renamed)
	if err != nil {
		t.Fatalf("torch 2.x's name: %v", err)
	}
	var ja, jb bytes.Buffer
	if err := ir.EncodeJSON(&ja, a.Graph); err != nil {
		t.Fatal(err)
	}
	if err := ir.EncodeJSON(&jb, b.Graph); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ja.Bytes(), jb.Bytes()) {
		t.Error("the graphs differ")
	}
}
