package cpu

import (
	"math"
	"testing"

	"hap/ir"
)

// Finite-difference settings for float64 gradient checks.
const (
	// fdStep is the central-difference step; with float64 and O(1) values it
	// balances truncation (∝ h²) against rounding (∝ ε/h).
	fdStep = 1e-6
	// fdRelTol bounds |analytic − numeric| / max(1, |numeric|, |analytic|).
	fdRelTol = 1e-6
)

// gradCase builds a forward computation from params; the harness projects
// its output on a fixed random tensor to get a scalar loss.
type gradCase struct {
	name  string
	build func(b *ir.Builder) ir.TensorID
}

func p(b *ir.Builder, name string, shape ...int) ir.TensorID { return b.Param(name, shape...) }

// gradCases has one or more cases per differentiable operator; the test
// below fails if an operator has none.
var gradCases = []gradCase{
	{"matmul", func(b *ir.Builder) ir.TensorID { return b.MatMul(p(b, "a", 3, 4), p(b, "w", 4, 5)) }},
	{"matmul/batched", func(b *ir.Builder) ir.TensorID { return b.MatMul(p(b, "a", 2, 3, 4), p(b, "w", 2, 4, 5)) }},
	{"matmul/broadcast-weight", func(b *ir.Builder) ir.TensorID { return b.MatMul(p(b, "a", 2, 3, 4), p(b, "w", 4, 5)) }},
	{"matmul/trans-b-broadcast", func(b *ir.Builder) ir.TensorID {
		return b.MatMulT(p(b, "a", 2, 3, 4), p(b, "w", 5, 4), false, true)
	}},
	{"matmul/trans-a", func(b *ir.Builder) ir.TensorID { return b.MatMulT(p(b, "a", 4, 3), p(b, "w", 4, 5), true, false) }},
	{"matmul/trans-both-batched", func(b *ir.Builder) ir.TensorID {
		return b.MatMulT(p(b, "a", 2, 4, 3), p(b, "w", 2, 5, 4), true, true)
	}},
	{"add", func(b *ir.Builder) ir.TensorID { return b.Add(p(b, "a", 3, 4), p(b, "b", 3, 4)) }},
	{"add/same-operand", func(b *ir.Builder) ir.TensorID { x := p(b, "a", 3, 4); return b.Add(x, x) }},
	{"mul", func(b *ir.Builder) ir.TensorID { return b.Mul(p(b, "a", 3, 4), p(b, "b", 3, 4)) }},
	{"bias/last", func(b *ir.Builder) ir.TensorID { return b.Bias(p(b, "x", 2, 3, 4), p(b, "b", 4)) }},
	{"bias/channel", func(b *ir.Builder) ir.TensorID { return b.Bias(p(b, "x", 2, 3, 2, 2), p(b, "b", 3), 1) }},
	{"bias/two-axes", func(b *ir.Builder) ir.TensorID { return b.Bias(p(b, "x", 2, 3, 4), p(b, "b", 2, 4), 0, 2) }},
	{"relu", func(b *ir.Builder) ir.TensorID { return b.ReLU(p(b, "x", 5, 4)) }},
	{"gelu", func(b *ir.Builder) ir.TensorID { return b.GELU(p(b, "x", 5, 4)) }},
	{"sigmoid", func(b *ir.Builder) ir.TensorID { return b.Sigmoid(p(b, "x", 5, 4)) }},
	{"tanh", func(b *ir.Builder) ir.TensorID { return b.Tanh(p(b, "x", 5, 4)) }},
	{"silu", func(b *ir.Builder) ir.TensorID { return b.SiLU(p(b, "x", 5, 4)) }},
	{"swiglu", func(b *ir.Builder) ir.TensorID { return b.SwiGLU(p(b, "gate", 5, 4), p(b, "up", 5, 4)) }},
	// The same tensor as gate and up: the two gradients sum.
	{"swiglu/same-operand", func(b *ir.Builder) ir.TensorID { x := p(b, "x", 3, 4); return b.SwiGLU(x, x) }},
	// Gates scaled past ±2.4, where silu's slope has its extrema (−0.1
	// and 1.1), so both signs of the slope and of its change are met.
	{"swiglu/wide-gates", func(b *ir.Builder) ir.TensorID {
		return b.SwiGLU(b.MulScalar(p(b, "gate", 2, 3, 4), 6), p(b, "up", 2, 3, 4))
	}},
	// Scaled so that values fall on both sides of the kinks at ±3.
	{"hardswish", func(b *ir.Builder) ir.TensorID { return b.HardSwish(b.Add(p(b, "x", 5, 4), p(b, "y", 5, 4))) }},
	{"hardsigmoid", func(b *ir.Builder) ir.TensorID { return b.HardSigmoid(b.Add(p(b, "x", 5, 4), p(b, "y", 5, 4))) }},
	{"dropout", func(b *ir.Builder) ir.TensorID { return b.Dropout(p(b, "x", 6, 7), 0.3) }},
	{"softmax", func(b *ir.Builder) ir.TensorID { return b.Softmax(p(b, "x", 3, 5)) }},
	{"log_softmax", func(b *ir.Builder) ir.TensorID { return b.LogSoftmax(p(b, "x", 3, 5)) }},
	{"layer_norm", func(b *ir.Builder) ir.TensorID {
		return b.LayerNorm(p(b, "x", 2, 3, 6), p(b, "g", 6), p(b, "b", 6))
	}},
	{"embedding", func(b *ir.Builder) ir.TensorID {
		return b.Embedding(b.Input("ids", ir.Int64, 2, 5), p(b, "tab", 7, 3))
	}},
	// More positions than x has along the axis: repeats, which the
	// gradient's scatter-add sums.
	{"gather/middle", func(b *ir.Builder) ir.TensorID {
		return b.Gather(p(b, "x", 2, 5, 3), 1, b.Input("idx", ir.Int64, 2, 7, 3))
	}},
	{"gather/first", func(b *ir.Builder) ir.TensorID { return b.Gather(p(b, "x", 4, 3), 0, b.Input("idx", ir.Int64, 2, 3)) }},
	{"gather/last", func(b *ir.Builder) ir.TensorID { return b.Gather(p(b, "x", 3, 4), 1, b.Input("idx", ir.Int64, 3, 6)) }},
	{"reshape", func(b *ir.Builder) ir.TensorID { return b.Tanh(b.Reshape(p(b, "x", 2, 6), 3, 4)) }},
	{"permute", func(b *ir.Builder) ir.TensorID { return b.Permute(p(b, "x", 2, 3, 4), 2, 0, 1) }},
	{"concat", func(b *ir.Builder) ir.TensorID { return b.Concat(1, p(b, "a", 2, 3), p(b, "b", 2, 1), p(b, "c", 2, 2)) }},
	{"split/unused-part", func(b *ir.Builder) ir.TensorID {
		parts := b.Split(p(b, "x", 3, 6), 1, 2, 3, 1)
		return b.Mul(parts[0], parts[0])
	}},
	{"split", func(b *ir.Builder) ir.TensorID {
		parts := b.Split(p(b, "x", 4, 3), 0, 1, 3)
		return b.Add(b.Reshape(parts[0], 3), b.ReduceSum(parts[1], 0))
	}},
	{"slice", func(b *ir.Builder) ir.TensorID { return b.Slice(p(b, "x", 3, 6), 1, 2, 5) }},
	{"attention", func(b *ir.Builder) ir.TensorID {
		return b.Attention(p(b, "q", 2, 3, 4), p(b, "k", 2, 5, 4), p(b, "v", 2, 5, 3), false)
	}},
	{"attention/causal", func(b *ir.Builder) ir.TensorID {
		return b.Attention(p(b, "q", 1, 2, 4, 3), p(b, "k", 1, 2, 4, 3), p(b, "v", 1, 2, 4, 3), true)
	}},
	{"attention/mask", func(b *ir.Builder) ir.TensorID {
		return b.AttentionWith(p(b, "q", 2, 3, 4), p(b, "k", 2, 5, 4), p(b, "v", 2, 5, 3), b.Input("m", ir.Float64, 3, 5), false, 1)
	}},
	{"attention/gqa", func(b *ir.Builder) ir.TensorID {
		return b.AttentionWith(p(b, "q", 2, 6, 3, 4), p(b, "k", 2, 2, 5, 4), p(b, "v", 2, 2, 5, 3), ir.NoTensor, false, 3)
	}},
	{"attention/gqa-causal-mask", func(b *ir.Builder) ir.TensorID {
		return b.AttentionWith(p(b, "q", 1, 4, 4, 3), p(b, "k", 1, 2, 4, 3), p(b, "v", 1, 2, 4, 2), b.Input("m", ir.Float64, 4, 4), true, 2)
	}},
	{"rotary/half-table", func(b *ir.Builder) ir.TensorID {
		return b.Rotary(p(b, "x", 2, 3, 5, 6), b.Input("cos", ir.Float64, 5, 3), b.Input("sin", ir.Float64, 5, 3))
	}},
	{"rotary/full-table", func(b *ir.Builder) ir.TensorID {
		return b.Rotary(p(b, "x", 2, 5, 4), b.Input("cos", ir.Float64, 5, 4), b.Input("sin", ir.Float64, 5, 4))
	}},
	{"conv2d", func(b *ir.Builder) ir.TensorID { return b.Conv2D(p(b, "x", 2, 3, 5, 5), p(b, "w", 4, 3, 3, 3), 2, 1) }},
	{"conv2d/no-pad", func(b *ir.Builder) ir.TensorID { return b.Conv2D(p(b, "x", 1, 2, 4, 3), p(b, "w", 2, 2, 2, 2), 1, 0) }},
	{"conv2d/grouped", func(b *ir.Builder) ir.TensorID {
		return b.GroupedConv2D(p(b, "x", 2, 4, 5, 5), p(b, "w", 6, 2, 3, 3), 2, 1, 2)
	}},
	{"conv2d/depthwise", func(b *ir.Builder) ir.TensorID {
		return b.GroupedConv2D(p(b, "x", 2, 3, 5, 4), p(b, "w", 3, 1, 3, 3), 1, 1, 3)
	}},
	{"conv2d/depthwise-multiplier", func(b *ir.Builder) ir.TensorID {
		return b.GroupedConv2D(p(b, "x", 1, 2, 4, 4), p(b, "w", 4, 1, 2, 2), 2, 0, 2)
	}},
	{"avg_pool2d", func(b *ir.Builder) ir.TensorID { return b.AvgPool2D(p(b, "x", 2, 2, 5, 6), 2, 2, 0) }},
	{"avg_pool2d/padded-overlap", func(b *ir.Builder) ir.TensorID { return b.AvgPool2D(p(b, "x", 1, 2, 5, 4), 3, 2, 1) }},
	{"batch_norm", func(b *ir.Builder) ir.TensorID {
		return b.BatchNorm(p(b, "x", 3, 4, 2, 3), p(b, "g", 4), p(b, "b", 4), ir.NoTensor, ir.NoTensor, 1e-5, 0)
	}},
	{"batch_norm/2d", func(b *ir.Builder) ir.TensorID {
		return b.BatchNorm(p(b, "x", 5, 3), p(b, "g", 3), p(b, "b", 3), ir.NoTensor, ir.NoTensor, 1e-3, 0)
	}},
	{"max_pool2d/padded", func(b *ir.Builder) ir.TensorID { return b.MaxPool2DPadded(p(b, "x", 2, 2, 5, 6), 3, 2, 1) }},
	{"max_pool2d", func(b *ir.Builder) ir.TensorID { return b.MaxPool2D(p(b, "x", 2, 2, 4, 6), 2, 2) }},
	{"adaptive_avg_pool2d/up", func(b *ir.Builder) ir.TensorID { return b.AdaptiveAvgPool2D(p(b, "x", 2, 2, 1, 1), 3, 3) }},
	{"adaptive_avg_pool2d/down", func(b *ir.Builder) ir.TensorID {
		return b.AdaptiveAvgPool2D(p(b, "x", 1, 2, 5, 7), 2, 3)
	}},
	{"cross_entropy", func(b *ir.Builder) ir.TensorID { return b.CrossEntropy(p(b, "x", 4, 5), b.Label("y", 4)) }},
	{"nll_loss", func(b *ir.Builder) ir.TensorID {
		return b.NLLLoss(b.LogSoftmax(p(b, "x", 4, 5)), b.Label("y", 4))
	}},
	{"top2_gate", func(b *ir.Builder) ir.TensorID {
		combine, _ := b.Top2Gate(p(b, "logits", 6, 3), 3)
		return combine
	}},
	{"top2_gate/grouped", func(b *ir.Builder) ir.TensorID {
		combine, _ := b.Top2Gate(p(b, "logits", 2, 5, 3), 2)
		return combine
	}},
	{"einsum/grouped-dispatch", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("gsec,gsd->egcd", p(b, "m", 2, 4, 3, 2), p(b, "x", 2, 4, 5))
	}},
	{"einsum/expert-ffn", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("egcd,edf->egcf", p(b, "x", 3, 2, 2, 4), p(b, "w", 3, 4, 5))
	}},
	{"einsum/grouped-combine", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("gsec,egcd->gsd", p(b, "c", 2, 4, 3, 2), p(b, "y", 3, 2, 2, 5))
	}},
	{"einsum/dispatch", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("tec,td->ecd", p(b, "m", 4, 2, 3), p(b, "x", 4, 5))
	}},
	{"einsum/combine", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("tec,ecd->td", p(b, "c", 4, 2, 3), p(b, "y", 2, 3, 5))
	}},
	{"reduce_sum", func(b *ir.Builder) ir.TensorID { return b.ReduceSum(p(b, "x", 2, 3, 4), 0, 2) }},
	{"pad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpPad, ir.Attrs{Axis: 1, Start: 2, Shape: []int{3, 7}}, p(b, "x", 3, 4))[0]
	}},
	{"reduce_sum/all", func(b *ir.Builder) ir.TensorID { return b.ReduceSum(p(b, "x", 2, 3), 0, 1) }},
}

// projectedLoss finishes a grad case: loss = Σ out ⊙ R for a fixed random
// R (an input), or out itself when it is already a scalar.
func projectedLoss(t *testing.T, c gradCase) *ir.Graph {
	t.Helper()
	b := ir.NewBuilder(c.name, ir.Float64)
	out := c.build(b)
	loss := out
	if s := b.Shape(out); len(s) > 0 {
		r := b.Input("R", ir.Float64, s...)
		axes := make([]int, len(s))
		for i := range axes {
			axes[i] = i
		}
		loss = b.ReduceSum(b.Mul(out, r), axes...)
	}
	g, err := b.Finish(loss)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return g
}

func lossOf(t *testing.T, g *ir.Graph, feeds map[ir.TensorID]*Tensor[float64]) float64 {
	t.Helper()
	v, err := Run(nil, g, feeds, []ir.TensorID{g.Loss})
	if err != nil {
		t.Fatalf("forward: %v", err)
	}
	return v[g.Loss].Data[0]
}

// checkGradients compares autodiff gradients of every parameter of the
// forward graph with central differences.
func checkGradients(t *testing.T, fwd *ir.Graph, seed uint64, maxElems int) {
	t.Helper()
	train, err := ir.BuildTrainStep(fwd, ir.SGD(0))
	if err != nil {
		t.Fatalf("autodiff: %v", err)
	}
	tr, err := NewTrainer[float64](train, seed)
	if err != nil {
		t.Fatal(err)
	}
	batch := SyntheticBatch[float64](fwd, seed+1)
	feeds := map[ir.TensorID]*Tensor[float64]{}
	for k, v := range batch {
		feeds[k] = v
	}
	for _, ps := range train.Train.Params {
		// Random parameters in N(0,1): larger than InitParam's, so every
		// op's nonlinearity is exercised.
		v := SyntheticBatch[float64](&ir.Graph{Tensors: []ir.Tensor{{ID: 0, Name: fwd.Tensors[ps.Param].Name, Shape: fwd.Tensors[ps.Param].Shape, Kind: ir.Input}}}, seed+2)[0]
		tr.SetValue(ps.Param, v)
		feeds[ps.Param] = v.Clone()
	}
	res, err := tr.Step(nil, batch)
	if err != nil {
		t.Fatalf("step: %v", err)
	}
	for _, ps := range train.Train.Params {
		name := fwd.Tensors[ps.Param].Name
		x := feeds[ps.Param]
		grad := res.Grads[ps.Param]
		stride := max(1, len(x.Data)/maxElems)
		for i := 0; i < len(x.Data); i += stride {
			orig := x.Data[i]
			x.Data[i] = orig + fdStep
			up := lossOf(t, fwd, feeds)
			x.Data[i] = orig - fdStep
			down := lossOf(t, fwd, feeds)
			x.Data[i] = orig
			num := (up - down) / (2 * fdStep)
			ana := grad.Data[i]
			scale := math.Max(1, math.Max(math.Abs(num), math.Abs(ana)))
			if math.Abs(num-ana)/scale > fdRelTol {
				t.Errorf("d loss / d %s[%d]: autodiff %.10g, finite difference %.10g", name, i, ana, num)
			}
		}
	}
}

func TestGradientsMatchFiniteDifferences(t *testing.T) {
	covered := map[ir.OpKind]bool{}
	for _, c := range append(append([]gradCase{}, gradCases...), arithGradCases...) {
		t.Run(c.name, func(t *testing.T) {
			g := projectedLoss(t, c)
			for i := range g.Ops {
				covered[g.Ops[i].Kind] = true
			}
			checkGradients(t, g, 7, 1000)
		})
	}
	for _, k := range ir.Kinds() {
		// Ops that exchange data between devices are checked by the
		// multi-device tests (comm_test.go), against their adjoints.
		if ir.IsCollective(k) || k == ir.OpReplicate || k == ir.OpDynamicSlice {
			continue
		}
		if ir.IsDifferentiable(k) && !covered[k] {
			t.Errorf("operator %s has no finite-difference case", k)
		}
	}
}
