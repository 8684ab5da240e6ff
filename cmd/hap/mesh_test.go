package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// megatron on paper-16 (8 machines × 2 GPUs) is a 2-D mesh plan: the
// document carries the mesh, and plan, simulate and explain all work on
// the full-size model.
func TestMegatronMeshPlanSimulateExplain(t *testing.T) {
	f := filepath.Join(t.TempDir(), "plan.json")
	code, out, errs := runCLI("plan", "--model", "bert-base", "--cluster", "paper-16", "--strategy", "megatron", "-o", f, "--json")
	if code != 0 {
		t.Fatalf("plan: %d %s", code, errs)
	}
	var doc struct {
		Mesh struct {
			Replicas [][]int `json:"replicas"`
		} `json:"mesh"`
		Cost struct {
			StepSeconds float64           `json:"step_seconds"`
			PerDevice   []json.RawMessage `json:"per_device"`
		} `json:"cost"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Mesh.Replicas) != 8 || len(doc.Mesh.Replicas[0]) != 2 || doc.Cost.StepSeconds <= 0 || len(doc.Cost.PerDevice) != 16 {
		t.Errorf("mesh %v, step %g s, %d devices", doc.Mesh.Replicas, doc.Cost.StepSeconds, len(doc.Cost.PerDevice))
	}
	code, out, errs = runCLI("simulate", f)
	if code != 0 || !strings.Contains(out, "step time") {
		t.Errorf("simulate: %d %s %s", code, errs, out)
	}
	code, out, errs = runCLI("explain", f)
	if code != 0 || !strings.Contains(out, "Mesh: 8 replicas × 2 ranks") || !strings.Contains(out, "replicas") {
		t.Errorf("explain: %d %s %s", code, errs, out)
	}
}

// A mesh plan file verifies after the round trip through JSON; with an
// all-gather among a replica's ranks deleted by hand, verify names the
// unmet precondition.
func TestMeshPlanFileVerifiesAndBrokenOneIsNamed(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "plan.json")
	if code, _, errs := runCLI("plan", "--model", "bert-moe-tiny", "--cluster", "paper-32", "--strategy", "megatron", "-o", f); code != 0 {
		t.Fatalf("plan: %s", errs)
	}
	if code, out, errs := runCLI("verify", f, "--json"); code != 0 || !strings.Contains(out, `"pass": true`) {
		t.Fatalf("verify: %d %s %s", code, errs, out)
	}
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var prog []map[string]any
	if err := json.Unmarshal(doc["program"], &prog); err != nil {
		t.Fatal(err)
	}
	// An all-gather among a replica's ranks (tensor parallelism's
	// layout change back to whole activations).
	tensor := ""
	for i, in := range prog {
		if in["axis"] == "ranks" && in["collective"] == "all_gather" {
			tensor = in["tensor"].(string)
			prog = append(prog[:i], prog[i+1:]...)
			break
		}
	}
	if tensor == "" {
		t.Fatal("the plan has no all-gather among ranks")
	}
	doc["program"], _ = json.Marshal(prog)
	broken := filepath.Join(dir, "broken.json")
	data, _ = json.Marshal(doc)
	os.WriteFile(broken, data, 0o644)
	code, _, errs := runCLI("verify", broken)
	if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "precondition") || !strings.Contains(errs, tensor) {
		t.Errorf("verify of a broken mesh plan: exit %d, stderr %q; want one line naming the precondition on %q", code, errs, tensor)
	}
}
