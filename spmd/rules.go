package spmd

import (
	"strings"

	"hap/ir"
)

// Rule is one way to run an op on shards: a Hoare triple whose
// precondition is the inputs' layouts and whose postcondition is the
// outputs' layouts. Running the op locally on every device's pieces then
// yields pieces of the original outputs in those layouts.
type Rule struct {
	Name string   `json:"name"`
	In   []Layout `json:"in"`
	Out  []Layout `json:"out"`
}

// Equal reports whether r and o name the same layouts (their names aside).
func (r Rule) Equal(o Rule) bool {
	if len(r.In) != len(o.In) || len(r.Out) != len(o.Out) {
		return false
	}
	for i := range r.In {
		if r.In[i] != o.In[i] {
			return false
		}
	}
	for i := range r.Out {
		if r.Out[i] != o.Out[i] {
			return false
		}
	}
	return true
}

func repeat(l Layout, n int) []Layout {
	out := make([]Layout, n)
	for i := range out {
		out[i] = l
	}
	return out
}

// Rules lists the sharding rules of a forward op for the given segments,
// "replicated" (everything Identity: every device computes the whole op)
// first. Only rules whose Gather layouts fit the tensors' shapes are listed.
func Rules(g *ir.Graph, op *ir.Op, segs []Segment) []Rule {
	in := make([]ir.Shape, len(op.Inputs))
	for i, t := range op.Inputs {
		in[i] = g.Tensors[t].Shape
	}
	out := make([]ir.Shape, len(op.Outputs))
	for i, t := range op.Outputs {
		out[i] = g.Tensors[t].Shape
	}
	var rules []Rule
	add := func(name string, inL, outL []Layout) {
		for i, l := range inL {
			if !Fits(l, in[i], segs) {
				return
			}
		}
		for i, l := range outL {
			if !Fits(l, out[i], segs) {
				return
			}
		}
		rules = append(rules, Rule{Name: name, In: inL, Out: outL})
	}
	nIn, nOut := len(in), len(out)
	add("replicated", repeat(I, nIn), repeat(I, nOut))
	// forDims calls f for every (dim, segment) pair of an output rank.
	forDims := func(rank int, f func(d, s int)) {
		for d := 0; d < rank; d++ {
			for s := range segs {
				f(d, s)
			}
		}
	}
	a := &op.Attrs
	switch op.Kind {
	// Elementwise ops: any dim splits; linear ones also pass partial sums.
	case ir.OpReLU, ir.OpGELU, ir.OpSigmoid, ir.OpTanh, ir.OpDropout, ir.OpFillLike, ir.OpSiLU, ir.OpHardSwish, ir.OpHardSigmoid:
		forDims(len(out[0]), func(d, s int) { add("split", []Layout{G(d, s)}, []Layout{G(d, s)}) })
		if op.Kind == ir.OpDropout {
			add("partial", []Layout{R}, []Layout{R})
		}
	case ir.OpSwiGLU:
		// Element i of the output reads element i of gate and of up, so
		// any dim splits all three alike, as the gate and up projections'
		// column-parallel rules leave them. The product is linear in up
		// with gate fixed, so partial sums of up pass through with gate
		// whole (mul's partial-right, which silu then mul allowed).
		forDims(len(out[0]), func(d, s int) { add("split", []Layout{G(d, s), G(d, s)}, []Layout{G(d, s)}) })
		add("partial-up", []Layout{I, R}, []Layout{R})
	case ir.OpSoftmax, ir.OpLogSoftmax:
		forDims(len(out[0])-1, func(d, s int) { add("split", []Layout{G(d, s)}, []Layout{G(d, s)}) })
	case ir.OpBias:
		forDims(len(out[0]), func(d, s int) {
			for i, ax := range a.Axes {
				if ax == d {
					add("split-bias", []Layout{G(d, s), G(i, s)}, []Layout{G(d, s)})
					return
				}
			}
			add("split", []Layout{G(d, s), I}, []Layout{G(d, s)})
		})
	case ir.OpMatMul:
		matmulRules(a, in, add, segs)
	case ir.OpLayerNorm:
		forDims(len(out[0])-1, func(d, s int) { add("split", []Layout{G(d, s), I, I}, []Layout{G(d, s)}) })
	case ir.OpEmbedding:
		forDims(len(in[0]), func(d, s int) { add("split-ids", []Layout{G(d, s), I}, []Layout{G(d, s)}) })
		last := len(out[0]) - 1
		for s := range segs {
			add("split-features", []Layout{I, G(1, s)}, []Layout{G(last, s)})
			add("vocab-parallel", []Layout{I, G(0, s)}, []Layout{R})
		}
	case ir.OpGather:
		// Any dim but the gathered one splits x, the index and the output
		// alike: out[…, j, …] reads x only at the same position of every
		// other dim, so each device gathers from its own piece. Splitting
		// x along Axis has no local rule: a device's positions point
		// anywhere along the whole dim, so its piece of x would not hold
		// them (it would need the dim gathered first, which the planner
		// does by choosing replicated). Gather is linear in x, so partial
		// sums pass through with the index whole.
		forDims(len(out[0]), func(d, s int) {
			if d != a.Axis {
				add("split", []Layout{G(d, s), G(d, s)}, []Layout{G(d, s)})
			}
		})
		add("partial", []Layout{R, I}, []Layout{R})
	case ir.OpReshape:
		reshapeRules(in[0], out[0], add, segs)
		add("partial", []Layout{R}, []Layout{R})
	case ir.OpPermute:
		forDims(len(out[0]), func(d, s int) { add("split", []Layout{G(a.Perm[d], s)}, []Layout{G(d, s)}) })
		add("partial", []Layout{R}, []Layout{R})
	case ir.OpConcat:
		forDims(len(out[0]), func(d, s int) {
			if d != a.Axis {
				add("split", repeat(G(d, s), nIn), []Layout{G(d, s)})
			}
		})
		add("partial", repeat(R, nIn), []Layout{R})
	case ir.OpSplit:
		forDims(len(in[0]), func(d, s int) {
			if d != a.Axis {
				add("split", []Layout{G(d, s)}, repeat(G(d, s), nOut))
			}
		})
		add("partial", []Layout{R}, repeat(R, nOut))
	case ir.OpSlice:
		forDims(len(in[0]), func(d, s int) {
			if d != a.Axis {
				add("split", []Layout{G(d, s)}, []Layout{G(d, s)})
			}
		})
		add("partial", []Layout{R}, []Layout{R})
	case ir.OpAttention:
		attentionRules(a, nIn, len(out[0]), add, segs)
	case ir.OpRotary:
		rotaryRules(len(out[0]), add, segs)
	case ir.OpConv2D:
		groups := ir.ConvGroups(a)
		for s := range segs {
			add("split-batch", []Layout{G(0, s), I}, []Layout{G(0, s)})
			if groups == 1 {
				add("split-out-channels", []Layout{I, G(0, s)}, []Layout{G(1, s)})
				add("split-in-channels", []Layout{G(1, s), G(1, s)}, []Layout{R})
			} else if u := segs[s].Units; u > 0 && groups%u == 0 {
				// Whole groups to each device: a unit of the segment is
				// groups/u groups, so x's channels and w's output channels
				// cut at the same group boundaries and each device runs a
				// smaller grouped convolution (lowering sets its groups).
				// Splitting output channels alone, or input channels
				// alone, would cut through groups.
				add("split-groups", []Layout{G(1, s), G(0, s)}, []Layout{G(1, s)})
			}
		}
	case ir.OpMaxPool2D, ir.OpAdaptiveAvgPool2D, ir.OpAvgPool2D:
		for s := range segs {
			add("split-batch", []Layout{G(0, s)}, []Layout{G(0, s)})
			add("split-channels", []Layout{G(1, s)}, []Layout{G(1, s)})
		}
		if op.Kind == ir.OpAdaptiveAvgPool2D || op.Kind == ir.OpAvgPool2D { // linear
			add("partial", []Layout{R}, []Layout{R})
		}
	case ir.OpBatchNorm:
		// Any dim but the channels splits x and y with the statistics
		// whole: on a batch (or spatial) split the reduce_sums before this
		// op leave partial sums, so the planner all-reduces the 2·C sums
		// (SyncBatchNorm's exchange, priced as any all-reduce) and every
		// shard normalises by the whole batch's statistics. Splitting the
		// channels splits everything per channel, with no exchange.
		forDims(len(out[0]), func(d, s int) {
			if d != 1 {
				add("split", []Layout{G(d, s), I, I, I, I}, []Layout{G(d, s)})
			}
		})
		for s := range segs {
			add("split-channels", []Layout{G(1, s), G(0, s), G(0, s), G(0, s), G(0, s)}, []Layout{G(1, s)})
		}
	case ir.OpBatchNormRunning:
		for s := range segs {
			add("split-channels", repeat(G(0, s), 4), repeat(G(0, s), 2))
		}
	case ir.OpCrossEntropy, ir.OpNLLLoss:
		// A sum over samples: each device's samples give a partial loss.
		for s := range segs {
			add("split-samples", []Layout{G(0, s), G(0, s)}, []Layout{R})
		}
	case ir.OpEinsum:
		einsumRules(a.Equation, add, segs)
	case ir.OpReduceSum:
		forDims(len(in[0]), func(d, s int) {
			pos := d
			for _, ax := range a.Axes {
				if ax < d {
					pos--
				}
				if ax == d {
					add("split-summed", []Layout{G(d, s)}, []Layout{R})
					return
				}
			}
			add("split", []Layout{G(d, s)}, []Layout{G(pos, s)})
		})
		add("partial", []Layout{R}, []Layout{R})
	case ir.OpTop2Gate:
		// Capacity slots count tokens within one group, so a group dim
		// (any before the last two) splits like a batch; splitting tokens
		// or experts would change which assignments fit, so those stay
		// whole.
		forDims(len(in[0])-2, func(d, s int) { add("split-groups", []Layout{G(d, s)}, []Layout{G(d, s), G(d, s)}) })
	default:
		// add, mul (which broadcast) and ir/arith.go's operators.
		arithRules(op, in, out, add, segs)
	}
	return rules
}

func matmulRules(a *ir.Attrs, in []ir.Shape, add func(string, []Layout, []Layout), segs []Segment) {
	rx, rw := len(in[0]), len(in[1])
	mDim, kDimX := rx-2, rx-1
	if a.TransA {
		mDim, kDimX = rx-1, rx-2
	}
	kDimW, nDimW := rw-2, rw-1
	if a.TransB {
		kDimW, nDimW = rw-1, rw-2
	}
	for s := range segs {
		for b := 0; b < rx-2; b++ {
			if rw == 2 {
				add("split-batch", []Layout{G(b, s), I}, []Layout{G(b, s)})
			} else {
				add("split-batch", []Layout{G(b, s), G(b, s)}, []Layout{G(b, s)})
			}
		}
		add("split-rows", []Layout{G(mDim, s), I}, []Layout{G(rx-2, s)})
		add("column-parallel", []Layout{I, G(nDimW, s)}, []Layout{G(rx-1, s)})
		add("row-parallel", []Layout{G(kDimX, s), G(kDimW, s)}, []Layout{R})
	}
	add("partial-left", []Layout{R, I}, []Layout{R})
	add("partial-right", []Layout{I, R}, []Layout{R})
}

// reshapeRules maps a split of input dim d to output dim d' when both cut
// the flat element order at the same places: the dims before them hold the
// same number of elements and so do the blocks they start.
func reshapeRules(x, y ir.Shape, add func(string, []Layout, []Layout), segs []Segment) {
	for d := range x {
		before := x[:d].Numel()
		block := x[d:].Numel()
		for e := range y {
			if y[:e].Numel() != before || y[e:].Numel() != block {
				continue
			}
			for s := range segs {
				add("split", []Layout{G(d, s)}, []Layout{G(e, s)})
			}
		}
	}
}

// einsumRules: an index kept in the output splits every operand that has it
// and the output; an index summed over splits both operands and leaves
// partial sums.
func einsumRules(eq string, add func(string, []Layout, []Layout), segs []Segment) {
	e, err := ir.ParseEinsum(eq)
	if err != nil {
		return
	}
	seen := map[rune]bool{}
	for _, c := range e.A + e.B {
		if seen[c] {
			continue
		}
		seen[c] = true
		for s := range segs {
			l := func(idx string) Layout {
				if p := strings.IndexRune(idx, c); p >= 0 {
					return G(p, s)
				}
				return I
			}
			if p := strings.IndexRune(e.Out, c); p >= 0 {
				add("split-"+string(c), []Layout{l(e.A), l(e.B)}, []Layout{G(p, s)})
			} else {
				add("contract-"+string(c), []Layout{l(e.A), l(e.B)}, []Layout{R})
			}
		}
	}
	add("partial-left", []Layout{R, I}, []Layout{R})
	add("partial-right", []Layout{I, R}, []Layout{R})
}
