package paper

import (
	"fmt"
	"math"

	"hap/cost"
	"hap/ir"
	"hap/spmd"
)

// Problem is the paper's search space for one forward graph on one
// cluster, with everything the search and the ratio LP need that does not
// depend on the ratios: per op its rules and per-device time, per tensor
// its layouts, and which tensors are live between ops.
type Problem struct {
	G    *ir.Graph
	Segs []spmd.Segment // units; the same shares cut every segment
	N    int            // devices
	// Groups are devices of identical hardware: they have the same times,
	// so the ratio LP gives them the same share (an exact symmetry: the
	// LP is convex and invariant under permuting them).
	Groups [][]int
	BW     Bandwidths

	req  []bool
	ops  []opInfo     // by op index (ops are in topological order)
	tens []tensorInfo // by tensor id
	// live[k] are the tensors held before op k runs (k = 0..len(ops)),
	// ascending: produced (or fed, for leaves: placed by an earlier
	// consumer) and still read by op k or later — or the loss.
	live [][]ir.TensorID
	// frontier[k] are the reads at op k or later of the tensors of
	// live[k] (the heuristic's state-dependent part).
	frontier [][]frontierUse
	firstUse []int // op c's slot j is read number firstUse[c]+j
	lossOp   int
}

type opInfo struct {
	rules []spmd.Rule
	split []bool    // per rule: the rule cuts the op's work by the shares
	time  []float64 // per group: forward + backward seconds at share 1
	in    [][]int8  // per rule, per input: the layout bit
	out   [][]int8  // per rule, per output: the layout bit
	// slots: per input, the index into the expansion's scratch words (the
	// live tensors of live[k], then the leaves this op places).
	slot   []int
	places []ir.TensorID // leaves first read here, in scratch order after live[k]
	// next: for each tensor of live[k+1], its scratch index (≥ 0) or
	// −1−j for output j.
	next []int
	// lambda[f][j] is the share of this op (and what hangs under it) that
	// the heuristic's relaxation f attaches to input slot j (zero for
	// leaves; all zero for a root op, whose inputs are all leaves).
	lambda [numForests][]float64
	root   bool
	// fed are the leaves first read here, each with its slots.
	fed []fedLeaf
}

type fedLeaf struct {
	t     ir.TensorID
	slots []int
}

// use is one read of a tensor: op c's input slot j.
type use struct{ c, j int }

// frontierUse is a read, at op k or later, of a tensor live before op k.
type frontierUse struct {
	live int // index into live[k]
	c, j int
	use  int // the read's number: op c's input slots are numbered from firstUse[c]
}

type tensorInfo struct {
	layouts []spmd.Layout // bit i ↔ layouts[i]; I is bit 0, R bit 1
	leaf    bool
	param   bool
	used    bool    // some op reads it
	bytes   float64 // the whole tensor
	leafOK  uint64  // layouts a leaf may be fed in
	gather  uint64  // the Gather layouts
	uses    []use   // every read, in op order
	first   int     // the first reader, −1 none
}

// Layout bits of every tensor.
const (
	bitI = 0
	bitR = 1
	// flag marks a tensor already communicated (the second reduction).
	flag     = uint64(1) << 63
	maxBits  = 63
	availAll = flag - 1
)

// NewProblem builds the search space of forward graph g on the cluster
// priced by m, with candidate segments segs (their Units; lengths are
// chosen by the ratios). opt is the optimizer autodiff derives the
// backward ops with (their work prices each op's backward pass).
func NewProblem(g *ir.Graph, segs []spmd.Segment, m *cost.Model, opt ir.Optimizer) (*Problem, error) {
	if g.Loss == ir.NoTensor {
		return nil, fmt.Errorf("graph %s has no loss", g.Name)
	}
	if opt.Kind == "" {
		opt = ir.Adam(1e-3)
	}
	bw, err := MeasureBandwidths(m)
	if err != nil {
		return nil, fmt.Errorf("bandwidths: %w", err)
	}
	p := &Problem{G: g, Segs: segs, N: m.NumDevices(), BW: bw, req: ir.RequiresGrad(g), lossOp: int(g.Tensors[g.Loss].Producer)}
	byKey := map[string]int{}
	for d := 0; d < p.N; d++ {
		sp := m.Spec(d)
		k := fmt.Sprintf("%s|%v|%v|%v", sp.Name, sp.FP32, sp.FP16, sp.MemBandwidth)
		gi, ok := byKey[k]
		if !ok {
			gi = len(p.Groups)
			byKey[k] = gi
			p.Groups = append(p.Groups, nil)
		}
		p.Groups[gi] = append(p.Groups[gi], d)
	}

	// Backward work per forward op: the gradient ops autodiff emits.
	step, err := ir.BuildTrainStep(g, opt)
	if err != nil {
		return nil, err
	}
	bwd := make([][]ir.Work, len(g.Ops))
	for i := range step.Ops {
		op := &step.Ops[i]
		if op.Phase == ir.Backward && op.GradOf != ir.NoOp && int(op.GradOf) < len(g.Ops) {
			w, _ := step.Work(op.ID)
			bwd[op.GradOf] = append(bwd[op.GradOf], w)
		}
	}

	p.tens = make([]tensorInfo, len(g.Tensors))
	for i := range g.Tensors {
		t := &g.Tensors[i]
		ti := &p.tens[i]
		ti.leaf, ti.param = t.Kind.IsLeaf(), t.Kind == ir.Param
		ti.bytes = float64(t.Shape.Numel() * t.DType.Size())
		ti.layouts = []spmd.Layout{spmd.I, spmd.R}
		ti.leafOK = 1 << bitI
		for d := range t.Shape {
			for s := range segs {
				if l := spmd.G(d, s); spmd.Fits(l, t.Shape, segs) {
					if len(ti.layouts) == maxBits {
						return nil, fmt.Errorf("tensor %q has more than %d layouts", t.Name, maxBits)
					}
					ti.gather |= 1 << len(ti.layouts)
					ti.leafOK |= 1 << len(ti.layouts)
					ti.layouts = append(ti.layouts, l)
				}
			}
		}
	}
	bit := func(t ir.TensorID, l spmd.Layout) int8 {
		for i, x := range p.tens[t].layouts {
			if x == l {
				return int8(i)
			}
		}
		return -1
	}

	K := len(g.Ops)
	first := make([]int, len(g.Tensors)) // first reader, −1 none
	last := make([]int, len(g.Tensors))  // last reader, −1 none
	for i := range first {
		first[i], last[i] = -1, -1
	}
	for k := 0; k < K; k++ {
		for j, t := range g.Ops[k].Inputs {
			if first[t] < 0 {
				first[t] = k
			}
			last[t] = k
			p.tens[t].used = true
			p.tens[t].uses = append(p.tens[t].uses, use{k, j})
		}
	}
	for t := range p.tens {
		p.tens[t].first = first[t]
	}
	if last[g.Loss] < K {
		last[g.Loss] = K // the loss stays live to the end
	}
	// live[k]: available before op k (produced by an op < k, or a leaf
	// first read before k) and read at k or later.
	p.live = make([][]ir.TensorID, K+1)
	for k := 0; k <= K; k++ {
		for t := range g.Tensors {
			tt := &g.Tensors[t]
			var avail bool
			if tt.Kind.IsLeaf() {
				avail = first[t] >= 0 && first[t] < k
			} else {
				avail = int(tt.Producer) < k
			}
			if avail && last[t] >= k {
				p.live[k] = append(p.live[k], ir.TensorID(t))
			}
		}
	}

	p.ops = make([]opInfo, K)
	for k := 0; k < K; k++ {
		op := &g.Ops[k]
		if op.Phase != ir.Forward {
			return nil, fmt.Errorf("op %q is not a forward op", op.Name)
		}
		oi := &p.ops[k]
		oi.rules = spmd.Rules(g, op, segs)
		for _, r := range oi.rules {
			split := false
			for _, ls := range [][]spmd.Layout{r.In, r.Out} {
				for _, l := range ls {
					split = split || l.Kind == spmd.Gather
				}
			}
			oi.split = append(oi.split, split)
			in := make([]int8, len(r.In))
			for j, l := range r.In {
				in[j] = bit(op.Inputs[j], l)
			}
			out := make([]int8, len(r.Out))
			for j, l := range r.Out {
				out[j] = bit(op.Outputs[j], l)
			}
			oi.in, oi.out = append(oi.in, in), append(oi.out, out)
		}
		fw, _ := g.Work(op.ID)
		works := append([]ir.Work{fw}, bwd[k]...)
		oi.time = make([]float64, len(p.Groups))
		for gi, devs := range p.Groups {
			for _, w := range works {
				oi.time[gi] += m.ComputeTime(devs[0], w)
			}
		}
		// Scratch words: live[k], then the leaves first read here.
		pos := map[ir.TensorID]int{}
		for i, t := range p.live[k] {
			pos[t] = i
		}
		for _, t := range op.Inputs {
			if _, ok := pos[t]; !ok {
				if !g.Tensors[t].Kind.IsLeaf() || first[t] != k {
					return nil, fmt.Errorf("op %q reads %q before it exists", op.Name, g.Tensors[t].Name)
				}
				pos[t] = len(p.live[k]) + len(oi.places)
				oi.places = append(oi.places, t)
			}
		}
		primary, nonLeaf := -1, 0
		for j, t := range op.Inputs {
			oi.slot = append(oi.slot, pos[t])
			if !g.Tensors[t].Kind.IsLeaf() {
				nonLeaf++
				if primary < 0 || primaryBefore(g, p.tens, t, op.Inputs[primary]) {
					primary = j
				}
			}
		}
		oi.root = nonLeaf == 0
		for f := range oi.lambda {
			oi.lambda[f] = make([]float64, len(op.Inputs))
		}
		for j, t := range op.Inputs {
			if !g.Tensors[t].Kind.IsLeaf() {
				oi.lambda[forestUniform][j] = 1 / float64(nonLeaf)
			}
		}
		if primary >= 0 {
			oi.lambda[forestPrimary][primary] = 1
		}
		for _, t := range oi.places {
			fl := fedLeaf{t: t}
			for j, x := range op.Inputs {
				if x == t {
					fl.slots = append(fl.slots, j)
				}
			}
			oi.fed = append(oi.fed, fl)
		}
		for _, t := range p.live[k+1] {
			if i, ok := pos[t]; ok {
				oi.next = append(oi.next, i)
				continue
			}
			j := -1
			for o, x := range op.Outputs {
				if x == t {
					j = o
				}
			}
			if j < 0 {
				return nil, fmt.Errorf("op %q: live tensor %q has no source", op.Name, g.Tensors[t].Name)
			}
			oi.next = append(oi.next, -1-j)
		}
	}
	p.firstUse = make([]int, K+1)
	for k := 0; k < K; k++ {
		p.firstUse[k+1] = p.firstUse[k] + len(g.Ops[k].Inputs)
	}
	p.frontier = make([][]frontierUse, K+1)
	for k := 0; k <= K; k++ {
		for i, t := range p.live[k] {
			for _, u := range p.tens[t].uses {
				if u.c >= k {
					p.frontier[k] = append(p.frontier[k], frontierUse{live: i, c: u.c, j: u.j, use: p.firstUse[u.c] + u.j})
				}
			}
		}
	}
	return p, nil
}

// groupShares turns per-device shares into per-group shares (the first
// device of each group) — the shares the search and the LP use.
func (p *Problem) groupShares(shares []float64) []float64 {
	b := make([]float64, len(p.Groups))
	for gi, devs := range p.Groups {
		b[gi] = shares[devs[0]]
	}
	return b
}

// deviceShares spreads per-group shares to devices.
func (p *Problem) deviceShares(b []float64) []float64 {
	out := make([]float64, p.N)
	for gi, devs := range p.Groups {
		for _, d := range devs {
			out[d] = b[gi]
		}
	}
	return out
}

// computeCost is the slowest device's forward + backward seconds of op k
// under rule r: time × share when the rule splits the work, else time.
func (p *Problem) computeCost(k, r int, b []float64) float64 {
	oi := &p.ops[k]
	c := 0.0
	for gi, t := range oi.time {
		if oi.split[r] {
			t *= b[gi]
		}
		c = math.Max(c, t)
	}
	return c
}

// maxShare is the largest share.
func maxShare(b []float64) float64 {
	m := 0.0
	for _, x := range b {
		m = math.Max(m, x)
	}
	return m
}

// ProportionalShares are the paper's starting ratios: each device's share
// proportional to its FP32 peak (cluster device spec .FP32).
func ProportionalShares(m *cost.Model) []float64 {
	out := make([]float64, m.NumDevices())
	total := 0.0
	for d := range out {
		out[d] = m.Spec(d).FP32
		total += out[d]
	}
	for d := range out {
		if total > 0 {
			out[d] /= total
		} else {
			out[d] = 1 / float64(len(out))
		}
	}
	return out
}

// The heuristic's relaxations (see heuristic.go).
const (
	// forestPrimary hangs each op under one input, its primary.
	forestPrimary = iota
	// forestUniform shares each op evenly among its computed inputs.
	forestUniform
	numForests
)

// primaryBefore orders candidate primary inputs: the larger tensor first
// (the data rather than a gate's mask), then the latest producer (the
// branch of a residual add rather than the skip connection).
func primaryBefore(g *ir.Graph, tens []tensorInfo, a, b ir.TensorID) bool {
	if tens[a].bytes != tens[b].bytes {
		return tens[a].bytes > tens[b].bytes
	}
	return g.Tensors[a].Producer > g.Tensors[b].Producer
}
