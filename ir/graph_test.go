package ir

import (
	"errors"
	"strings"
	"testing"
)

func TestBuilderReportsShapeMismatchWithOpAndShapes(t *testing.T) {
	b := NewBuilder("bad", Float32)
	x := b.Input("x", Float32, 2, 3)
	w := b.Param("w", 4, 5)
	func() {
		defer b.Scope("fc")()
		b.MatMul(x, w)
	}()
	_, err := b.Finish(NoTensor)
	if err == nil {
		t.Fatal("mismatched matmul accepted")
	}
	for _, want := range []string{`"fc.matmul"`, "matmul", "[2,3]", "[4,5]", "shape mismatch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func smallGraph(t *testing.T) *Graph {
	b := NewBuilder("g", Float64)
	x := b.Input("x", Float64, 2, 3)
	h := b.ReLU(b.MatMul(x, b.Param("w", 3, 4)))
	g, err := b.Finish(b.CrossEntropy(h, b.Label("y", 2)))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestCheckNamesEachDefect(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(g *Graph)
		want   string
	}{
		{"cycle", func(g *Graph) { g.Ops[0].Inputs[0] = g.Ops[1].Outputs[0] }, "before it is computed"},
		{"dangling", func(g *Graph) { g.Tensors[g.Ops[1].Outputs[0]].Producer = NoOp }, "dangling"},
		{"shape", func(g *Graph) { g.Tensors[g.Ops[0].Outputs[0]].Shape = Shape{2, 5} }, "declared float64[2,5] but computes float64[2,4]"},
		{"duplicate name", func(g *Graph) { g.Tensors[1].Name = g.Tensors[0].Name }, "used twice"},
		{"unknown kind", func(g *Graph) { g.Ops[1].Kind = "softplus" }, `unknown kind "softplus"`},
		{"loss shape", func(g *Graph) { g.Loss = 0 }, "must be a float scalar"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := smallGraph(t)
			c.break_(g)
			err := g.Check()
			if !errors.Is(err, ErrInvalidGraph) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check() = %v, want an ErrInvalidGraph mentioning %q", err, c.want)
			}
		})
	}
}

func TestBuildTrainStepStructure(t *testing.T) {
	g := smallGraph(t)
	step, err := BuildTrainStep(g, Adam(1e-3))
	if err != nil {
		t.Fatal(err)
	}
	if step.Train.ForwardOps != len(g.Ops) || len(step.Train.Params) != 1 {
		t.Fatalf("train info %+v", step.Train)
	}
	ps := step.Train.Params[0]
	if len(ps.State) != 2 || step.Train.Step == NoTensor {
		t.Fatalf("adam state missing: %+v", ps)
	}
	for i := range step.Ops {
		op := &step.Ops[i]
		want := Forward
		if i >= len(g.Ops) {
			want = Backward
		}
		if op.Kind == OpAdamUpdate {
			want = Update
		}
		if op.Phase != want {
			t.Errorf("op %q phase %s, want %s", op.Name, op.Phase, want)
		}
		if op.Phase == Backward && op.GradOf == NoOp {
			t.Errorf("backward op %q has no forward op", op.Name)
		}
	}
	if g.Train != nil || len(g.Ops) != 3 {
		t.Fatal("BuildTrainStep modified its input")
	}
}

// A tensor read by several ops has its gradients summed, one add per
// reader after the first that backward meets (the last in forward order),
// and the step lists each add with the reader and slot it sums in: a cost
// model prices them by the layout that reader holds the tensor in.
func TestBuildTrainStepListsGradientSums(t *testing.T) {
	b := NewBuilder("fanout", Float64)
	x := b.Input("x", Float64, 2, 3)
	w := b.Param("w", 3, 3)
	h := b.MatMul(x, w)                  // op 0 reads x
	k := b.MatMul(h, b.Param("v", 3, 3)) // op 1 reads h
	q := b.Add(h, b.MatMul(h, w))        // ops 2 and 3 read h; op 2 reads w, as op 0 does
	g, err := b.Finish(b.CrossEntropy(b.Add(k, q), b.Label("y", 2)))
	if err != nil {
		t.Fatal(err)
	}
	step, err := BuildTrainStep(g, SGD(1))
	if err != nil {
		t.Fatal(err)
	}
	// h: op 3 (add) meets it first, then op 2 (matmul) and op 1 add
	// theirs; w: op 2 meets it first, then op 0 adds its own.
	want := []Accumulation{{Of: 2, Slot: 0}, {Of: 1, Slot: 0}, {Of: 0, Slot: 1}}
	got := step.Train.Accumulations
	if len(got) != len(want) {
		t.Fatalf("accumulations %+v, want %d of them", got, len(want))
	}
	for i, a := range got {
		if a.Of != want[i].Of || a.Slot != want[i].Slot {
			t.Errorf("accumulation %d: of op %d slot %d, want op %d slot %d", i, a.Of, a.Slot, want[i].Of, want[i].Slot)
		}
		add := step.Op(a.Add)
		if add.Kind != OpAdd || add.Phase != Backward || add.GradOf != a.Of {
			t.Errorf("accumulation %d: op %q (%s, %s, grad of %d), want the backward add of op %d", i, add.Name, add.Kind, add.Phase, add.GradOf, a.Of)
		}
	}
	if c := step.Clone(); &c.Train.Accumulations[0] == &step.Train.Accumulations[0] {
		t.Error("Clone shares the accumulations")
	}
}

func TestBuildTrainStepRejectsUntrainableGraphs(t *testing.T) {
	b := NewBuilder("unused", Float64)
	x := b.Input("x", Float64, 2, 3)
	b.Param("orphan", 3)
	h := b.MatMul(x, b.Param("w", 3, 4))
	g, err := b.Finish(b.CrossEntropy(h, b.Label("y", 2)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := BuildTrainStep(g, SGD(1)); !errors.Is(err, ErrNotTrainable) || !strings.Contains(err.Error(), `"orphan"`) {
		t.Errorf("orphan parameter: %v", err)
	}
	noLoss := smallGraph(t)
	noLoss.Loss = NoTensor
	if _, err := BuildTrainStep(noLoss, SGD(1)); !errors.Is(err, ErrNotTrainable) {
		t.Errorf("no loss: %v", err)
	}
	if _, err := BuildTrainStep(smallGraph(t), Optimizer{Kind: "lion"}); err == nil {
		t.Error("unknown optimizer accepted")
	}
}

func TestWorkIsPositiveForComputeOps(t *testing.T) {
	g := smallGraph(t)
	f, b := g.Work(0)
	if f.Class != ClassMatMul || f.FLOPs != 2*2*3*4 || b.FLOPs != 2*f.FLOPs {
		t.Fatalf("matmul work fwd %+v bwd %+v", f, b)
	}
}
