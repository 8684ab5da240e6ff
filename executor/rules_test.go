package executor

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"hap/ir"
	"hap/spmd"
)

// ruleCase is one forward op on parameters (so every input gets a
// gradient); the harness projects its output to a scalar loss. The op
// under test is the first whose kind is the case name up to any "/", so a
// case may build operands first (pos, mask01) and test the op after them.
type ruleCase struct {
	name  string
	build func(b *ir.Builder) ir.TensorID
}

func prm(b *ir.Builder, name string, shape ...int) ir.TensorID { return b.Param(name, shape...) }

// pos is x² + ½: a positive operand for log, sqrt, rsqrt, reciprocal,
// fractional powers and divisors, whatever the parameter's sign (as in
// package cpu's finite-difference cases).
func pos(b *ir.Builder, x ir.TensorID) ir.TensorID { return b.AddScalar(b.Mul(x, x), 0.5) }

// mask01 is a constant mask with zeros and non-zeros: relu of a random
// input.
func mask01(b *ir.Builder, shape ...int) ir.TensorID {
	return b.ReLU(b.Input("m", ir.Float64, shape...))
}

// ruleCases covers every forward operator; TestEveryRuleMatchesSingleDevice
// fails if an operator with sharding rules has none.
var ruleCases = []ruleCase{
	{"matmul", func(b *ir.Builder) ir.TensorID { return b.MatMul(prm(b, "x", 6, 4), prm(b, "w", 4, 5)) }},
	{"matmul/batched-weight", func(b *ir.Builder) ir.TensorID { return b.MatMul(prm(b, "x", 3, 6, 4), prm(b, "w", 4, 5)) }},
	{"matmul/trans-b", func(b *ir.Builder) ir.TensorID { return b.MatMulT(prm(b, "x", 6, 4), prm(b, "w", 5, 4), false, true) }},
	{"matmul/same-rank", func(b *ir.Builder) ir.TensorID { return b.MatMul(prm(b, "x", 3, 6, 4), prm(b, "w", 3, 4, 5)) }},
	{"add", func(b *ir.Builder) ir.TensorID { return b.Add(prm(b, "a", 6, 5), prm(b, "b", 6, 5)) }},
	{"mul", func(b *ir.Builder) ir.TensorID { return b.Mul(prm(b, "a", 6, 5), prm(b, "b", 6, 5)) }},
	{"bias", func(b *ir.Builder) ir.TensorID { return b.Bias(prm(b, "x", 6, 5), prm(b, "b", 5)) }},
	{"bias/two-axes", func(b *ir.Builder) ir.TensorID { return b.Bias(prm(b, "x", 3, 6, 5), prm(b, "b", 3, 5), 0, 2) }},
	{"relu", func(b *ir.Builder) ir.TensorID { return b.ReLU(prm(b, "x", 6, 5)) }},
	{"gelu", func(b *ir.Builder) ir.TensorID { return b.GELU(prm(b, "x", 6, 5)) }},
	{"sigmoid", func(b *ir.Builder) ir.TensorID { return b.Sigmoid(prm(b, "x", 6, 5)) }},
	{"tanh", func(b *ir.Builder) ir.TensorID { return b.Tanh(prm(b, "x", 6, 5)) }},
	{"silu", func(b *ir.Builder) ir.TensorID { return b.SiLU(prm(b, "x", 6, 5)) }},
	{"swiglu", func(b *ir.Builder) ir.TensorID { return b.SwiGLU(prm(b, "gate", 6, 5), prm(b, "up", 6, 5)) }},
	{"swiglu/rank3", func(b *ir.Builder) ir.TensorID { return b.SwiGLU(prm(b, "gate", 3, 6, 5), prm(b, "up", 3, 6, 5)) }},
	{"hardswish", func(b *ir.Builder) ir.TensorID { return b.HardSwish(prm(b, "x", 6, 5)) }},
	{"hardsigmoid", func(b *ir.Builder) ir.TensorID { return b.HardSigmoid(prm(b, "x", 6, 5)) }},
	{"dropout", func(b *ir.Builder) ir.TensorID { return b.Dropout(prm(b, "x", 6, 5), 0.4) }},
	{"softmax", func(b *ir.Builder) ir.TensorID { return b.Softmax(prm(b, "x", 6, 5)) }},
	{"log_softmax", func(b *ir.Builder) ir.TensorID { return b.LogSoftmax(prm(b, "x", 3, 6, 5)) }},
	{"layer_norm", func(b *ir.Builder) ir.TensorID {
		return b.LayerNorm(prm(b, "x", 6, 5), prm(b, "g", 5), prm(b, "b", 5))
	}},
	{"embedding", func(b *ir.Builder) ir.TensorID {
		return b.Embedding(b.Input("ids", ir.Int64, 6, 3), b.ParamInit("tab", ir.InitNormal, 7, 5))
	}},
	{"reshape/merge", func(b *ir.Builder) ir.TensorID { return b.Reshape(prm(b, "x", 6, 3, 5), 18, 5) }},
	{"reshape/heads", func(b *ir.Builder) ir.TensorID { return b.Reshape(prm(b, "x", 6, 10), 6, 5, 2) }},
	{"permute", func(b *ir.Builder) ir.TensorID { return b.Permute(prm(b, "x", 6, 3, 5), 1, 2, 0) }},
	{"concat", func(b *ir.Builder) ir.TensorID { return b.Concat(1, prm(b, "a", 6, 3), prm(b, "b", 6, 2)) }},
	{"split", func(b *ir.Builder) ir.TensorID {
		p := b.Split(prm(b, "x", 6, 5), 1, 2, 3)
		return b.Concat(1, p[1], p[0])
	}},
	{"slice", func(b *ir.Builder) ir.TensorID { return b.Slice(prm(b, "x", 6, 5), 1, 1, 4) }},
	{"attention", func(b *ir.Builder) ir.TensorID {
		return b.Attention(prm(b, "q", 6, 3, 4), prm(b, "k", 6, 5, 4), prm(b, "v", 6, 5, 2), false)
	}},
	{"attention/causal", func(b *ir.Builder) ir.TensorID {
		return b.Attention(prm(b, "q", 6, 3, 4), prm(b, "k", 6, 3, 4), prm(b, "v", 6, 3, 4), true)
	}},
	{"attention/mask", func(b *ir.Builder) ir.TensorID {
		return b.AttentionWith(prm(b, "q", 6, 3, 4), prm(b, "k", 6, 5, 4), prm(b, "v", 6, 5, 2), b.Input("m", ir.Float64, 3, 5), false, 1)
	}},
	{"attention/gqa-mask", func(b *ir.Builder) ir.TensorID {
		return b.AttentionWith(prm(b, "q", 7, 6, 3, 4), prm(b, "k", 7, 2, 5, 4), prm(b, "v", 7, 2, 5, 4), b.Input("m", ir.Float64, 3, 5), false, 3)
	}},
	{"attention/gqa-causal", func(b *ir.Builder) ir.TensorID {
		return b.AttentionWith(prm(b, "q", 5, 4, 3, 2), prm(b, "k", 5, 2, 3, 2), prm(b, "v", 5, 2, 3, 2), ir.NoTensor, true, 2)
	}},
	{"rotary", func(b *ir.Builder) ir.TensorID {
		return b.Rotary(prm(b, "x", 6, 3, 5, 4), b.Input("cos", ir.Float64, 5, 2), b.Input("sin", ir.Float64, 5, 2))
	}},
	{"rotary/full-table", func(b *ir.Builder) ir.TensorID {
		return b.Rotary(prm(b, "x", 6, 5, 4), b.Input("cos", ir.Float64, 5, 4), b.Input("sin", ir.Float64, 5, 4))
	}},
	{"conv2d", func(b *ir.Builder) ir.TensorID {
		return b.Conv2D(prm(b, "x", 6, 3, 4, 4), prm(b, "w", 5, 3, 3, 3), 1, 1)
	}},
	// 4 groups: the segment of 4 units puts one group in each unit, that
	// of 2 units two groups (the x dim of 8 channels and w's of 12 outputs
	// both divide).
	{"conv2d/grouped", func(b *ir.Builder) ir.TensorID {
		return b.GroupedConv2D(prm(b, "x", 6, 8, 4, 4), prm(b, "w", 12, 2, 3, 3), 1, 1, 4)
	}},
	{"conv2d/depthwise", func(b *ir.Builder) ir.TensorID {
		return b.GroupedConv2D(prm(b, "x", 6, 5, 4, 4), prm(b, "w", 5, 1, 3, 3), 2, 1, 5)
	}},
	{"avg_pool2d", func(b *ir.Builder) ir.TensorID { return b.AvgPool2D(prm(b, "x", 6, 5, 5, 5), 3, 2, 1) }},
	// Sums of 24 elements per channel: sumsq starts at ones and sum small,
	// so the variance sumsq/24 − (sum/24)² is positive.
	{"batch_norm", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpBatchNorm, ir.Attrs{Eps: 1e-5, Scale: 1.0 / 24}, prm(b, "x", 6, 5, 2, 2), prm(b, "sum", 5),
			b.ParamInit("sumsq", ir.InitOnes, 5), b.ParamInit("g", ir.InitOnes, 5), prm(b, "b", 5))[0]
	}},
	{"max_pool2d/padded", func(b *ir.Builder) ir.TensorID { return b.MaxPool2DPadded(prm(b, "x", 6, 5, 5, 5), 3, 2, 1) }},
	{"max_pool2d", func(b *ir.Builder) ir.TensorID { return b.MaxPool2D(prm(b, "x", 6, 5, 4, 4), 2, 2) }},
	{"adaptive_avg_pool2d", func(b *ir.Builder) ir.TensorID { return b.AdaptiveAvgPool2D(prm(b, "x", 6, 5, 2, 3), 3, 2) }},
	{"cross_entropy", func(b *ir.Builder) ir.TensorID { return b.CrossEntropy(prm(b, "x", 6, 5), b.Label("y", 6)) }},
	{"nll_loss", func(b *ir.Builder) ir.TensorID { return b.NLLLoss(prm(b, "x", 6, 5), b.Label("y", 6)) }},
	{"top2_gate", func(b *ir.Builder) ir.TensorID { c, _ := b.Top2Gate(prm(b, "x", 6, 3), 3); return c }},
	{"top2_gate/grouped", func(b *ir.Builder) ir.TensorID { c, _ := b.Top2Gate(prm(b, "x", 6, 4, 3), 2); return c }},
	{"einsum/grouped-dispatch", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("gsec,gsd->egcd", prm(b, "m", 6, 4, 3, 2), prm(b, "x", 6, 4, 5))
	}},
	{"einsum/expert-ffn", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("egcd,edf->egcf", prm(b, "x", 3, 6, 2, 4), prm(b, "w", 3, 4, 5))
	}},
	{"einsum/grouped-combine", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("gsec,egcd->gsd", prm(b, "c", 6, 4, 3, 2), prm(b, "y", 3, 6, 2, 5))
	}},
	{"einsum/dispatch", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("tec,td->ecd", prm(b, "m", 6, 3, 2), prm(b, "x", 6, 5))
	}},
	{"einsum/combine", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("tec,ecd->td", prm(b, "c", 6, 3, 2), prm(b, "y", 3, 2, 5))
	}},
	{"reduce_sum", func(b *ir.Builder) ir.TensorID { return b.ReduceSum(prm(b, "x", 6, 3, 5), 1) }},
	{"fill_like", func(b *ir.Builder) ir.TensorID {
		x := prm(b, "x", 6, 5)
		return b.Add(b.Emit(ir.OpFillLike, ir.Attrs{Scale: 2}, x)[0], x)
	}},
	// Broadcasting binary ops: an operand missing leading dims, one
	// stretching size 1 over a leading or a trailing dim, both stretching.
	{"add/broadcast-row", func(b *ir.Builder) ir.TensorID { return b.Add(prm(b, "a", 6, 5), prm(b, "b", 5)) }},
	{"add/broadcast-both", func(b *ir.Builder) ir.TensorID { return b.Add(prm(b, "a", 6, 1), prm(b, "b", 3, 1, 5)) }},
	{"mul/broadcast-trailing", func(b *ir.Builder) ir.TensorID { return b.Mul(prm(b, "a", 3, 6, 5), prm(b, "b", 6, 1)) }},
	{"mul/broadcast-leading", func(b *ir.Builder) ir.TensorID { return b.Mul(prm(b, "a", 1, 6, 5), prm(b, "b", 3, 6, 5)) }},
	{"sub", func(b *ir.Builder) ir.TensorID { return b.Sub(prm(b, "a", 6, 5), prm(b, "b", 6, 5)) }},
	{"sub/broadcast-leading", func(b *ir.Builder) ir.TensorID { return b.Sub(prm(b, "a", 1, 5), prm(b, "b", 6, 5)) }},
	{"sub/broadcast-trailing", func(b *ir.Builder) ir.TensorID { return b.Sub(prm(b, "a", 3, 6, 5), prm(b, "b", 3, 6, 1)) }},
	{"div", func(b *ir.Builder) ir.TensorID { return b.Div(prm(b, "a", 6, 5), pos(b, prm(b, "b", 6, 5))) }},
	{"div/broadcast-row", func(b *ir.Builder) ir.TensorID { return b.Div(prm(b, "a", 3, 6, 5), pos(b, prm(b, "b", 5))) }},
	{"div/broadcast-trailing", func(b *ir.Builder) ir.TensorID {
		return b.Div(prm(b, "a", 3, 6, 5), pos(b, prm(b, "b", 3, 6, 1)))
	}},
	{"div/broadcast-numerator", func(b *ir.Builder) ir.TensorID { return b.Div(prm(b, "a", 6, 1), pos(b, prm(b, "b", 6, 5))) }},
	{"masked_fill", func(b *ir.Builder) ir.TensorID { return b.MaskedFill(prm(b, "x", 6, 5), mask01(b, 6, 5), -2) }},
	{"masked_fill/zero", func(b *ir.Builder) ir.TensorID { return b.MaskedFill(prm(b, "x", 6, 5), mask01(b, 6, 5), 0) }},
	{"masked_fill/broadcast-leading", func(b *ir.Builder) ir.TensorID {
		return b.MaskedFill(prm(b, "x", 3, 6, 5), mask01(b, 6, 5), 0.5)
	}},
	{"masked_fill/broadcast-trailing", func(b *ir.Builder) ir.TensorID {
		return b.MaskedFill(prm(b, "x", 3, 6, 5), mask01(b, 3, 6, 1), -1)
	}},
	// Elementwise unary ops.
	{"neg", func(b *ir.Builder) ir.TensorID { return b.Neg(prm(b, "x", 6, 5)) }},
	{"exp", func(b *ir.Builder) ir.TensorID { return b.Exp(prm(b, "x", 6, 5)) }},
	{"log", func(b *ir.Builder) ir.TensorID { return b.Log(pos(b, prm(b, "x", 6, 5))) }},
	{"sqrt", func(b *ir.Builder) ir.TensorID { return b.Sqrt(pos(b, prm(b, "x", 6, 5))) }},
	{"rsqrt", func(b *ir.Builder) ir.TensorID { return b.Rsqrt(pos(b, prm(b, "x", 3, 6, 5))) }},
	{"reciprocal", func(b *ir.Builder) ir.TensorID { return b.Reciprocal(pos(b, prm(b, "x", 6, 5))) }},
	{"pow_scalar", func(b *ir.Builder) ir.TensorID { return b.PowScalar(prm(b, "x", 6, 5), 3) }},
	{"pow_scalar/fraction", func(b *ir.Builder) ir.TensorID { return b.PowScalar(pos(b, prm(b, "x", 6, 5)), -1.5) }},
	{"add_scalar", func(b *ir.Builder) ir.TensorID { return b.AddScalar(prm(b, "x", 6, 5), 0.25) }},
	{"mul_scalar", func(b *ir.Builder) ir.TensorID { return b.MulScalar(prm(b, "x", 6, 5), -1.75) }},
	// Reductions: one axis and several, kept and dropped, leading and
	// trailing.
	{"mean", func(b *ir.Builder) ir.TensorID { return b.Mean(prm(b, "x", 6, 3, 5), false, 1) }},
	{"mean/keep", func(b *ir.Builder) ir.TensorID { return b.Mean(prm(b, "x", 6, 3, 5), true, 2) }},
	{"mean/two-axes", func(b *ir.Builder) ir.TensorID { return b.Mean(prm(b, "x", 6, 3, 5), false, 0, 2) }},
	{"mean/two-axes-keep", func(b *ir.Builder) ir.TensorID { return b.Mean(prm(b, "x", 6, 3, 5), true, 0, 1) }},
	{"var", func(b *ir.Builder) ir.TensorID { return b.Var(prm(b, "x", 6, 3, 5), 1, false, 1) }},
	{"var/population-keep", func(b *ir.Builder) ir.TensorID { return b.Var(prm(b, "x", 6, 3, 5), 0, true, 2) }},
	{"var/two-axes", func(b *ir.Builder) ir.TensorID { return b.Var(prm(b, "x", 6, 3, 5), 1, false, 0, 2) }},
	{"var/two-axes-keep", func(b *ir.Builder) ir.TensorID { return b.Var(prm(b, "x", 6, 3, 5), 0, true, 0, 1) }},
	{"amax", func(b *ir.Builder) ir.TensorID { return b.Amax(prm(b, "x", 6, 3, 5), false, 1) }},
	{"amax/keep", func(b *ir.Builder) ir.TensorID { return b.Amax(prm(b, "x", 6, 3, 5), true, 2) }},
	{"amax/two-axes", func(b *ir.Builder) ir.TensorID { return b.Amax(prm(b, "x", 6, 3, 5), false, 0, 2) }},
	{"amax/two-axes-keep", func(b *ir.Builder) ir.TensorID { return b.Amax(prm(b, "x", 6, 3, 5), true, 1, 2) }},
	// gather along each dim, positions repeating; the index an input
	// (its values uniform over the gathered dim).
	{"gather", func(b *ir.Builder) ir.TensorID {
		return b.Gather(prm(b, "x", 6, 3, 5), 1, b.Input("idx", ir.Int64, 6, 7, 5))
	}},
	{"gather/first", func(b *ir.Builder) ir.TensorID { return b.Gather(prm(b, "x", 6, 5), 0, b.Input("idx", ir.Int64, 2, 5)) }},
	{"gather/last", func(b *ir.Builder) ir.TensorID {
		return b.Gather(prm(b, "x", 3, 6, 5), 2, b.Input("idx", ir.Int64, 3, 6, 8))
	}},
	// Normalisations over the last dim.
	{"rms_norm", func(b *ir.Builder) ir.TensorID { return b.RMSNorm(prm(b, "x", 6, 5), prm(b, "w", 5), 1e-6) }},
	{"rms_norm/rank3", func(b *ir.Builder) ir.TensorID { return b.RMSNorm(prm(b, "x", 3, 6, 5), prm(b, "w", 5), 1e-6) }},
	{"layer_norm_bare", func(b *ir.Builder) ir.TensorID { return b.LayerNormBare(prm(b, "x", 6, 5), 1e-5) }},
	{"layer_norm_bare/rank3", func(b *ir.Builder) ir.TensorID { return b.LayerNormBare(prm(b, "x", 3, 6, 5), 1e-5) }},
}

// opUnderTest is the first op of g whose kind is the case name up to any
// "/".
func opUnderTest(t *testing.T, g *ir.Graph, name string) *ir.Op {
	kind := ir.OpKind(strings.SplitN(name, "/", 2)[0])
	for i := range g.Ops {
		if g.Ops[i].Kind == kind {
			return &g.Ops[i]
		}
	}
	t.Fatalf("case %s: no %s op", name, kind)
	return nil
}

// caseGraph finishes a case with loss = Σ out ⊙ R (R an input).
func caseGraph(t *testing.T, c ruleCase) *ir.Graph {
	b := ir.NewBuilder(c.name, ir.Float64)
	out := c.build(b)
	loss := out
	if s := b.Shape(out); len(s) > 0 {
		axes := make([]int, len(s))
		for i := range axes {
			axes[i] = i
		}
		loss = b.ReduceSum(b.Mul(out, b.Input("R", ir.Float64, s...)), axes...)
	}
	g, err := b.Finish(loss)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// unevenSegments gives every distinct dimension size in g a segment cut
// unevenly among n devices: device 0 gets nothing, the rest random shares.
func unevenSegments(g *ir.Graph, n int, rng *rand.Rand) []spmd.Segment {
	seen := map[int]bool{}
	var segs []spmd.Segment
	for i := range g.Tensors {
		for _, d := range g.Tensors[i].Shape {
			if seen[d] || d < 2 {
				continue
			}
			seen[d] = true
			shares := make([]float64, n)
			for r := 1; r < n; r++ {
				shares[r] = 0.2 + rng.Float64()
			}
			if n == 1 {
				shares[0] = 1
			}
			segs = append(segs, spmd.Segment{Name: fmt.Sprintf("d%d", d), Units: d, Lengths: spmd.RoundLengths(d, shares)})
		}
	}
	return segs
}

// forced runs the op under test with one rule and completes the rest
// greedily.
type forced struct {
	op   ir.OpID
	rule spmd.Rule
	rest spmd.Greedy
}

func (f forced) Choose(g *ir.Graph, op *ir.Op, rules []spmd.Rule, avail [][]spmd.Layout) (spmd.Rule, error) {
	if op.ID == f.op {
		return f.rule, nil
	}
	return f.rest.Choose(g, op, rules, avail)
}

// leafLayout starts a leaf the op reads in the layout its rule wants; a
// wanted Reduce starts as Gather (a pad then makes it partial).
func leafLayout(g *ir.Graph, t ir.TensorID, want spmd.Layout, segs []spmd.Segment) (spmd.Layout, bool) {
	if want.Kind != spmd.Reduce {
		return want, true
	}
	for d := range g.Tensors[t].Shape {
		for s := range segs {
			if l := spmd.G(d, s); spmd.Fits(l, g.Tensors[t].Shape, segs) {
				return l, true
			}
		}
	}
	return spmd.Layout{}, false
}

// Every sharding rule of every operator, forward and backward, equals the
// single-device op on random inputs, with 1, 2, 3, 5 and 8 devices, uneven
// lengths, an empty shard, and both methods for uneven collectives.
func TestEveryRuleMatchesSingleDevice(t *testing.T) {
	const tol = 1e-10
	covered := map[ir.OpKind]int{}
	coveredRule := map[string]int{} // "kind/rule"
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range ruleCases {
		g := caseGraph(t, c)
		for _, n := range []int{1, 2, 3, 5, 8} {
			segs := unevenSegments(g, n, rng)
			op := opUnderTest(t, g, c.name)
			for ri, rule := range spmd.Rules(g, op, segs) {
				name := fmt.Sprintf("%s/n=%d/%s#%d", c.name, n, rule.Name, ri)
				var leaves []spmd.LeafLayout
				ok := true
				for i := range g.Tensors {
					tt := &g.Tensors[i]
					if !tt.Kind.IsLeaf() {
						continue
					}
					l := spmd.I
					for j, in := range op.Inputs {
						if in == tt.ID {
							l, ok = leafLayout(g, tt.ID, rule.In[j], segs)
						}
					}
					leaves = append(leaves, spmd.LeafLayout{Tensor: tt.ID, Layout: l})
				}
				if !ok {
					continue
				}
				method := spmd.MethodPadded
				if ri%2 == 1 {
					method = spmd.MethodGrouped
				}
				ch := forced{op: op.ID, rule: rule, rest: spmd.Greedy{Devices: n, FLOPsPerByte: 1}}
				p, err := spmd.Assemble(g, n, segs, leaves, ch, func(ir.TensorID, spmd.Layout, spmd.Layout) string { return method })
				if err != nil {
					continue // the loss cannot end as Reduce from this rule's output
				}
				rep, err := Verify(g, p, Options{DType: ir.Float64, Steps: 1, Seed: 3, Optimizer: ir.SGD(0.1)})
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if !(rep.Max() <= tol) { // NaN fails too
					t.Errorf("%s: relative error %.3g (loss %.3g, grads %.3g on %s, params %.3g)", name, rep.Max(), rep.Loss.MaxRel, rep.Grads.MaxRel, rep.Grads.Worst, rep.Params.MaxRel)
				}
				covered[op.Kind]++
				coveredRule[string(op.Kind)+"/"+rule.Name]++
			}
		}
	}
	for _, k := range ir.Kinds() {
		if ir.IsDifferentiable(k) && !ir.IsCollective(k) && k != ir.OpReplicate && k != ir.OpDynamicSlice && k != ir.OpPad && covered[k] == 0 {
			t.Errorf("operator %s: no rule verified", k)
		}
	}
	// Rules that only some shapes or attributes allow, which the cases
	// above are built to reach.
	for _, r := range []string{"conv2d/split-groups",
		"add/split-broadcast", "mul/split-broadcast", "sub/split-broadcast", "div/split-broadcast", "masked_fill/split-broadcast",
		"add/partial", "sub/partial", "mul/partial-left", "mul/partial-right", "div/partial-left", "masked_fill/partial",
		"neg/partial", "mul_scalar/partial", "mean/split-reduced", "mean/partial", "mean/split", "var/split", "amax/split",
		"gather/split", "gather/partial", "swiglu/split", "swiglu/partial-up"} {
		if coveredRule[r] == 0 {
			t.Errorf("rule %s: never verified", r)
		}
	}
	t.Logf("verified rules per operator: %v", covered)
	t.Logf("verified rules: %v", coveredRule)
}
