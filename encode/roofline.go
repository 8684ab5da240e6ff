package encode

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"hap/cost"
	"hap/ir"
	"hap/spmd"
)

// A kernel's time is the roofline at its own shapes, max(FLOPs / rate,
// bytes / bandwidth) (cost.Model.ComputeTime), and an op class's Time is
// its kernels' at share 1. Time × share is right where every operand is
// cut by the rule's work segment; but a rule leaves some whole — a
// data-parallel matmul's weight, a column-parallel one's input, a
// row-parallel one's partial-sum output — and each device reads or writes
// those whole whatever its share. Such a kernel takes
//
//	max(a·sh, (B0 + B1·sh)/bw)   = T1·sh + max(α·sh, β + γ·sh)
//
// with a its FLOPs' seconds at share 1, B0 the bytes it moves whatever
// the share and B1 those the share scales (splitBytes, from the kernel's
// own work function), T1 = max(a, (B0+B1)/bw) its time at share 1,
// α = a − T1, β = B0/bw and γ = B1/bw − T1: the extra over Time's share,
// 0 at share 1 and convex in it. Memory-bound at share 1 (α < 0) it is the
// line β + γ·sh (β·(1 − sh)); compute-bound, the hinge max(0, β + γ·sh),
// a column and a row in the MILP. Priced at share × Time, data-parallel
// VGG19 on three L4s (300 GB/s for 30 TFLOP/s: its 411 MB fc1 weight is
// read whole by every device's 43 samples) was 13.6% under the simulator;
// data-parallel BERT-Base there at a batch of 8 (its embedding's gradient
// writes the whole 94 MB table twice on every device) 1.60%, ViT (whose
// weight gradients read x and dy flattened) 3.02%.

// kernelPart is where a kernel's time falls in the timeline.
type kernelPart uint8

const (
	kernelForward  kernelPart = iota // forward compute
	kernelBackward                   // backward compute
	kernelTail                       // backward compute in the parameter-gradient tail (OpClass.TimeW)
)

// rooflineKernel is a kernel of each of an op class's ops whose operands
// are the op's inputs and outputs or their gradients (or reshapes of
// them), so that what a rule cuts of it is known.
type rooflineKernel struct {
	part  kernelPart
	alpha []float64 // per device, α (seconds, one op)
	// beta and gamma are per rule and device; nil for a rule that leaves
	// nothing whole, or cuts an operand by a segment other than its work's
	// (where Time's share stands).
	beta, gamma [][]float64
	// empty is per rule and device the kernel's seconds on a device with
	// none of the work segment's units: an empty shard reads nothing, and
	// writes only its whole outputs (ir's emptyShardWork).
	empty [][]float64
}

// extra is the kernel's seconds beyond Time's share under rule r on
// device d, which holds units of the rule's work segment, share sh of
// them (one op).
func (k *rooflineKernel) extra(r, d, units int, sh float64) float64 {
	switch {
	case k.beta[r] == nil:
		return 0
	case units == 0:
		return k.empty[r][d]
	}
	return math.Max(k.alpha[d]*sh, k.beta[r][d]+k.gamma[r][d]*sh)
}

// reaches reports whether the kernel's extra can be positive under rule
// r on device d when d holds units of the work segment, of U: the line or
// hinge β + γ·sh falls as the share grows (γ ≤ −β), so it does somewhere
// iff it is positive at the least share, one unit. A big matmul's whole
// weight read beside its share of the batch often is not: 218 of
// bert-moe paper-32's 466 hinges never rise at any number of samples,
// and their rows (a column and two rows each, for nothing) had made its
// joint MILP's search three times slower.
func (k *rooflineKernel) reaches(r, d int, U float64) bool {
	return k.beta[r] != nil && k.beta[r][d]+k.gamma[r][d]/U > 0
}

// rooflineNegligible is the least a kernel's whole operands can take
// (seconds, on the slowest device) for rooflineKernels to count them: a
// nanosecond, as for padNegligible; the tiny models' encodings stay as
// they were.
const rooflineNegligible = 1e-9

// noRole marks an operand that is none of the op's inputs and outputs
// nor a gradient shaped like one.
const noRole = math.MinInt

// rooflineKernels lists forward op i's roofline kernels (i in g, its
// training step step): the op itself, then its backward ops bwdIDs,
// those with bwdSlot ≥ 0 (accumulations) left out, the last tail of them
// in the parameter-gradient tail. An operand of a backward op is the
// input or output it is, or whose gradient it is by shape: a gradient the
// op's backward makes is an input's (dx, dw), one it reads an output's
// (dy); or a reshape the backward made of one of those. A kernel with
// another operand (another op's tensor), or cut by a segment other than
// its rule's work, or whose work is not a line in its share (splitBytes),
// is left to Time's share.
func rooflineKernels(g, step *ir.Graph, i int, bwdIDs []ir.OpID, bwdSlot []int, tail int, rules []spmd.Rule, workSegs []int, m *cost.Model, n int) []rooflineKernel {
	fop := &g.Ops[i]
	own := map[ir.TensorID]bool{}
	for _, id := range bwdIDs {
		for _, t := range step.Ops[id].Outputs {
			own[t] = true
		}
	}
	byShape := func(sh ir.Shape, ts []ir.TensorID, role func(int) int) int {
		for j, ft := range ts {
			if g.Tensors[ft].Shape.Equal(sh) {
				return role(j)
			}
		}
		return noRole
	}
	in := func(j int) int { return j }
	out := func(j int) int { return -1 - j }
	role := func(t ir.TensorID) int {
		if j := slices.Index(fop.Inputs, t); j >= 0 {
			return j
		}
		if j := slices.Index(fop.Outputs, t); j >= 0 {
			return -1 - j
		}
		if int(t) < len(g.Tensors) {
			return noRole // another op's forward tensor
		}
		sh := step.Tensors[t].Shape
		first, second := byShape(sh, fop.Inputs, in), byShape(sh, fop.Outputs, out)
		if !own[t] {
			first, second = second, first
		}
		if first != noRole {
			return first
		}
		return second
	}
	var kernels []rooflineKernel
nextKernel:
	for k := 0; k <= len(bwdIDs); k++ {
		kg, kop := g, fop
		if k > 0 {
			if bwdSlot[k-1] >= 0 {
				continue
			}
			kg, kop = step, &step.Ops[bwdIDs[k-1]]
		}
		w, _ := kg.Work(kop.ID)
		if w.Bytes <= 0 {
			continue
		}
		operands := slices.Concat(kop.Inputs, kop.Outputs)
		roles := make([]int, len(operands))
		named := make([]ir.Shape, len(operands)) // the shape whose dims a layout of the role names
		for j, t := range operands {
			roles[j], named[j] = role(t), step.Tensors[t].Shape
			if p := step.Tensors[t].Producer; roles[j] == noRole && p != ir.NoOp && step.Ops[p].Kind == ir.OpReshape {
				// A reshape the backward made of a tensor with a role: a
				// weight's gradient of a 3-D input flattens x and dy to
				// matrices, the cut dim merged into the flat one.
				src := step.Ops[p].Inputs[0]
				roles[j], named[j] = role(src), step.Tensors[src].Shape
			}
			if roles[j] == noRole {
				continue nextKernel
			}
		}
		rk := rooflineKernel{part: kernelBackward, alpha: make([]float64, n), beta: make([][]float64, len(rules)), gamma: make([][]float64, len(rules)), empty: make([][]float64, len(rules))}
		switch {
		case k == 0:
			rk.part = kernelForward
		case k > len(bwdIDs)-tail:
			rk.part = kernelTail
		}
		// Device time without the fixed seconds, which OpClass.Fixed pays
		// whole: t1 is the part of the kernel's time its share scales, fill
		// the small-kernel fill time when it is fixed (the FLOPs bound the
		// whole kernel; cost.Model.FixedTime), which the bytes' line is
		// measured against.
		t1, fill := make([]float64, n), make([]float64, n)
		for d := range n {
			a := m.KernelTime(d, ir.Work{Class: w.Class, FLOPs: w.FLOPs})
			whole := math.Max(a, m.KernelTime(d, ir.Work{Class: w.Class, Bytes: w.Bytes}))
			fill[d] = m.FixedTime(d, w) - cost.LaunchOverhead(w)
			t1[d] = whole - fill[d]
			rk.alpha[d] = a - whole
		}
		leaves := false
	rules:
		for ri, r := range rules {
			if workSegs[ri] < 0 {
				continue
			}
			cut := map[ir.TensorID]int{} // an operand cut by the work segment: its dim
			written := 0.0               // the bytes of the outputs left whole
			emptyIn, emptyOut := false, len(kop.Outputs) > 0
			for j, ro := range roles {
				var l spmd.Layout
				if ro >= 0 {
					l = r.In[ro]
				} else {
					l = r.Out[-1-ro]
				}
				t := operands[j]
				isOut := j >= len(kop.Inputs)
				switch {
				case l.Kind != spmd.Gather:
					if isOut {
						written += float64(step.Tensors[t].Shape.Numel() * step.Tensors[t].DType.Size())
						emptyOut = false
					}
				case l.Seg != workSegs[ri]:
					continue rules
				default:
					dim, ok := mergedDim(named[j], step.Tensors[t].Shape, l.Dim)
					if !ok {
						continue rules
					}
					cut[t] = dim
					emptyIn = emptyIn || !isOut
				}
			}
			if len(cut) == 0 || (!emptyIn && !emptyOut) {
				// Nothing cut, or nothing cut that an empty shard would
				// skip (every input whole, an output too): Time's share.
				continue
			}
			b0, b1, ok := splitBytes(kg, kop.ID, cut, w)
			if !ok || b0 <= 0 {
				continue
			}
			beta, gamma, empty := make([]float64, n), make([]float64, n), make([]float64, n)
			for d := range n {
				beta[d] = m.KernelTime(d, ir.Work{Class: w.Class, Bytes: b0}) - fill[d]
				gamma[d] = m.KernelTime(d, ir.Work{Class: w.Class, Bytes: b1}) - t1[d]
				empty[d] = m.KernelTime(d, ir.Work{Class: ir.ClassElementwise, Bytes: written}) - fill[d]
			}
			if slices.Max(beta) < rooflineNegligible {
				continue
			}
			rk.beta[ri], rk.gamma[ri], rk.empty[ri] = beta, gamma, empty
			leaves = true
		}
		if leaves {
			kernels = append(kernels, rk)
		}
	}
	return kernels
}

// RooflineBudget is how much of a step the kernels' extras left out of
// the encoding (pruneRooflines) may add up to at most, as a share of the
// least compute any plan's busiest device does: 0.01%, the most a plan's
// price may be under the simulator's step for them. A row for the
// whole 3 KB a layer norm's gradient writes for its γ (10 ns on an L4, by
// a column and a row per rule and device group) prices nothing a plan
// would notice, and the joint MILP's search slows with every such row
// (BERT-MoE on paper-32: 25.7 s planned with them, 12.9 s with those
// under a microsecond left out, the same plan).
const RooflineBudget = 1e-4

// pruneRooflines leaves out the roofline extras (a kernel under a rule)
// that can add least to a step — ops × the most the extra is on any
// device, β or an empty shard's writes — smallest first, while their sum
// stays within RooflineBudget of computeFloor: a plan's priced step is
// then under what every extra would price by at most that share (the
// extras are never negative, so leaving them out only lowers it).
func (e *Encoding) pruneRooflines() {
	type extra struct {
		ci, ki, ri int
		most       float64 // seconds per step, at most
	}
	var xs []extra
	for ci := range e.Classes {
		c := &e.Classes[ci]
		for ki := range c.Roof {
			k := &c.Roof[ki]
			for ri := range k.beta {
				if k.beta[ri] != nil {
					most := math.Max(slices.Max(k.beta[ri]), slices.Max(k.empty[ri]))
					xs = append(xs, extra{ci, ki, ri, float64(len(c.Ops)) * most})
				}
			}
		}
	}
	slices.SortStableFunc(xs, func(a, b extra) int { return cmp.Compare(a.most, b.most) })
	left := RooflineBudget * e.computeFloor()
	for _, x := range xs {
		if x.most > left {
			break
		}
		left -= x.most
		k := &e.Classes[x.ci].Roof[x.ki]
		k.beta[x.ri], k.gamma[x.ri], k.empty[x.ri] = nil, nil, nil
	}
	for ci := range e.Classes {
		c := &e.Classes[ci]
		c.Roof = slices.DeleteFunc(c.Roof, func(k rooflineKernel) bool {
			return !slices.ContainsFunc(k.beta, func(b []float64) bool { return b != nil })
		})
	}
}

// computeFloor is the least compute any plan's busiest device does: each
// op class's work is spread over the devices (shares summing to at least
// one), so the devices together do at least its time on the fastest, and
// the busiest at least the N-th of that.
func (e *Encoding) computeFloor() float64 {
	sum := 0.0
	for ci := range e.Classes {
		sum += slices.Min(e.Classes[ci].Time)
	}
	return sum / float64(e.N)
}

// mergedDim is the dim of shape to that holds dim d of shape from, where
// to is from reshaped with d merged with its neighbours into one dim (or
// left alone): that dim's first and last elements start and end runs of
// from's leading dims, one run up to d, the other past it. It reports
// false where the reshape splits d.
func mergedDim(from, to ir.Shape, d int) (int, bool) {
	leads := func(n, lo, hi int) bool { // some from[:i], lo ≤ i ≤ hi, has n elements
		for i := lo; i <= hi; i++ {
			if from[:i].Numel() == n {
				return true
			}
		}
		return false
	}
	for td := range to {
		if leads(to[:td].Numel(), 0, d) && leads(to[:td+1].Numel(), d+1, len(from)) {
			return td, true
		}
	}
	return 0, false
}

// splitBytes splits the bytes of kernel id of g (its work w) into B0, what
// it moves whatever its share, and B1, what it moves at share 1 of the
// operands cut (cut: tensor → dim), by pricing the kernel with those dims
// twice and three times as long: B(s) = B0 + B1·s. It reports false where
// the kernel is not that — FLOPs not in proportion to the share, or bytes
// not a line in it (a product of two cut dims) — which Time's share then
// prices as before. The kernel's own work function decides, not a formula
// of its operands, so a kernel that moves more than its operands (an
// embedding's gradient writes its whole table twice, a normalisation's
// backward reads its input twice) or other than them (an elementwise op
// counts the elements it touches, attention its scores) is priced as the
// simulator runs it.
func splitBytes(g *ir.Graph, id ir.OpID, cut map[ir.TensorID]int, w ir.Work) (b0, b1 float64, ok bool) {
	at := func(times int) ir.Work {
		wt, _ := g.WorkAt(id, func(t ir.TensorID) ir.Shape {
			sh := g.Tensors[t].Shape
			if dim, ok := cut[t]; ok {
				sh = sh.Clone()
				sh[dim] *= times
			}
			return sh
		})
		return wt
	}
	w2, w3 := at(2), at(3)
	b1 = w2.Bytes - w.Bytes
	if !near(w2.FLOPs, 2*w.FLOPs) || !near(w3.FLOPs, 3*w.FLOPs) || !near(w3.Bytes-w2.Bytes, b1) {
		return 0, 0, false
	}
	return w.Bytes - b1, b1, true
}

// splitTolerance is how near splitBytes' two differences must be to read
// as one line: float64 sums of a handful of tensor sizes, exact in their
// integers far below it.
const splitTolerance = 1e-9

func near(a, b float64) bool {
	return math.Abs(a-b) <= splitTolerance*math.Max(math.Abs(a), math.Abs(b))
}

// rooflineTerms adds class ci's roofline extras (one op) under its rules
// to the MILP's forward, backward and tail expressions of group g: per
// kernel a column u at least β·x_r + γ·sh where the group holds units of
// the rule's work segment (the line, memory-bound at share 1, or the
// hinge, compute-bound, with u ≥ 0), and the empty shard's writes where it
// holds none. sh is the group's share of the rule's work part
// (workShare), the one its compute is priced by: shared by the part's
// rules, it is the rule's share while x_r is 1, and with x_r 0 the row
// asks nothing (γ ≤ 0); that part's compute, priced at least Σ|γ| per
// unit, keeps its ceiling term ξ from being raised to lower u. (Shares of
// their own, a ζ and its rows per rule and group, had made bert-moe
// paper-32's joint MILP twice as slow.) A row that cannot bind is left
// out (a kernel that never reaches above Time's share, an empty shard
// that writes nothing), and a column with no row.
func (e *Encoding) rooflineTerms(v *MILPVars, ci, g int, fwd, bwd, tail lin, workShare func(ri int) lin,
	col func(name string, lo, hi float64, integer bool) int, row func(name string, lo, hi float64, l lin)) {
	c := &e.Classes[ci]
	d := e.Groups[g][0]
	inf := math.Inf(1)
	for ri := range c.Rules {
		if c.WorkSeg[ri] < 0 {
			continue
		}
		U := float64(e.Segs[c.WorkSeg[ri]].Units)
		sh := workShare(ri)
		for ki := range c.Roof {
			k := &c.Roof[ki]
			if k.beta[ri] == nil {
				continue
			}
			reaches, empty := k.reaches(ri, d, U), milpTime*k.empty[ri][d]
			if !reaches && empty == 0 {
				continue
			}
			if reaches && sh == nil {
				// A roofline kernel is one of the op's, so its work part
				// has time on every device, and a share.
				panic(fmt.Sprintf("encode: op class %d, rule %d: a roofline kernel without its work part's share", ci, ri))
			}
			// u ≥ β·x + γ·sh − β·(1 − nz), u ≥ empty·(x − nz), u ≥ 0,
			// with nz 1 when the group holds units of the segment (its
			// first device, which the timeline prices, then some).
			x, nz := v.x[ci][ri], v.nz[c.WorkSeg[ri]][g]
			name := fmt.Sprintf("roof_%d_%d_%d_%d", ci, ri, ki, g)
			u := col(name, 0, inf, false)
			if reaches {
				beta, gamma := milpTime*k.beta[ri][d], milpTime*k.gamma[ri][d]
				l := lin{u: 1, x: -beta, nz: -beta}
				addScaled(l, sh, -gamma)
				row(name, -beta, inf, l)
			}
			if empty > 0 {
				row(name+"_empty", 0, inf, lin{u: 1, x: -empty, nz: empty})
			}
			dst := []lin{kernelForward: fwd, kernelBackward: bwd, kernelTail: bwd}[k.part]
			dst.add(u, 1)
			if k.part == kernelTail {
				tail.add(u, 1)
			}
		}
	}
}
