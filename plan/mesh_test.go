package plan

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"hap/models"
	"hap/strategy"
)

// A megatron mesh plan survives its JSON document: written, read and
// resolved, it is the same program, and it simulates to the same step.
func TestMeshPlanRoundTrip(t *testing.T) {
	in, p, pl := strategyPlan(t, "bert-base-tiny", "paper-32", "megatron")
	if pl.Mesh == nil || len(pl.Mesh.Replicas) != 8 {
		t.Fatalf("plan mesh %+v, want 8 replicas", pl.Mesh)
	}
	b, err := pl.Encode()
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	_, q, err := back.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if q.Devices != p.Devices || !reflect.DeepEqual(q.Mesh, p.Mesh) || !reflect.DeepEqual(q.Segments, p.Segments) ||
		!reflect.DeepEqual(q.Leaves, p.Leaves) || !reflect.DeepEqual(q.Instrs, p.Instrs) {
		t.Fatal("the resolved program differs from the one planned")
	}
	again, err := Build(in, q, "megatron", Solver{Status: "heuristic"})
	if err != nil {
		t.Fatal(err)
	}
	if b2, _ := again.Encode(); !bytes.Equal(b, b2) {
		t.Error("re-planning the resolved program gave different bytes")
	}
}

// The synthesizer keeps the hand-written strategies in the running, mesh
// megatron among them: on paper-16 it still plans, and its plan is no
// slower than megatron's.
func TestSynthesizeWithMeshBaseline(t *testing.T) {
	in, err := LoadInputs("bert-base-tiny", models.Options{Batch: 32}, "paper-16")
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build("megatron", in.Graph, in.Cluster)
	if err != nil || p.Mesh == nil {
		t.Fatalf("megatron on paper-16: %v (mesh %v)", err, p != nil && p.Mesh != nil)
	}
	meg, err := Simulate(in, p)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := Synthesize(context.Background(), in, SynthOptions{TimeLimit: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Cost.StepSeconds > meg.StepSeconds {
		t.Errorf("hap plan %.4g s, slower than megatron's %.4g s", pl.Cost.StepSeconds, meg.StepSeconds)
	}
	if (pl.Mesh != nil) != (pl.Solver.Chosen == "megatron") {
		t.Errorf("plan has mesh %v but chose %q", pl.Mesh != nil, pl.Solver.Chosen)
	}
}
