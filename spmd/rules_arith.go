package spmd

import "hap/ir"

// arithRules lists the sharding rules of ir/arith.go's forward operators
// and of add and mul, which broadcast; none for any other kind. in and out
// are the op's unsharded shapes.
func arithRules(op *ir.Op, in, out []ir.Shape, add func(string, []Layout, []Layout), segs []Segment) {
	a := &op.Attrs
	forDims := func(rank int, f func(d, s int)) {
		for d := 0; d < rank; d++ {
			for s := range segs {
				f(d, s)
			}
		}
	}
	switch op.Kind {
	// Elementwise unary ops: element i of y reads element i of x alone,
	// so any dim splits x and y alike. neg and mul_scalar are linear, so a
	// partial sum passes through; add_scalar is not (each device would add
	// the number), nor are the others.
	case ir.OpNeg, ir.OpExp, ir.OpLog, ir.OpSqrt, ir.OpRsqrt, ir.OpReciprocal, ir.OpPowScalar, ir.OpAddScalar, ir.OpMulScalar:
		forDims(len(out[0]), func(d, s int) { add("split", []Layout{G(d, s)}, []Layout{G(d, s)}) })
		if op.Kind == ir.OpNeg || op.Kind == ir.OpMulScalar {
			add("partial", []Layout{R}, []Layout{R})
		}
	// Broadcasting binary ops: a split of output dim d cuts each operand
	// that really has d (same size) along its own aligned dim, and leaves
	// whole an operand that lacks d or stretches size 1 over it: every
	// device's piece of the output then reads its piece of the full-size
	// operands and all of the broadcast one, which the local op stretches
	// over the piece (size 1 over a piece of any length, 0 included).
	// With equal shapes this is the old split of both operands alike.
	case ir.OpAdd, ir.OpSub:
		broadcastSplits(in, out[0], add, segs)
		// Linear in both operands together: Σa_r ± Σb_r = Σ(a_r ± b_r),
		// broadcasting included.
		add("partial", []Layout{R, R}, []Layout{R})
	case ir.OpMul:
		broadcastSplits(in, out[0], add, segs)
		// Linear in each operand with the other fixed.
		add("partial-left", []Layout{R, I}, []Layout{R})
		add("partial-right", []Layout{I, R}, []Layout{R})
	case ir.OpDiv:
		broadcastSplits(in, out[0], add, segs)
		// a/b is linear in a; not in b.
		add("partial-left", []Layout{R, I}, []Layout{R})
	case ir.OpMaskedFill:
		// The mask broadcasts to x (the output's shape), so the same
		// split: x cut along d, the mask cut where it has d, else whole.
		broadcastSplits(in, out[0], add, segs)
		if a.Value == 0 {
			// Filling with 0 is x times a 0/1 mask: linear in x.
			add("partial", []Layout{R, I}, []Layout{R})
		}
	// Reductions over Axes: a kept dim splits x and the output alike (each
	// output element reduces a fibre of x that lies on one device); it is
	// at position d less the reduced axes before it, or d itself with
	// KeepDims. A reduced dim splits x into pieces of every fibre: the
	// local means (divided by the unsharded count, which lowering sets)
	// are partial sums of the mean; a variance or a maximum of pieces
	// does not add up to the whole's, so var and amax never split there.
	case ir.OpMean, ir.OpVar, ir.OpAmax:
		forDims(len(in[0]), func(d, s int) {
			pos := d
			for _, ax := range a.Axes {
				if ax == d {
					if op.Kind == ir.OpMean {
						add("split-reduced", []Layout{G(d, s)}, []Layout{R})
					}
					return
				}
				if ax < d && !a.KeepDims {
					pos--
				}
			}
			add("split", []Layout{G(d, s)}, []Layout{G(pos, s)})
		})
		if op.Kind == ir.OpMean {
			// Linear: the mean of partial sums is a partial sum of means.
			add("partial", []Layout{R}, []Layout{R})
		}
	// Normalisations over the last dim: each row (all but the last dim)
	// is normalised on its own, so any other dim splits x and y alike.
	// RMSNorm's weight scales the last dim and stays whole; a replicated
	// parameter reaches the op through a replicate, whose gradient
	// all-reduces the devices' partial weight gradients (as layer_norm's
	// gamma and beta).
	case ir.OpRMSNorm:
		forDims(len(out[0])-1, func(d, s int) { add("split", []Layout{G(d, s), I}, []Layout{G(d, s)}) })
	case ir.OpLayerNormBare:
		forDims(len(out[0])-1, func(d, s int) { add("split", []Layout{G(d, s)}, []Layout{G(d, s)}) })
	}
}

// broadcastSplits adds a split of every output dim d, with each operand
// cut along the dim aligned with d when it has that dim at full size and
// Identity when it lacks it or stretches size 1 over it (ir.BroadcastDim):
// "split" when every operand is cut (equal shapes: add and mul's rule
// before they broadcast), "split-broadcast" when one stays whole.
func broadcastSplits(in []ir.Shape, out ir.Shape, add func(string, []Layout, []Layout), segs []Segment) {
	for d := range out {
		for s := range segs {
			l := make([]Layout, len(in))
			name := "split"
			for i, sh := range in {
				l[i] = I
				if j := ir.BroadcastDim(sh, out, d); j >= 0 {
					l[i] = G(j, s)
				} else {
					name = "split-broadcast"
				}
			}
			add(name, l, []Layout{G(d, s)})
		}
	}
}
