package plan

import (
	"math"
	"testing"

	"hap/devprog"
	"hap/ir"
	"hap/models"
	"hap/sim"
	"hap/strategy"
)

// sumTolerance is the relative slack of a sum of event durations against
// the simulator's per-stream total (the same floats added in another
// order).
const sumTolerance = 1e-9

func TestAttributeFindsTheScope(t *testing.T) {
	ops := map[string]ir.OpKind{"layer0.fc1.matmul": ir.OpMatMul, "w": ir.OpAdd}
	tensors := map[string]bool{"layer0.fc1.w": true, "w": true}
	for _, c := range []struct {
		name   string
		comm   bool
		want   string
		wantOp bool
	}{
		{"layer0.fc1.matmul.matmul", false, "layer0.fc1.matmul", true},
		{"layer0.fc1.matmul.matmul.grad.matmul_1", false, "layer0.fc1.matmul", true},
		{"layer0.fc1.w.comm.all_gather.grad.reduce_scatter", true, "layer0.fc1.w", false},
		{"layer0.fc1.w.update.adam_update", false, "layer0.fc1.w", false},
		// An op and a tensor of the same name: a kernel is the op's, a
		// collective the tensor's.
		{"w.add", false, "w", true},
		{"w.comm.all_reduce", true, "w", false},
		{"unscoped", false, "unscoped", false},
		{"layer0.fc2.matmul", false, "layer0.fc2.matmul", false},
	} {
		got := attribute(c.name, ops, tensors, c.comm)
		if got.Name != c.want || got.Op != c.wantOp {
			t.Errorf("attribute(%q, comm=%v) = %q (op %v), want %q (op %v)", c.name, c.comm, got.Name, got.Op, c.want, c.wantOp)
		}
	}
}

// TestBottleneckAccountsForEveryInstruction: on data-parallel BERT the
// busiest device's time is split over its sources without loss, every
// source is an op or a tensor of the graph, and the costliest
// communication is a parameter's gradient all-reduce.
func TestBottleneckAccountsForEveryInstruction(t *testing.T) {
	in, err := LoadInputs("bert-base-tiny", models.Options{}, "paper-8")
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build("dp-ev", in.Graph, in.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Simulate(in, p)
	if err != nil {
		t.Fatal(err)
	}
	b := FindBottleneck(in.Graph, res)
	for _, d := range res.Devices {
		if d.Compute+d.Comm-d.Overlap > b.Busy {
			t.Errorf("device %d is busier (%g s) than the bottleneck %d (%g s)", d.Device, d.Compute+d.Comm-d.Overlap, b.Device, b.Busy)
		}
	}
	var compute, comm float64
	names := map[string]bool{}
	for i := range in.Graph.Ops {
		names[in.Graph.Ops[i].Name] = true
	}
	for i := range in.Graph.Tensors {
		names[in.Graph.Tensors[i].Name] = true
	}
	var topComm Source
	for i, s := range b.Sources {
		compute += s.Compute
		comm += s.Comm
		if !names[s.Name] {
			t.Errorf("source %q is neither an op nor a tensor of the graph", s.Name)
		}
		if i > 0 && s.Seconds() > b.Sources[i-1].Seconds()*(1+sameTime) {
			t.Errorf("source %q (%g s) after %q (%g s)", s.Name, s.Seconds(), b.Sources[i-1].Name, b.Sources[i-1].Seconds())
		}
		if s.Comm > topComm.Comm {
			topComm = s
		}
	}
	if math.Abs(compute-b.Compute) > sumTolerance*b.Compute || math.Abs(comm-b.Comm) > sumTolerance*b.Comm {
		t.Errorf("sources add up to compute %g s, comm %g s; the device is busy %g s, %g s", compute, comm, b.Compute, b.Comm)
	}
	if id, ok := in.Graph.TensorByName(topComm.Name); topComm.Op || !ok || in.Graph.Tensor(id).Kind != ir.Param {
		t.Errorf("costliest communication is %q (op %v), want a parameter's gradient all-reduce", topComm.Name, topComm.Op)
	}
}

// An op and its output tensor of the same name (the builder names both
// "relu") stay two sources: the op's kernels and the tensor's collective.
func TestBottleneckKeepsAnOpAndItsTensorApart(t *testing.T) {
	b := ir.NewBuilder("m", ir.Float32)
	x := b.Input("x", ir.Float32, 4, 8)
	g, err := b.Finish(b.CrossEntropy(b.ReLU(b.MatMul(x, b.Param("w", 8, 8))), b.Label("y", 4)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.TensorByName("relu"); !ok {
		t.Fatal("the builder no longer names the relu's output relu")
	}
	res := &sim.Result{
		StepSeconds: 3,
		Devices:     []sim.DeviceStats{{Device: 0, Compute: 1, Comm: 2}},
		Events: []sim.Event{
			{Device: 0, Stream: devprog.StreamCompute, Name: "relu.relu", End: 1},
			{Device: 0, Stream: devprog.StreamComm, Name: "relu.comm.all_gather", End: 2},
		},
	}
	got := FindBottleneck(g, res).Sources
	if len(got) != 2 || got[0].Name != "relu" || got[0].Op || got[0].Comm != 2 || got[1].Name != "relu" || !got[1].Op || got[1].Compute != 1 {
		t.Errorf("sources %+v, want tensor relu (comm 2 s) then op relu (compute 1 s)", got)
	}
}
