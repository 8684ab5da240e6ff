package encode

import (
	"fmt"
	"math"
	"sort"

	"hap/ir"
)

// The step-time model: a timeline of blocks, shared by Evaluate and the
// MILP so that both price every choice the same.
//
// Lowering runs each device's step on two in-order streams (see lower and
// sim): compute (forward ops, backward ops in reverse, then the updates)
// and communication (every collective, in program order). A layout change
// of an activation blocks its consumer, in forward and — its adjoint — in
// backward; a replicated parameter's gradient all-reduce (and the adjoint
// of a parameter's gather) blocks nothing until the update, so it overlaps
// the rest of backward. Lowering issues that all-reduce as soon as the
// gradient is complete, right after the backward of the parameter's first
// consumer.
//
// The forward ops are cut into blocks, a new block starting at every op
// that is the first consumer of a parameter. In backward the blocks run
// last to first, and block k's parameters' gradients are complete when
// block k's backward ends. With, per device d and block b,
//
//	F_d     forward compute + every forward layout change (blocking)
//	B_{d,b} backward compute of b + the adjoints of b's activations' changes (blocking)
//	A_b     the adjoints of b's activations' changes (on the comm stream too)
//	N_b     b's parameters' gradient all-reduces and gather adjoints (non-blocking)
//	U_d     the optimizer updates
//
// the step time is
//
//	T = max_d max( F_d + Σ_b B_{d,b} + U_d,
//	               max_k F_d + Σ_{b≥k} B_{d,b} + N_k + Σ_{b<k} (A_b + N_b) + U_d )
//
// The first term is the compute stream with its blocking waits; the k-th
// is the communication stream: block k's non-blocking collectives cannot
// start before block k's backward has ended, and everything the backward
// of the earlier blocks issues comes after them. Each term is a lower bound
// of the simulated step (which also waits at every collective for the
// slowest device); the tests measure how close their maximum comes.

// negligibleCoef drops coefficients (µs per unit) that only rounding in
// the running prefix and suffix sums leaves behind; real ones are ≥ 1e-6.
const negligibleCoef = 1e-9

// block is a run of forward ops in program order.
type block struct {
	// ops counts the block's op instances per op class; tensors the tensor
	// instances per class whose first consumer is in the block (their
	// layout changes happen there).
	ops, tensors []classCount
}

type classCount struct{ class, n int }

// buildBlocks cuts g's ops into blocks at each parameter's first consumer.
func (e *Encoding) buildBlocks() {
	g := e.G
	first := make([]int, len(g.Tensors)) // first consuming op, −1 if none
	for i := range first {
		first[i] = -1
	}
	for i := range g.Ops {
		for _, t := range g.Ops[i].Inputs {
			if first[t] < 0 {
				first[t] = i
			}
		}
	}
	starts := map[int]bool{0: true}
	for i := range g.Tensors {
		if g.Tensors[i].Kind == ir.Param && first[i] >= 0 {
			starts[first[i]] = true
		}
	}
	blockOf := make([]int, len(g.Ops))
	b := -1
	for i := range g.Ops {
		if starts[i] {
			b++
		}
		blockOf[i] = b
	}
	ops := make([]map[int]int, b+1)
	tensors := make([]map[int]int, b+1)
	for k := range ops {
		ops[k], tensors[k] = map[int]int{}, map[int]int{}
	}
	for i := range g.Ops {
		ops[blockOf[i]][e.classOf[i]]++
	}
	for i := range g.Tensors {
		if first[i] >= 0 {
			tensors[blockOf[first[i]]][e.tclassOf[i]]++
		}
	}
	e.blocks = make([]block, b+1)
	for k := range e.blocks {
		e.blocks[k] = block{ops: counts(ops[k]), tensors: counts(tensors[k])}
	}
}

// counts lists m's entries in class order (deterministic encodings).
func counts(m map[int]int) []classCount {
	out := make([]classCount, 0, len(m))
	for c, n := range m {
		out = append(out, classCount{c, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].class < out[j].class })
	return out
}

// bucket is where a term of a block falls in the timeline formula.
type bucket int

const (
	bucketFc bucket = iota // forward compute chain (compute + blocking changes)
	bucketFa               // forward activation changes (also on the comm stream)
	bucketP                // leaves' forward changes, prefetched
	bucketB                // backward chain (compute + blocking adjoints)
	bucketA                // blocking adjoints (also on the comm stream)
	bucketN                // non-blocking: parameters' adjoints and gradient all-reduces
	numBuckets
)

// atom is a per-instance quantity the terms are multiples of.
type atom int

const (
	atomFwd  atom = iota // an op class's forward seconds
	atomBwd              // an op class's backward seconds
	atomComm             // a tensor class's forward layout change
	atomGrad             // a parameter class's gradient all-reduce
)

// blockTerms lists every term of the timeline: n instances of atom (of op
// or tensor class) in bucket b of block k. Evaluate's stepTime and the
// MILP's timelineRows both add these up, so they cannot drift apart.
func (e *Encoding) blockTerms(visit func(k int, b bucket, a atom, class int, n float64)) {
	for k, bl := range e.blocks {
		for _, oc := range bl.ops {
			visit(k, bucketFc, atomFwd, oc.class, float64(oc.n))
			visit(k, bucketB, atomBwd, oc.class, float64(oc.n))
		}
		for _, tc := range bl.tensors {
			n, t := float64(tc.n), &e.Tensors[tc.class]
			if t.Producer < 0 {
				visit(k, bucketP, atomComm, tc.class, n)
			} else {
				visit(k, bucketFc, atomComm, tc.class, n)
				visit(k, bucketFa, atomComm, tc.class, n)
			}
			switch {
			case t.Kind == ir.Param:
				// A parameter's adjoints and gradient all-reduce block
				// nothing until the update.
				if t.ReqGrad {
					visit(k, bucketN, atomComm, tc.class, n)
				}
				visit(k, bucketN, atomGrad, tc.class, n)
			case t.ReqGrad:
				// An activation's adjoint blocks the backward.
				visit(k, bucketB, atomComm, tc.class, n)
				visit(k, bucketA, atomComm, tc.class, n)
			}
		}
	}
}

// timelineTerms are one device's (or group's) per-instance quantities the
// timeline adds up: forward and backward seconds per op class, forward
// layout-change seconds and gradient all-reduce seconds per tensor class,
// and the total update seconds.
type timelineTerms struct {
	fwd, bwd   []float64 // per op class, one instance
	comm, grad []float64 // per tensor class, one instance
	update     float64
}

// stepTime evaluates the timeline formula above for one device.
func (e *Encoding) stepTime(tt *timelineTerms) float64 {
	var terms [numBuckets][]float64
	for i := range terms {
		terms[i] = make([]float64, len(e.blocks))
	}
	values := [...][]float64{atomFwd: tt.fwd, atomBwd: tt.bwd, atomComm: tt.comm, atomGrad: tt.grad}
	e.blockTerms(func(k int, b bucket, a atom, class int, n float64) {
		terms[b][k] += n * values[a][class]
	})
	Fc, Fa, P, B, A, N := terms[bucketFc], terms[bucketFa], terms[bucketP], terms[bucketB], terms[bucketA], terms[bucketN]
	// The forward ends at FE: after its compute chain, and, for each k,
	// after the comm stream has made block k's leaves' layouts and the
	// compute from block k on has run.
	fsuffix := 0.0
	for k := range Fc {
		fsuffix += Fc[k]
	}
	FE := fsuffix
	fprefix := 0.0
	for k := range e.blocks {
		FE = math.Max(FE, fprefix+P[k]+fsuffix)
		fsuffix -= Fc[k]
		fprefix += P[k] + Fa[k]
	}
	suffix := 0.0
	for _, b := range B {
		suffix += b
	}
	T := FE + suffix + tt.update
	prefix := 0.0
	for k := range e.blocks {
		T = math.Max(T, FE+suffix+N[k]+prefix+tt.update)
		suffix -= B[k]
		prefix += A[k] + N[k]
	}
	return T
}

// timelineRows adds to the MILP the rows T ≥ each term of the timeline
// formula, per device group. Each per-instance expression gets a column of
// its own (an equality row) so that the timeline's rows stay sparse.
func (e *Encoding) timelineRows(T int, fwdC, bwdC [][]lin, commT, gradT, update []lin,
	col func(name string, lo, hi float64, integer bool) int, row func(name string, lo, hi float64, l lin)) {
	inf := math.Inf(1)
	define := func(name string, l lin) int {
		if len(l) == 0 {
			return -1
		}
		c := col(name, 0, inf, false)
		d := lin{c: 1}
		for k, v := range l {
			d.add(k, -v)
		}
		row(name, 0, 0, d)
		return c
	}
	add := func(dst lin, c int, v float64) {
		if c >= 0 {
			dst.add(c, v)
		}
	}
	addAll := func(dst, src lin) {
		for c, v := range src {
			dst.add(c, v)
		}
	}
	cK := make([]int, len(e.Tensors))
	cG := make([]int, len(e.Tensors))
	for ti := range e.Tensors {
		cK[ti] = define(fmt.Sprintf("comm_%d", ti), commT[ti])
		cG[ti] = define(fmt.Sprintf("grad_%d", ti), gradT[ti])
	}
	nb := len(e.blocks)
	for g := range e.Groups {
		cF := make([]int, len(e.Classes))
		cB := make([]int, len(e.Classes))
		for ci := range e.Classes {
			cF[ci] = define(fmt.Sprintf("fwd_%d_%d", ci, g), fwdC[ci][g])
			cB[ci] = define(fmt.Sprintf("bwd_%d_%d", ci, g), bwdC[ci][g])
		}
		U := lin{}
		add(U, define(fmt.Sprintf("update_%d", g), update[g]), 1)
		var terms [numBuckets][]lin
		for i := range terms {
			terms[i] = make([]lin, nb)
			for k := range terms[i] {
				terms[i][k] = lin{}
			}
		}
		columns := [...][]int{atomFwd: cF, atomBwd: cB, atomComm: cK, atomGrad: cG}
		e.blockTerms(func(k int, b bucket, a atom, class int, n float64) {
			add(terms[b][k], columns[a][class], n)
		})
		Fc, P, B, N := terms[bucketFc], terms[bucketP], terms[bucketB], terms[bucketN]
		FaP := make([]lin, nb) // Fa_b + P_b: the comm stream's forward share
		AN := make([]lin, nb)  // A_b + N_b
		for k := range FaP {
			FaP[k], AN[k] = lin{}, lin{}
			addAll(FaP[k], terms[bucketFa][k])
			addAll(FaP[k], P[k])
			addAll(AN[k], terms[bucketA][k])
			addAll(AN[k], N[k])
		}
		// FE: the forward's end (see stepTime).
		FE := col(fmt.Sprintf("forward_end_%d", g), 0, inf, false)
		geq := func(name string, lhs int, terms ...lin) {
			r := lin{lhs: 1}
			for _, l := range terms {
				for c, v := range l {
					r.add(c, -v)
				}
			}
			for c, v := range r {
				if math.Abs(v) < negligibleCoef {
					delete(r, c) // what a running sum's subtraction left
				}
			}
			row(name, 0, inf, r)
		}
		fsuffix := lin{}
		for k := range Fc {
			addAll(fsuffix, Fc[k])
		}
		geq(fmt.Sprintf("forward_compute_%d", g), FE, fsuffix)
		fprefix := lin{}
		for k := range e.blocks {
			if len(P[k]) > 0 { // nothing prefetched here: dominated
				geq(fmt.Sprintf("forward_comm_%d_%d", g, k), FE, fprefix, P[k], fsuffix)
			}
			for c, v := range Fc[k] {
				fsuffix.add(c, -v)
			}
			addAll(fprefix, FaP[k])
		}
		// suffix Σ_{b≥k} B_b; prefix Σ_{b<k} (A_b + N_b).
		suffix := lin{}
		for k := range B {
			addAll(suffix, B[k])
		}
		fe := lin{FE: 1}
		geq(fmt.Sprintf("T_compute_%d", g), T, fe, suffix, U)
		prefix := lin{}
		for k := range e.blocks {
			if len(N[k]) > 0 { // nothing non-blocking issued here: dominated
				geq(fmt.Sprintf("T_comm_%d_%d", g, k), T, fe, suffix, N[k], prefix, U)
			}
			for c, v := range B[k] {
				suffix.add(c, -v)
			}
			addAll(prefix, AN[k])
		}
	}
}
