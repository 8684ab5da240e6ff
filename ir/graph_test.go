package ir

import (
	"errors"
	"math/rand/v2"
	"slices"
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
	// Each summed tensor's sum starts from the reader backward meets
	// first, which adds nothing: h's op 3, w's op 2.
	wantStarts := []GradStart{{Tensor: g.Ops[3].Inputs[0], Of: 3, Slot: 0}, {Tensor: g.Ops[2].Inputs[1], Of: 2, Slot: 1}}
	if !slices.Equal(step.Train.GradStarts, wantStarts) {
		t.Errorf("gradient starts %+v, want %+v", step.Train.GradStarts, wantStarts)
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

// TestReorderedRenumbersEveryReference: a training step reordered by
// random orders that keep its dependencies (and its forward ops first)
// is a valid graph of the same ops, each reference to an op — a tensor's
// producer, a backward op's GradOf, an accumulation — naming the same op
// as before under its new ID.
func TestReorderedRenumbersEveryReference(t *testing.T) {
	b := NewBuilder("g", Float64)
	x := b.Input("x", Float64, 2, 3)
	a := b.MatMul(x, b.Param("w1", 3, 4))
	d := b.MatMul(x, b.Param("w3", 3, 4))                     // independent of a: the forward order is free
	c := b.Add(b.Add(a, b.MatMul(a, b.Param("w2", 4, 4))), d) // a is read twice: its gradients are summed
	g, err := b.Finish(b.CrossEntropy(b.ReLU(c), b.Label("y", 2)))
	if err != nil {
		t.Fatal(err)
	}
	step, err := BuildTrainStep(g, Adam(1e-3))
	if err != nil {
		t.Fatal(err)
	}
	if len(step.Train.Accumulations) == 0 {
		t.Fatal("the step has no accumulation to renumber")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	name := func(g *Graph, id OpID) string {
		if id == NoOp {
			return ""
		}
		return g.Ops[id].Name
	}
	moved := 0
	for trial := range 50 {
		// A random topological order of the forward ops, then of the
		// backward and update ops.
		order := make([]OpID, 0, len(step.Ops))
		done := make([]bool, len(step.Ops))
		for len(order) < len(step.Ops) {
			var ready []OpID
			for i := range step.Ops {
				ok := !done[i] && (i < step.Train.ForwardOps || len(order) >= step.Train.ForwardOps)
				for _, in := range step.Ops[i].Inputs {
					if p := step.Tensors[in].Producer; p != NoOp && !done[p] {
						ok = false
					}
				}
				if ok {
					ready = append(ready, OpID(i))
				}
			}
			next := ready[rng.IntN(len(ready))]
			order, done[next] = append(order, next), true
		}
		r, err := step.Reordered(order)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if err := r.Check(); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		for k, id := range order {
			if r.Ops[k].Name != step.Ops[id].Name || name(r, r.Ops[k].GradOf) != name(step, step.Ops[id].GradOf) {
				t.Fatalf("trial %d: op %d is %q (grad of %q), want %q (grad of %q)", trial, k,
					r.Ops[k].Name, name(r, r.Ops[k].GradOf), step.Ops[id].Name, name(step, step.Ops[id].GradOf))
			}
			if OpID(k) != id {
				moved++
			}
		}
		want := map[[2]string]int{}
		for _, a := range step.Train.Accumulations {
			want[[2]string{name(step, a.Add), name(step, a.Of)}] = a.Slot
		}
		for i, a := range r.Train.Accumulations {
			if slot, ok := want[[2]string{name(r, a.Add), name(r, a.Of)}]; !ok || slot != a.Slot {
				t.Fatalf("trial %d: accumulation %+v names other ops", trial, a)
			}
			if i > 0 && a.Add < r.Train.Accumulations[i-1].Add {
				t.Fatalf("trial %d: accumulations out of step order: %+v", trial, r.Train.Accumulations)
			}
		}
		for i, s := range r.Train.GradStarts {
			if o := step.Train.GradStarts[i]; name(r, s.Of) != name(step, o.Of) || s.Slot != o.Slot || s.Tensor != o.Tensor {
				t.Fatalf("trial %d: gradient start %+v names another reader than %+v", trial, s, o)
			}
		}
	}
	if moved == 0 {
		t.Fatal("no trial moved an op")
	}
}

func TestReorderedRefusesWhatIsNotAnOrder(t *testing.T) {
	step, err := BuildTrainStep(smallGraph(t), SGD(1e-2))
	if err != nil {
		t.Fatal(err)
	}
	identity := func() []OpID {
		o := make([]OpID, len(step.Ops))
		for i := range o {
			o[i] = OpID(i)
		}
		return o
	}
	nf := step.Train.ForwardOps
	last := len(step.Ops) - 1
	cases := []struct {
		name  string
		order func() []OpID
		want  string
	}{
		{"short", func() []OpID { return identity()[1:] }, "names"},
		{"repeat", func() []OpID { o := identity(); o[last] = 0; return o }, "again"},
		{"unknown", func() []OpID { o := identity(); o[last] = OpID(last + 1); return o }, "has no op"},
		{"input first", func() []OpID { o := identity(); o[0], o[1] = o[1], o[0]; return o }, "which computes its input"},
		{"forward last", func() []OpID { o := identity(); o[nf-1], o[last] = o[last], o[nf-1]; return o }, "forward ops must stay first"},
	}
	for _, c := range cases {
		if _, err := step.Reordered(c.order()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestConvolutionGradientsDoTheForwardsWork: each gradient of a
// convolution does the forward's MACs. The work function once told the
// kinds apart by their shapes, and a weight gradient whose batch, input
// and output channels are equal (VGG19's block3 at batch 256) read as an
// input gradient: 7× the FLOPs, and VGG19 on a100-8 priced 18.8% over the
// simulator. The cases cover every coincidence of N, C and O.
func TestConvolutionGradientsDoTheForwardsWork(t *testing.T) {
	for _, c := range []struct{ n, ch, o, hw, k int }{
		{256, 256, 256, 8, 3}, {4, 4, 4, 5, 3}, {2, 3, 4, 6, 1}, {4, 3, 4, 6, 3}, {3, 4, 4, 6, 3}, {4, 4, 3, 7, 3},
	} {
		b := NewBuilder("conv", Float32)
		// x a parameter, so that backward makes its gradient too.
		x := b.Param("x", c.n, c.ch, c.hw, c.hw)
		y := b.Conv2D(x, b.Param("w", c.o, c.ch, c.k, c.k), 1, c.k/2)
		g, err := b.Finish(b.CrossEntropy(b.Reshape(b.AdaptiveAvgPool2D(y, 1, 1), c.n, c.o), b.Label("y", c.n)))
		if err != nil {
			t.Fatal(err)
		}
		step, err := BuildTrainStep(g, SGD(0.1))
		if err != nil {
			t.Fatal(err)
		}
		var fwd float64
		grads := 0
		for i := range step.Ops {
			op := &step.Ops[i]
			w, _ := step.Work(op.ID)
			switch op.Kind {
			case OpConv2D:
				fwd = w.FLOPs
			case OpConv2DGradInput, OpConv2DGradWeight:
				grads++
				if want := 2 * float64(c.n*c.o*c.hw*c.hw*c.ch*c.k*c.k); w.FLOPs != want {
					t.Errorf("%+v: %s does %g FLOPs, want the forward's %g", c, op.Kind, w.FLOPs, want)
				}
			}
		}
		if want := 2 * float64(c.n*c.o*c.hw*c.hw*c.ch*c.k*c.k); fwd != want || grads != 2 {
			t.Errorf("%+v: forward %g FLOPs (want %g), %d gradient ops", c, fwd, want, grads)
		}
	}
}

// TestAttentionGradientDoesTheBackwardsWork: the attention_grad op autodiff
// emits is priced at the attention's backward estimate (recomputed scores,
// dV, dP, dS, dQ, dK), not at the forward's work, as it was.
func TestAttentionGradientDoesTheBackwardsWork(t *testing.T) {
	b := NewBuilder("attn", Float32)
	q := b.Param("q", 2, 3, 16, 8)
	k := b.Param("k", 2, 3, 16, 8)
	v := b.Param("v", 2, 3, 16, 8)
	o := b.Attention(q, k, v, true)
	g, err := b.Finish(b.ReduceSum(o, 0, 1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	fwd, bwd := g.Work(g.Tensors[o].Producer)
	step, err := BuildTrainStep(g, SGD(0.1))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for i := range step.Ops {
		if op := &step.Ops[i]; op.Kind == OpAttentionGrad {
			found = true
			if w, _ := step.Work(op.ID); w != bwd || !(w.FLOPs > 2.5*fwd.FLOPs) {
				t.Errorf("attention_grad work %+v; want the backward estimate %+v (the forward's is %+v)", w, bwd, fwd)
			}
		}
	}
	if !found {
		t.Fatal("no attention_grad in the step")
	}
}

// TestEmptyShardDoesNoWork: on a device given no samples, the forward
// matmul and the input gradient do nothing and the weight gradient writes
// its zeros, rather than each being priced at reading the whole weight —
// the simulator charged that, where the encoding prices a device's op time
// in proportion to its share, zero at none.
func TestEmptyShardDoesNoWork(t *testing.T) {
	const k, n = 64, 32
	b := NewBuilder("empty", Float32)
	x := b.Param("x", 0, k) // a parameter, so that backward makes its gradient too
	y := b.MatMul(x, b.Param("w", k, n))
	g, err := b.Finish(b.CrossEntropy(y, b.Label("y", 0)))
	if err != nil {
		t.Fatal(err)
	}
	step, err := BuildTrainStep(g, SGD(0.1))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for i := range step.Ops {
		op := &step.Ops[i]
		if op.Kind != OpMatMul {
			continue
		}
		w, _ := step.Work(op.ID)
		want := 0.0
		if out := &step.Tensors[op.Outputs[0]]; out.Shape.Numel() > 0 {
			want = float64(out.Shape.Numel() * out.DType.Size()) // the weight's gradient, zeros
		}
		if w.FLOPs != 0 || w.Bytes != want {
			t.Errorf("%s: %g FLOPs, %g bytes; want none and %g bytes", op.Name, w.FLOPs, w.Bytes, want)
		}
		seen++
	}
	if seen != 3 {
		t.Fatalf("%d matmuls in the step, want the forward and its two gradients", seen)
	}
}

// TestWorkAtIsTheWorkAtThoseShapes: an op's work priced at other operand
// shapes (WorkAt, how the planner splits a kernel's bytes into what a
// device's share scales and what it does not) is the work of the same op
// in a graph built at those shapes — attributes that name the output's
// shape (a convolution's gradients, a reshape, an embedding's gradient)
// following it, as they do in a device's local graph. Every op of a
// training step, at a batch of 2 priced at a batch of 6's shapes.
func TestWorkAtIsTheWorkAtThoseShapes(t *testing.T) {
	build := func(n int) *Graph {
		b := NewBuilder("mixed", Float32)
		x := b.Input("img", Float32, n, 3, 8, 8)
		y := b.ReLU(b.Conv2D(x, b.Param("conv1.w", 4, 3, 3, 3), 1, 1))
		y = b.Conv2D(y, b.Param("conv2.w", 4, 4, 3, 3), 1, 1) // its input's gradient: Shape = y's
		y = b.MaxPool2D(y, 2, 2)
		img := b.Reshape(b.AdaptiveAvgPool2D(y, 2, 2), n, 4, 4) // [n, tokens, d]
		tok := b.Embedding(b.Label("ids", n, 4), b.Param("table", 10, 4))
		h := b.LayerNorm(b.Add(img, tok), b.Param("ln.g", 4), b.Param("ln.b", 4))
		h = b.GELU(b.Linear(h, b.Param("fc.w", 4, 8), b.Param("fc.b", 8)))
		logits := b.Reshape(b.Linear(h, b.Param("out.w", 8, 5), b.Param("out.b", 5)), n*4, 5)
		g, err := b.Finish(b.CrossEntropy(logits, b.Label("y", n*4)))
		if err != nil {
			t.Fatal(err)
		}
		step, err := BuildTrainStep(g, Adam(1e-3))
		if err != nil {
			t.Fatal(err)
		}
		return step
	}
	small, big := build(2), build(6)
	if len(small.Ops) != len(big.Ops) {
		t.Fatalf("%d ops at batch 2, %d at 6", len(small.Ops), len(big.Ops))
	}
	for i := range small.Ops {
		op := &small.Ops[i]
		got, _ := small.WorkAt(op.ID, func(id TensorID) Shape { return big.Tensors[id].Shape })
		want, _ := big.Work(op.ID)
		if got != want {
			t.Errorf("op %d %s: WorkAt the batch of 6's shapes %+v, the op at 6 %+v", i, op.Kind, got, want)
		}
		if plain, _ := small.WorkAt(op.ID, nil); plain != func() Work { w, _ := small.Work(op.ID); return w }() {
			t.Errorf("op %d %s: WorkAt(nil) %+v is not Work", i, op.Kind, plain)
		}
	}
}
