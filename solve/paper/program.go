package paper

import (
	"fmt"

	"hap/ir"
	"hap/spmd"
)

// Program turns a search path into a distributed program: segments cut
// by shares (per device) rounded to integer lengths with
// spmd.RoundLengths (floor, then the leftover units to the largest
// shortfall — the paper's rounding), every leaf's fed layout, and per op
// the communication folded before it, then the op under its rule. Uneven
// all-gathers and reduce-scatters use method. The result passes
// spmd.Check.
func (p *Problem) Program(pa *Path, shares []float64, method Method) (*spmd.Program, error) {
	prog := &spmd.Program{Devices: p.N, Segments: make([]spmd.Segment, len(p.Segs))}
	for s, seg := range p.Segs {
		prog.Segments[s] = spmd.Segment{Name: seg.Name, Units: seg.Units, Lengths: spmd.RoundLengths(seg.Units, shares)}
	}
	fed := make([]int, len(p.tens)) // fed layout bit + 1
	for k := range p.ops {
		op := &p.G.Ops[k]
		oi := &p.ops[k]
		r := pa.Rules[k]
		if r < 0 || r >= len(oi.rules) || len(pa.Choices[k]) != len(op.Inputs) {
			return nil, fmt.Errorf("path: op %q has no valid step", op.Name)
		}
		for j, t := range op.Inputs {
			place, opt, src := unpack(pa.Choices[k][j])
			ti := &p.tens[t]
			if place > 0 {
				fed[t] = place
			}
			to := ti.layouts[oi.in[r][j]]
			comm := func(from, to spmd.Layout) {
				in := spmd.Instr{Kind: spmd.Comm, Tensor: t, From: from, To: to, Collective: spmd.Conversion(from, to)}
				if in.Collective == ir.OpAllGather || in.Collective == ir.OpReduceScatter {
					in.Method = method
				}
				prog.Instrs = append(prog.Instrs, in)
			}
			switch opt {
			case optSlice:
				comm(spmd.I, to)
			case optColl:
				comm(ti.layouts[src], to)
			case optCollSlice:
				comm(ti.layouts[src], spmd.I)
				comm(spmd.I, to)
			}
		}
		prog.Instrs = append(prog.Instrs, spmd.Instr{Kind: spmd.Compute, Op: op.ID, Rule: oi.rules[r]})
	}
	for t := range p.tens {
		if !p.tens[t].leaf {
			continue
		}
		l := spmd.I // never read: Identity, and free
		if fed[t] > 0 {
			l = p.tens[t].layouts[fed[t]-1]
		}
		prog.Leaves = append(prog.Leaves, spmd.LeafLayout{Tensor: ir.TensorID(t), Layout: l})
	}
	if err := spmd.Check(p.G, prog); err != nil {
		return nil, fmt.Errorf("the search's program is invalid: %w", err)
	}
	return prog, nil
}

// terms is a program's cost under the paper's model as a function of the
// shares: Σ over split compute instructions of max_d time·B[d], plus
// constants, plus C1·max_d B[d] for padded and all-to-all collectives.
type terms struct {
	split [][]float64 // per split compute instruction: time per group
	fixed float64     // whole compute instructions and the constant part of communication
	c1    float64     // coefficient of max_d B[d]
}

// terms reads prog (a 1-D program of p's graph) into the paper's cost
// terms. Each compute instruction costs its slowest device, each
// communication its c0 + c1·max B (see commCoeffs, methods as recorded in
// the program), and each replicated parameter its gradient all-reduce.
func (p *Problem) terms(prog *spmd.Program) (*terms, error) {
	if prog.Mesh != nil {
		return nil, fmt.Errorf("the paper's cost model prices 1-D programs only")
	}
	tm := &terms{}
	for i := range prog.Instrs {
		in := &prog.Instrs[i]
		switch in.Kind {
		case spmd.Compute:
			oi := &p.ops[in.Op]
			split := false
			for _, ls := range [][]spmd.Layout{in.Rule.In, in.Rule.Out} {
				for _, l := range ls {
					split = split || l.Kind == spmd.Gather
				}
			}
			if split {
				tm.split = append(tm.split, oi.time)
				continue
			}
			mx := 0.0
			for _, t := range oi.time {
				mx = max(mx, t)
			}
			tm.fixed += mx
		case spmd.Comm:
			k := kindOf(in.From, in.To)
			if k > kAllToAll {
				continue // dynamic slice (or a pad): local
			}
			method := in.Method
			if method == "" {
				method = Padded
			}
			c0, c1 := p.BW.commCoeffs(k, p.tens[in.Tensor].bytes, p.N, p.req[in.Tensor], method)
			tm.fixed += c0
			tm.c1 += c1
		}
	}
	for _, lf := range prog.Leaves {
		ti := &p.tens[lf.Tensor]
		if ti.param && ti.used && p.req[lf.Tensor] && lf.Layout == spmd.I {
			tm.fixed += p.BW.gradCoeff(ti.bytes)
		}
	}
	return tm, nil
}

// at evaluates the terms at per-group shares b.
func (tm *terms) at(b []float64) float64 {
	c := tm.fixed + tm.c1*maxShare(b)
	for _, ts := range tm.split {
		mx := 0.0
		for gi, t := range ts {
			mx = max(mx, t*b[gi])
		}
		c += mx
	}
	return c
}

// Price is the paper's cost of prog at per-device shares: Σ over
// instructions of the slowest device's compute plus the slowest device's
// communication, forward and backward (see the package documentation).
// Identical devices must have equal shares.
func (p *Problem) Price(prog *spmd.Program, shares []float64) (float64, error) {
	tm, err := p.terms(prog)
	if err != nil {
		return 0, err
	}
	b := p.groupShares(shares)
	for gi, devs := range p.Groups {
		for _, d := range devs {
			if shares[d] != b[gi] {
				return 0, fmt.Errorf("devices %d and %d are identical but have shares %g and %g", devs[0], d, b[gi], shares[d])
			}
		}
	}
	return tm.at(b), nil
}
