package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/cuda"
	"hap/cuda/cudatest"
	"hap/ir"
)

// The CUDA commands against the CPU stand-in for the NVIDIA libraries
// (package cuda/cudatest), which the environment points the discovery at.

var fake cudatest.Builder

func runCLIEnv(getenv func(string) string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = dispatch(&env{stdout: &out, stderr: &errb, getenv: getenv}, args)
	return code, out.String(), errb.String()
}

// pairCluster is two A100s in one machine; its profile line, when given,
// names a measured profile beside it.
func pairCluster(t *testing.T, dir, profile string) string {
	t.Helper()
	src := "name: pair\nnodes:\n  - {name: a100, device: A100, count: 2, intra: {class: nvlink, bandwidth: 200GB/s}}\n"
	if profile != "" {
		src += "profile: " + profile + "\n"
	}
	f := filepath.Join(dir, "pair-"+strings.TrimSuffix(profile, ".yaml")+".yaml")
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRunCUDAOnStandIn(t *testing.T) {
	getenv := fake.Env(t)
	dir := t.TempDir()
	pf := filepath.Join(dir, "p.json")
	if code, _, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", pairCluster(t, dir, ""), "--strategy", "zero3", "-o", pf); code != 0 {
		t.Fatal(errs)
	}
	type step struct {
		Loss      float64
		PerDevice []float64 `json:"per_device_seconds"`
	}
	decode := func(out string) []step {
		var s []step
		if err := json.Unmarshal([]byte(out), &s); err != nil || len(s) != 2 {
			t.Fatalf("output %q: %v", out, err)
		}
		return s
	}
	code, out, errs := runCLI("run", pf, "--steps", "2", "--json")
	if code != 0 {
		t.Fatalf("cpu: exit %d: %s", code, errs)
	}
	want := decode(out)
	code, out, errs = runCLIEnv(getenv, "run", pf, "--backend", "cuda", "--steps", "2", "--block", "32", "--json")
	if code != 0 {
		t.Fatalf("cuda: exit %d: %s", code, errs)
	}
	got := decode(out)
	for k := range want {
		if rel := math.Abs(got[k].Loss-want[k].Loss) / math.Abs(want[k].Loss); rel > 1e-5 || len(got[k].PerDevice) != 2 {
			t.Errorf("step %d: cuda loss %v (%d device times), cpu %v", k+1, got[k].Loss, len(got[k].PerDevice), want[k].Loss)
		}
	}
	// Collectives on the compute stream train the same.
	code, out, errs = runCLIEnv(getenv, "run", pf, "--backend", "cuda", "--steps", "2", "--block", "32", "--one-stream", "--json")
	if code != 0 {
		t.Fatalf("cuda --one-stream: exit %d: %s", code, errs)
	}
	for k, s := range decode(out) {
		if rel := math.Abs(s.Loss-want[k].Loss) / math.Abs(want[k].Loss); rel > 1e-5 {
			t.Errorf("step %d: cuda --one-stream loss %v, cpu %v", k+1, s.Loss, want[k].Loss)
		}
	}
	if code, _, errs := runCLI("run", pf, "--one-stream"); code != 2 || !strings.Contains(errs, "--one-stream needs --backend cuda") {
		t.Errorf("--one-stream on the cpu backend: exit %d, stderr %q", code, errs)
	}
	code, out, errs = runCLIEnv(getenv, "run", pf, "--backend", "cuda", "--steps", "1", "--block", "32")
	if code != 0 || !strings.Contains(out, "device 1: GPU 1 (Fake GPU 1)") || !strings.Contains(out, "per device: ") {
		t.Errorf("cuda text: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// Three plan devices on a two-GPU machine: one clear line.
	p3 := filepath.Join(dir, "p3.json")
	if code, _, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "-o", p3); code != 0 {
		t.Fatal(errs)
	}
	code, _, errs = runCLIEnv(getenv, "run", p3, "--backend", "cuda")
	if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "the plan has 8 devices but this machine has 2 GPU(s)") {
		t.Errorf("8 devices on 2 GPUs: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLIEnv(getenv, "run", pf, "--backend", "cuda", "--block", "48"); code != 2 || !strings.Contains(errs, "--block") {
		t.Errorf("--block 48: exit %d, stderr %q", code, errs)
	}
}

func TestProfileOnStandIn(t *testing.T) {
	getenv := fake.Env(t)
	dir := t.TempDir()
	prof := filepath.Join(dir, "measured.yaml")
	code, out, errs := runCLIEnv(getenv, "profile", "--backend", "cuda", "-o", prof, "--model", "mlp-tiny", "--repeat", "1", "--block", "32")
	if code != 1 || !strings.Contains(errs, "cannot tell which catalog device") || !strings.Contains(errs, "give its type") {
		t.Errorf("unrecognised GPU: exit %d, stderr %q", code, errs)
	}
	code, out, errs = runCLIEnv(getenv, "profile", "--backend", "cuda", "-o", prof, "--model", "mlp-tiny", "--device-type", "A100", "--repeat", "1", "--block", "32")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"2 × Fake GPU 0 (catalog A100-SXM4-40GB)", "matmul", "memory bandwidth", "all-reduce over 2 GPUs (nvlink)", "wrote " + prof} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The cost package reads the file, and a cluster that names it gets
	// its figures.
	p, err := cost.LoadProfile(prof)
	if err != nil {
		t.Fatal(err)
	}
	d := p.Devices["A100-SXM4-40GB"]
	if d.MemBandwidth <= 0 || d.Classes[ir.ClassMatMul].FLOPS <= 0 || p.Links["nvlink"].Bandwidth <= 0 || p.Links["nvlink"].Latency == nil {
		t.Errorf("profile %+v", p)
	}
	c, err := cluster.Load(pairCluster(t, dir, "measured.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(c, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.FLOPRate(0, ir.ClassMatMul), d.Classes[ir.ClassMatMul].FLOPS; math.Abs(got-want) > 1e-9*want {
		t.Errorf("the cost model's matmul rate is %g, the profile says %g", got, want)
	}
	code, out, errs = runCLIEnv(getenv, "profile", "--backend", "cuda", "-o", prof, "--model", "mlp-tiny", "--device-type", "A100", "--repeat", "1", "--block", "32", "--json")
	var res struct {
		GPUs    int
		Classes []struct{ Class string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.GPUs != 2 || len(res.Classes) == 0 {
		t.Errorf("--json: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// Without a driver, both cuda commands say so in one line listing where
// they looked. (On a machine with a driver there is nothing to check.)
func TestCUDACommandsWithoutDriver(t *testing.T) {
	if _, err := cuda.Open(cuda.Options{}); !errors.Is(err, cuda.ErrNoDriver) {
		t.Skipf("a CUDA driver is present (%v): the no-driver message cannot be checked here", err)
	}
	dir := t.TempDir()
	pf := filepath.Join(dir, "p.json")
	if code, _, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "-o", pf); code != 0 {
		t.Fatal(errs)
	}
	for _, args := range [][]string{{"run", pf, "--backend", "cuda"}, {"profile", "--backend", "cuda", "-o", filepath.Join(dir, "x.yaml")}} {
		code, _, errs := runCLI(args...)
		if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "no CUDA driver found (looked in: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}
