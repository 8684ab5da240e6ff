package paper

import (
	"context"
	"math"
	"reflect"
	"slices"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/ir"
	"hap/milp/cbc"
	"hap/models"
	"hap/spmd"
)

// Tolerances.
const (
	// costTol is the relative difference allowed between two prices of
	// the same program, or between the search's optimum and the oracle's
	// (sums of the same terms in another order).
	costTol = 1e-9
	// lpTol is the relative difference allowed between the LP's optimum
	// and the best point of a grid over the shares (the LP is exact up to
	// the solver's tolerances; the grid only approaches the optimum).
	lpTol = 1e-6
	// shareTol bounds how far the LP's shares may stray from a hand-
	// computed optimum.
	shareTol = 1e-6
	// gridSlack bounds how far above the LP's optimum a grid's best point
	// may be (the grid's resolution, not an error of the LP).
	gridSlack = 2e-3
)

// Test clusters: one device per machine, of unlike speeds.
const (
	duoYAML = `name: duo
nodes:
  - {name: v, device: V100-SXM2-16GB, count: 1}
  - {name: p, device: P100-PCIE-16GB, count: 1}
inter: {class: ethernet, bandwidth: 10Gb/s}
`
	trioYAML = `name: trio
nodes:
  - {name: a, device: A100-SXM4-80GB, count: 1}
  - {name: v, device: V100-SXM2-16GB, count: 1}
  - {name: t, device: T4, count: 1}
inter: {class: ethernet, bandwidth: 25Gb/s}
`
)

func model(t *testing.T, yaml string) *cost.Model {
	t.Helper()
	c, err := cluster.ParseCluster([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(c, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func builtin(t *testing.T, name string) *cost.Model {
	t.Helper()
	c, err := cluster.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(c, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func finish(t *testing.T, b *ir.Builder, loss ir.TensorID) *ir.Graph {
	t.Helper()
	g, err := b.Finish(loss)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// mlp: two linear layers and a loss.
func mlp(t *testing.T) *ir.Graph {
	b := ir.NewBuilder("mlp", ir.Float32)
	x := b.Input("x", ir.Float32, 12, 8)
	h := b.ReLU(b.MatMul(x, b.Param("w1", 8, 16)))
	return finish(t, b, b.CrossEntropy(b.MatMul(h, b.Param("w2", 16, 4)), b.Label("y", 12)))
}

// residual: a tensor read twice (a matmul and the add around it), so
// one collective may serve two readers.
func residual(t *testing.T) *ir.Graph {
	b := ir.NewBuilder("residual", ir.Float32)
	x := b.Input("x", ir.Float32, 8, 8)
	h := b.ReLU(b.MatMul(x, b.Param("w1", 8, 8)))
	y := b.Add(h, b.MatMul(h, b.Param("w2", 8, 8)))
	return finish(t, b, b.CrossEntropy(b.MatMul(y, b.Param("w3", 8, 4)), b.Label("y", 8)))
}

// wide: a three-layer MLP large enough that compute, parameter
// all-reduces and activation collectives all weigh (milliseconds each on
// the test clusters), with a residual connection around the middle.
func wide(t *testing.T) *ir.Graph {
	b := ir.NewBuilder("wide", ir.Float32)
	x := b.Input("x", ir.Float32, 512, 1024)
	h := b.ReLU(b.MatMul(x, b.Param("w1", 1024, 2048)))
	h = b.Add(h, b.ReLU(b.MatMul(b.ReLU(b.MatMul(h, b.Param("w2", 2048, 1024))), b.Param("w3", 1024, 2048))))
	return finish(t, b, b.CrossEntropy(b.MatMul(h, b.Param("w4", 2048, 16)), b.Label("y", 512)))
}

func segs(units ...int) []spmd.Segment {
	var out []spmd.Segment
	for _, u := range units {
		out = append(out, spmd.Segment{Name: "s", Units: u})
	}
	return out
}

// oracle enumerates every program of the search's space — every rule of
// every op, every layout every leaf can be fed in, every way to obtain
// each input (collectives included where a free slice would do) — under
// shares b — all of them, or with prune, all but the partial programs
// already dearer than the best complete one (every cost is
// non-negative). It keeps the cheapest.
//
// With prune it starts from an incumbent of seed seconds (+Inf: none), so
// that it proves no program cheaper than seed exists and finds the
// cheapest at most seed: seeded just above the search's cost, it must find
// the search's optimum or a cheaper program. Unseeded, mlp-tiny on trio
// had not finished after 37 minutes under the calibrated cost model
// (issue 69; seeded alone, not in 200 s), whose launch overheads and
// latencies make most partial programs cost alike, so that pruning by
// the first complete programs found cuts little. The
// prune also counts, for the ops not yet placed, the least compute any of
// their rules costs (rest): a lower bound on what completing the program
// adds, its launches included, which is what lets it cut early.
type oracle struct {
	p       *Problem
	b       []float64
	method  Method
	words   []uint64 // per tensor: layouts held, and the communicated flag
	rules   []int
	choices [][]uint32
	best    float64
	bestPa  *Path
	prune   bool      // skip partial programs dearer than the best complete one
	rest    []float64 // rest[k]: the least compute of ops k, k+1, … under any rules
	count   int       // complete programs priced
}

func newOracle(p *Problem, b []float64, method Method, prune bool, seed float64) *oracle {
	best := math.Inf(1)
	if prune {
		best = seed
	}
	o := &oracle{p: p, b: b, method: method, prune: prune, words: make([]uint64, len(p.tens)), rules: make([]int, len(p.ops)), choices: make([][]uint32, len(p.ops)), best: best}
	for k := range o.choices {
		o.choices[k] = make([]uint32, len(p.G.Ops[k].Inputs))
	}
	o.rest = make([]float64, len(p.ops)+1)
	for k := len(p.ops) - 1; k >= 0; k-- {
		least := math.Inf(1)
		for r := range p.ops[k].rules {
			least = min(least, p.computeCost(k, r, b))
		}
		o.rest[k] = o.rest[k+1] + least
	}
	o.op(0, 0)
	return o
}

func (o *oracle) comm(k kind, t ir.TensorID) float64 {
	c0, c1 := o.p.BW.commCoeffs(k, o.p.tens[t].bytes, o.p.N, o.p.req[t], o.method)
	return c0 + c1*maxShare(o.b)
}

func (o *oracle) op(k int, cost float64) {
	if o.prune && cost+o.rest[k] >= o.best {
		return
	}
	g := o.p.G
	if k == len(o.p.ops) {
		if o.words[g.Loss]&(1<<bitR) == 0 {
			return
		}
		o.count++
		if cost >= o.best {
			return
		}
		o.best = cost
		o.bestPa = &Path{Rules: append([]int(nil), o.rules...), Cost: cost}
		for _, c := range o.choices {
			o.bestPa.Choices = append(o.bestPa.Choices, append([]uint32(nil), c...))
		}
		return
	}
	for r := range o.p.ops[k].rules {
		o.rules[k] = r
		o.slot(k, r, 0, cost+o.p.computeCost(k, r, o.b))
	}
}

func (o *oracle) slot(k, r, j int, cost float64) {
	op := &o.p.G.Ops[k]
	oi := &o.p.ops[k]
	if j == len(op.Inputs) {
		saved := make([]uint64, len(op.Outputs))
		for i, t := range op.Outputs {
			saved[i] = o.words[t]
			o.words[t] = 1 << oi.out[r][i]
		}
		o.op(k+1, cost)
		for i, t := range op.Outputs {
			o.words[t] = saved[i]
		}
		return
	}
	t := op.Inputs[j]
	ti := &o.p.tens[t]
	if o.words[t] == 0 && ti.leaf {
		for x := range ti.layouts {
			if ti.layouts[x].Kind == spmd.Reduce {
				continue // nothing is fed as partial sums
			}
			c := cost
			if ti.layouts[x] == spmd.I && ti.param && o.p.req[t] {
				c += o.p.BW.gradCoeff(ti.bytes)
			}
			o.words[t] = 1 << x
			o.obtain(k, r, j, c, x+1)
		}
		o.words[t] = 0
		return
	}
	o.obtain(k, r, j, cost, 0)
}

func (o *oracle) obtain(k, r, j int, cost float64, place int) {
	t := o.p.G.Ops[k].Inputs[j]
	ti := &o.p.tens[t]
	L := int(o.p.ops[k].in[r][j])
	to := ti.layouts[L]
	w := o.words[t]
	next := func(w2 uint64, opt, src int, c float64) {
		o.words[t] = w2
		o.choices[k][j] = pack(place, opt, src)
		o.slot(k, r, j+1, c)
		o.words[t] = w
	}
	if w&(1<<L) != 0 {
		next(w, optHave, 0, cost)
		return
	}
	if to.Kind == spmd.Gather && w&(1<<bitI) != 0 {
		next(w|1<<L, optSlice, 0, cost)
	}
	if w&flag != 0 {
		return
	}
	for a := range ti.layouts {
		if w&(1<<a) == 0 {
			continue
		}
		if k := kindOf(ti.layouts[a], to); k <= kAllToAll {
			next(w|1<<L|flag, optColl, a, cost+o.comm(k, t))
		}
		if to.Kind == spmd.Gather {
			if k := kindOf(ti.layouts[a], spmd.I); k <= kAllToAll {
				next(w|1<<L|1<<bitI|flag, optCollSlice, a, cost+o.comm(k, t))
			}
		}
	}
}

// The search returns the cheapest program of its space: the exhaustive
// oracle's optimum, on small graphs, under uneven shares and both global
// methods; and the program it emits is priced at what the search says.
func TestSearchMatchesExhaustiveOracle(t *testing.T) {
	mlpTiny, err := models.Load("mlp-tiny", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		g      *ir.Graph
		yaml   string
		segs   []spmd.Segment
		shares []float64 // per device; nil: proportional to FP32
		prune  bool      // branch and bound (the full enumeration is too long)
	}{
		{"mlp/duo", mlp(t), duoYAML, segs(12, 16, 4), nil, false},
		{"mlp/trio", mlp(t), trioYAML, segs(12, 16, 4), nil, false},
		{"mlp/trio-skewed", mlp(t), trioYAML, segs(12, 16, 4), []float64{0.7, 0.2, 0.1}, false},
		{"residual/trio", residual(t), trioYAML, segs(8, 4), nil, true},
		{"residual/duo-skewed", residual(t), duoYAML, segs(8, 4), []float64{0.9, 0.1}, true},
		{"mlp-tiny/trio", mlpTiny, trioYAML, segs(8, 32, 4), nil, true},
		{"wide/duo", wide(t), duoYAML, segs(512, 1024, 2048, 16), nil, true},
		{"wide/trio", wide(t), trioYAML, segs(512, 1024, 2048, 16), nil, true},
		{"wide/trio-skewed", wide(t), trioYAML, segs(512, 2048), []float64{0.2, 0.3, 0.5}, true},
	} {
		m := model(t, tc.yaml)
		p, err := NewProblem(tc.g, tc.segs, m, ir.Adam(1e-3))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		shares := tc.shares
		if shares == nil {
			shares = ProportionalShares(m)
		}
		b := p.groupShares(shares)
		for _, method := range []Method{Padded, Grouped} {
			pa, err := p.Search(context.Background(), b, method)
			if err != nil {
				t.Fatalf("%s/%s: %v", tc.name, method, err)
			}
			// Seeded a little above the search's cost: the oracle must
			// find a program at most that, the search's or a cheaper one.
			o := newOracle(p, b, method, tc.prune, pa.Cost*(1+costTol))
			if o.bestPa == nil {
				t.Fatalf("%s/%s: the oracle found no program", tc.name, method)
			}
			if math.Abs(pa.Cost-o.best) > costTol*o.best {
				t.Errorf("%s/%s: search %.12g, oracle %.12g (%d programs reached)", tc.name, method, pa.Cost, o.best, o.count)
			}
			if pa.Bound > pa.Cost*(1+costTol) {
				t.Errorf("%s/%s: the heuristic's bound %.12g exceeds the optimum %.12g", tc.name, method, pa.Bound, pa.Cost)
			}
			for who, path := range map[string]*Path{"search": pa, "oracle": o.bestPa} {
				prog, err := p.Program(path, shares, method)
				if err != nil {
					t.Fatalf("%s/%s: %s's program: %v", tc.name, method, who, err)
				}
				got, err := p.Price(prog, shares)
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(got-path.Cost) > costTol*path.Cost {
					t.Errorf("%s/%s: %s's program priced %.12g, its path %.12g", tc.name, method, who, got, path.Cost)
				}
			}
			t.Logf("%s/%s: optimum %.6g (root bound %.6g); search expanded %d states, oracle priced %d programs", tc.name, method, pa.Cost, pa.Bound, pa.Expansions, o.count)
		}
	}
}

// zooSegments picks candidate segments as hap's planner does
// (solve.CandidateSegments, which this package may not import): the
// batch, attention heads, experts, and the widths of 2-D parameters.
func zooSegments(g *ir.Graph) []spmd.Segment {
	var out []spmd.Segment
	seen := map[int]bool{}
	add := func(u int) {
		if u >= 2 && !seen[u] {
			seen[u] = true
			out = append(out, spmd.Segment{Name: "s", Units: u})
		}
	}
	if in := g.TensorsOfKind(ir.Input); len(in) > 0 && len(g.Tensors[in[0]].Shape) > 0 {
		add(g.Tensors[in[0]].Shape[0])
	}
	for i := range g.Ops {
		if op := &g.Ops[i]; op.Kind == ir.OpAttention {
			add(g.Tensors[op.Inputs[0]].Shape[1])
		}
	}
	var widths []int
	for _, t := range g.TensorsOfKind(ir.Param) {
		switch s := g.Tensors[t].Shape; len(s) {
		case 2:
			widths = append(widths, s[1])
		case 3:
			add(s[0])
		}
	}
	slices.Sort(widths)
	for _, w := range widths {
		add(w)
	}
	return out
}

// On the zoo's tiny models, where no exhaustive enumeration finishes, the
// A* search agrees with the paper's plain uniform-cost search (no
// heuristic, so trivially exact): the heuristic is admissible where it
// matters, with its reopening and the skipped dominated collectives.
func TestSearchMatchesUniformCost(t *testing.T) {
	m := builtin(t, "paper-8")
	// The uniform-cost search needs 0.7 M expansions on bert-base-tiny
	// and more than MaxExpansions on gpt2-tiny; these three are quick.
	for _, name := range []string{"mlp-tiny", "vgg19-tiny", "vit-tiny"} {
		g, err := models.Load(name, models.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewProblem(g, zooSegments(g), m, ir.Adam(1e-3))
		if err != nil {
			t.Fatal(err)
		}
		b := p.groupShares(ProportionalShares(m))
		for _, method := range []Method{Padded, Grouped} {
			astar, err := p.Search(context.Background(), b, method)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, method, err)
			}
			ucs, err := p.search(context.Background(), b, method, true)
			if err != nil {
				t.Fatalf("%s/%s: uniform cost: %v", name, method, err)
			}
			if math.Abs(astar.Cost-ucs.Cost) > costTol*ucs.Cost {
				t.Errorf("%s/%s: A* %.12g, uniform-cost %.12g", name, method, astar.Cost, ucs.Cost)
			}
			if astar.Bound > astar.Cost*(1+costTol) {
				t.Errorf("%s/%s: root bound %.12g above the optimum %.12g", name, method, astar.Bound, astar.Cost)
			}
			t.Logf("%s/%s: %.6g; A* expanded %d states, uniform-cost %d", name, method, astar.Cost, astar.Expansions, ucs.Expansions)
		}
	}
}

// The beam search a capped search falls back to returns a valid
// program, priced as it says, no cheaper than the optimum.
func TestBeamFallback(t *testing.T) {
	m := builtin(t, "paper-8")
	g, err := models.Load("vit-tiny", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProblem(g, zooSegments(g), m, ir.Adam(1e-3))
	if err != nil {
		t.Fatal(err)
	}
	shares := ProportionalShares(m)
	b := p.groupShares(shares)
	for _, method := range []Method{Padded, Grouped} {
		best, err := p.Search(context.Background(), b, method)
		if err != nil {
			t.Fatal(err)
		}
		pa, err := p.newSearcher(p.prices(b, method), false).beamSearch(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if pa.Cost < best.Cost*(1-costTol) {
			t.Errorf("%s: beam %.12g below the optimum %.12g", method, pa.Cost, best.Cost)
		}
		prog, err := p.Program(pa, shares, method)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if got, _ := p.Price(prog, shares); math.Abs(got-pa.Cost) > costTol*pa.Cost {
			t.Errorf("%s: beam's program priced %.12g, its path %.12g", method, got, pa.Cost)
		}
		t.Logf("%s: beam %.6g, optimum %.6g", method, pa.Cost, best.Cost)
	}
}

// gridMin is the least of tm over a grid of per-group shares with
// Σ_g size[g]·b[g] = 1: every multiple of 1/steps for the first groups,
// the last taking the rest.
func gridMin(tm *terms, size []int, steps int) float64 {
	best := math.Inf(1)
	b := make([]float64, len(size))
	var rec func(g int, left float64)
	rec = func(g int, left float64) {
		if g == len(size)-1 {
			b[g] = left / float64(size[g])
			best = math.Min(best, tm.at(b))
			return
		}
		for i := 0; i <= steps; i++ {
			x := float64(i) / float64(steps)
			if x*float64(size[g]) > left+1e-12 {
				break
			}
			b[g] = x
			rec(g+1, left-x*float64(size[g]))
		}
	}
	rec(0, 1)
	return best
}

// The ratio LP finds the shares minimising the paper's cost of a fixed
// program: no grid point over the shares beats it, and on one op split
// across two devices it balances their times exactly.
func TestRatiosLP(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		g     *ir.Graph
		m     *cost.Model
		segs  []spmd.Segment
		steps int
	}{
		{"mlp/duo", mlp(t), model(t, duoYAML), segs(12, 16, 4), 20000},
		{"residual/trio", residual(t), model(t, trioYAML), segs(8, 4), 1000},
		{"mlp/paper-8", mlp(t), builtin(t, "paper-8"), segs(12, 16, 4), 4000},
	} {
		p, err := NewProblem(tc.g, tc.segs, tc.m, ir.Adam(1e-3))
		if err != nil {
			t.Fatal(err)
		}
		start := ProportionalShares(tc.m)
		for _, method := range []Method{Padded, Grouped} {
			pa, err := p.Search(ctx, p.groupShares(start), method)
			if err != nil {
				t.Fatal(err)
			}
			prog, err := p.Program(pa, start, method)
			if err != nil {
				t.Fatal(err)
			}
			shares, lp, err := p.Ratios(ctx, prog, cbc.Solver{})
			if err != nil {
				t.Fatalf("%s/%s: %v", tc.name, method, err)
			}
			sum := 0.0
			for _, devs := range p.Groups {
				for _, d := range devs {
					if shares[d] != shares[devs[0]] {
						t.Errorf("%s/%s: identical devices %d and %d got shares %g and %g", tc.name, method, devs[0], d, shares[devs[0]], shares[d])
					}
					sum += shares[d]
				}
			}
			if math.Abs(sum-1) > shareTol {
				t.Errorf("%s/%s: shares sum to %g", tc.name, method, sum)
			}
			price, err := p.Price(prog, shares)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(price-lp) > costTol*lp {
				t.Errorf("%s/%s: LP optimum %.12g, the program priced at its shares %.12g", tc.name, method, lp, price)
			}
			if before, _ := p.Price(prog, start); lp > before*(1+costTol) {
				t.Errorf("%s/%s: LP %.9g is worse than the starting shares' %.9g", tc.name, method, lp, before)
			}
			tm, _ := p.terms(prog)
			size := make([]int, len(p.Groups))
			for gi, devs := range p.Groups {
				size[gi] = len(devs)
			}
			grid := gridMin(tm, size, tc.steps)
			if lp > grid*(1+lpTol) {
				t.Errorf("%s/%s: LP %.9g, but a grid point costs %.9g", tc.name, method, lp, grid)
			}
			if grid > lp*(1+gridSlack) {
				t.Errorf("%s/%s: the grid's best %.9g is far from the LP's %.9g", tc.name, method, grid, lp)
			}
		}
	}

	// By hand: a program whose only share-dependent term is one op split
	// across two devices (times t0, t1 at share 1) costs max(t0·b, t1·(1−b))
	// plus constants, least at b = t1/(t0+t1).
	p, err := NewProblem(mlp(t), segs(12), model(t, duoYAML), ir.Adam(1e-3))
	if err != nil {
		t.Fatal(err)
	}
	tm := &terms{split: [][]float64{{3, 5}}, fixed: 2}
	want := []float64{5.0 / 8, 3.0 / 8}
	b, c := ratiosOfTerms(t, p, tm)
	for gi := range want {
		if math.Abs(b[gi]-want[gi]) > shareTol {
			t.Errorf("shares %v, want %v", b, want)
		}
	}
	if wantC := 2 + 15.0/8; math.Abs(c-wantC) > costTol*wantC {
		t.Errorf("cost %.12g, want %.12g", c, wantC)
	}
	// A padded collective's n·max B term pulls the shares toward even:
	// with C1 = 16 and the op above, max(3b, 5(1−b)) + 16·max(b, 1−b) is
	// least at b = 1/2 (the collective's slope outweighs the op's).
	tm = &terms{split: [][]float64{{3, 5}}, c1: 16}
	b, c = ratiosOfTerms(t, p, tm)
	if math.Abs(b[0]-0.5) > shareTol || math.Abs(c-(2.5+8)) > costTol*10.5 {
		t.Errorf("with a padded collective: shares %v cost %.9g, want [0.5 0.5] and 10.5", b, c)
	}
}

// ratiosOfTerms solves the ratio LP of terms tm directly.
func ratiosOfTerms(t *testing.T, p *Problem, tm *terms) ([]float64, float64) {
	t.Helper()
	b, c, err := p.solveRatios(context.Background(), tm, cbc.Solver{})
	if err != nil {
		t.Fatal(err)
	}
	return b, c
}

// Same inputs, same program, shares and cost.
func TestSynthesizeIsDeterministic(t *testing.T) {
	g, err := models.Load("bert-base-tiny", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := builtin(t, "paper-8")
	opt := Options{Segments: segs(4, 2, 16, 32, 50)}
	var first *Result
	for i := 0; i < 2; i++ {
		r, err := Synthesize(context.Background(), g, m, opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := spmd.Check(g, r.Program); err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = r
			continue
		}
		if !reflect.DeepEqual(first.Program, r.Program) || first.Cost != r.Cost || !reflect.DeepEqual(first.Shares, r.Shares) || first.Method != r.Method {
			t.Fatalf("two runs differ: cost %v vs %v, method %s vs %s", first.Cost, r.Cost, first.Method, r.Method)
		}
	}
	p, err := NewProblem(g, opt.Segments, m, ir.Adam(1e-3))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Price(first.Program, first.Shares); err != nil || math.Abs(got-first.Cost) > costTol*first.Cost {
		t.Errorf("the result's cost %.12g, its program priced %.12g (%v)", first.Cost, got, err)
	}
}

// The bandwidths are the cost model's: an even all-gather of a large
// message costs what the paper's formula says, within the latency the
// slope leaves out.
func TestBandwidthsMatchTheCostModel(t *testing.T) {
	m := builtin(t, "paper-8")
	bw, err := MeasureBandwidths(m)
	if err != nil {
		t.Fatal(err)
	}
	n := m.NumDevices()
	group := make([]int, n)
	pieces := make([]float64, n)
	const total = 4 << 30
	for i := range group {
		group[i], pieces[i] = i, total/float64(n)
	}
	sec, err := m.CollectiveTime(cost.Call{Kind: cost.AllGather, Group: group, Bytes: pieces})
	if err != nil {
		t.Fatal(err)
	}
	if got := total * bw[kAllGather]; math.Abs(got-sec) > 1e-3*sec {
		t.Errorf("all-gather of 4 GiB: paper's price %.6g s, cost model %.6g s", got, sec)
	}
	for k := kind(0); k < numKinds; k++ {
		if !(bw[k] > 0) {
			t.Errorf("%s: no bandwidth on 8 devices", kindNames[k])
		}
	}
	if one, _ := MeasureBandwidths(model(t, "name: one\nnodes:\n  - {name: a, device: T4, count: 1}\n")); one != (Bandwidths{}) {
		t.Errorf("one device: bandwidths %v, want all free", one)
	}
}
