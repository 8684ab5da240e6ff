package paper

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"hap/milp"
	"hap/spmd"
)

// Ratios solves the paper's ratio LP for a fixed program: one share per
// device B[d] ≥ 0 with Σ B = 1 (the paper has no segments, so the same
// shares cut every segment), minimising Σ over instructions of the
// slowest device's compute plus the slowest device's communication:
//
//	min  Σ_i z_i + fixed + C1·M
//	s.t. z_i ≥ time_i[d]·B[d]   for every split compute instruction i, device d
//	     M   ≥ B[d]             (padded collectives and all-to-alls cost n·B[d]·bytes on device d)
//	     Σ_d B[d] = 1,  B ≥ 0
//
// Identical devices share one variable (the LP is convex and symmetric
// in them, so this loses nothing), and split instructions with equal
// times share one z weighted by their count (the repeated layers). It
// returns per-device shares and the LP's optimum, the paper's cost of
// prog at those shares.
func (p *Problem) Ratios(ctx context.Context, prog *spmd.Program, solver milp.Solver) ([]float64, float64, error) {
	tm, err := p.terms(prog)
	if err != nil {
		return nil, 0, err
	}
	b, c, err := p.solveRatios(ctx, tm, solver)
	if err != nil {
		return nil, 0, err
	}
	return p.deviceShares(b), c, nil
}

// solveRatios solves the ratio LP of a program's terms: per-group shares
// and the optimum.
func (p *Problem) solveRatios(ctx context.Context, tm *terms, solver milp.Solver) ([]float64, float64, error) {
	G := len(p.Groups)
	// Times are in units of the program's cost at even shares, so that
	// the LP's coefficients sit well above the solver's absolute
	// tolerances (a tiny graph's costs are microseconds).
	even := make([]float64, G)
	for gi := range even {
		even[gi] = 1 / float64(p.N)
	}
	ref := tm.at(even)
	if !(ref > 0) {
		return even, ref, nil
	}
	lpScale := 1 / ref
	m := &milp.Model{Sense: milp.Minimize, ObjConst: tm.fixed * lpScale}
	b := make([]int, G)
	sum := milp.Row{Name: "shares", Lower: 1, Upper: 1}
	for gi, devs := range p.Groups {
		b[gi] = m.AddCol(milp.Col{Name: "B" + strconv.Itoa(gi), Upper: 1})
		sum.Coefs = append(sum.Coefs, milp.Coef{Col: b[gi], Val: float64(len(devs))})
	}
	m.AddRow(sum)
	M := m.AddCol(milp.Col{Name: "maxB", Upper: 1, Obj: tm.c1 * lpScale})
	for gi := range p.Groups {
		m.AddRow(milp.Row{Name: "max" + strconv.Itoa(gi), Lower: 0, Upper: math.Inf(1), Coefs: []milp.Coef{{Col: M, Val: 1}, {Col: b[gi], Val: -1}}})
	}
	// Split instructions, merged by equal times.
	type class struct {
		times []float64
		count float64
	}
	var classes []class
	index := map[string]int{}
	for _, ts := range tm.split {
		key := fmt.Sprint(ts)
		c, ok := index[key]
		if !ok {
			c = len(classes)
			index[key] = c
			classes = append(classes, class{times: ts})
		}
		classes[c].count++
	}
	for c, cl := range classes {
		// z is the class's slowest device, in units of ref.
		z := m.AddCol(milp.Col{Name: "z" + strconv.Itoa(c), Upper: math.Inf(1), Obj: cl.count})
		for gi, t := range cl.times {
			m.AddRow(milp.Row{Name: "z" + strconv.Itoa(c) + "_" + strconv.Itoa(gi), Lower: 0, Upper: math.Inf(1),
				Coefs: []milp.Coef{{Col: z, Val: 1}, {Col: b[gi], Val: -t * lpScale}}})
		}
	}
	res, err := solver.Solve(ctx, m, milp.Options{Threads: 1})
	if err != nil {
		return nil, 0, fmt.Errorf("ratio LP: %w", err)
	}
	if res.Status != milp.Optimal {
		return nil, 0, fmt.Errorf("ratio LP: %s", res.Status)
	}
	shares := make([]float64, G)
	total := 0.0
	for gi := range shares {
		shares[gi] = math.Max(0, res.Values[b[gi]])
		total += shares[gi] * float64(len(p.Groups[gi]))
	}
	if total <= 0 {
		return nil, 0, fmt.Errorf("ratio LP: all shares zero")
	}
	for gi := range shares {
		shares[gi] /= total
	}
	return shares, tm.at(shares), nil
}
