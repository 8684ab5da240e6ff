package executor

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"hap/cpu"
	"hap/ir"
	"hap/spmd"
)

// ruleExactTolerance is how far, relative, an op run on the pieces a
// correct rule hands each device may land from the op run whole: the same
// kernel on the same rows, where only the BLAS's blocking may order a sum
// differently.
const ruleExactTolerance = 1e-12

// verifyTolerance is TestEveryRuleMatchesSingleDevice's: a float64
// distributed step must match one device's to it.
const verifyTolerance = 1e-10

// mutantLeastError is the least relative error a wrong rule must show for
// the numerical check to count as catching it: the mutants below are off
// by O(1) (a softmax over the wrong keys), far above any rounding, so a
// catch is never a near miss.
const mutantLeastError = 1e-3

// attentionCase is one attention op on parameters q [2, 6, 4], k [2, 6, 4],
// v [2, 6, 3], its loss Σ y ⊙ R (caseGraph): queries and keys of the same
// length, so that a rule may cut both with one segment.
func attentionCase(causal bool) ruleCase {
	return ruleCase{fmt.Sprintf("attention/causal=%v", causal), func(b *ir.Builder) ir.TensorID {
		return b.Attention(prm(b, "q", 2, 6, 4), prm(b, "k", 2, 6, 4), prm(b, "v", 2, 6, 3), causal)
	}}
}

// Breaking attention's split-queries rule is caught. The rule cuts the
// queries (and the output) along the sequence and gives every device the
// whole keys and values: each query's softmax then runs over every key, as
// on one device. Each mutant below breaks that in one way, and two checks
// must each catch every one of them:
//
//   - numerically (runOnPieces, the Hoare triple the rule states, as
//     TestEveryRuleMatchesSingleDevice's Verify holds every listed rule
//     to it): run the op on the pieces the mutant's input layouts give
//     each device and rebuild the output by its output layout; it is not
//     the op's output (or the local op cannot even run on those pieces);
//   - structurally: spmd.Check, which Verify, the lowering and the planner
//     all run first, refuses a program whose attention runs the mutant,
//     as not one of spmd.Rules' rules, and so Verify returns an error
//     rather than a report.
//
// The rule itself passes both (it is the control: a check that refused
// everything would catch the mutants too). With Check's rule test taken
// out by hand, Verify itself caught the first two mutants by their numbers
// (relative errors 3.1 and 4.6) and the lowering refused the other two
// (causal attention on unequal query and key lengths; a local output not
// of the Reduce's shape).
func TestBrokenSplitQueriesIsCaught(t *testing.T) {
	const n = 3
	q := spmd.G(1, 0) // the sequence, cut by segment 0
	split := spmd.Rule{Name: "split-queries", In: []spmd.Layout{q, spmd.I, spmd.I}, Out: []spmd.Layout{q}}
	mutants := []struct {
		name   string
		rule   spmd.Rule
		causal bool // the mutant runs on causal attention
	}{
		// Each device attends to its own block of keys only: the keys
		// and values split as if they were queries.
		{"keys and values split like the queries", spmd.Rule{In: []spmd.Layout{q, q, q}, Out: []spmd.Layout{q}}, false},
		// Each device's softmax normalises over its own keys; summing the
		// pieces is not the softmax over all keys (that takes a
		// log-sum-exp correction no rule makes).
		{"keys split, outputs summed", spmd.Rule{In: []spmd.Layout{spmd.I, q, q}, Out: []spmd.Layout{spmd.R}}, false},
		// Under a causal mask a device's first query is not the
		// sequence's first: its local mask hides keys its queries see.
		// This is why spmd.Rules offers split-queries to non-causal
		// attention only.
		{"queries split under a causal mask", split, true},
		// The output is the queries' rows, not a partial sum of the
		// whole: the local op's output does not have the claimed shape.
		{"output claimed partial", spmd.Rule{In: []spmd.Layout{q, spmd.I, spmd.I}, Out: []spmd.Layout{spmd.R}}, false},
	}
	// Uneven lengths, and not from the first device's end: a device
	// whose queries start at 0 is right even under the causal mutant.
	segs := []spmd.Segment{{Name: "seq", Units: 6, Lengths: []int{2, 1, 3}}}
	graphs := map[bool]*ir.Graph{false: caseGraph(t, attentionCase(false)), true: caseGraph(t, attentionCase(true))}
	listed := false
	for _, r := range spmd.Rules(graphs[false], &graphs[false].Ops[0], segs) {
		listed = listed || r.Equal(split)
	}
	if !listed {
		t.Fatalf("spmd.Rules lists no %s → %s for non-causal attention: the test no longer mutates a rule that exists", split.In, split.Out)
	}
	rng := rand.New(rand.NewPCG(8, 9))

	// The control, numerically and through Verify.
	g := graphs[false]
	if rel, err := runOnPieces(g, split, segs, n, rng); err != nil || rel > ruleExactTolerance {
		t.Fatalf("split-queries on its pieces: relative error %.3g, %v; want it within %g of the op run whole", rel, err, ruleExactTolerance)
	}
	p, err := programWith(g, split, segs, n)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(g, p, Options{DType: ir.Float64, Steps: 1, Seed: 3, Optimizer: ir.SGD(0.1)}); err != nil || rep.Max() > verifyTolerance {
		t.Fatalf("split-queries: Verify %v, %+v; want the program to train as one device does", err, rep)
	}

	for _, m := range mutants {
		mg := graphs[m.causal]
		rel, err := runOnPieces(mg, m.rule, segs, n, rng)
		switch {
		case err != nil:
			t.Logf("%s: the local op refuses its pieces: %v", m.name, err)
		case rel < mutantLeastError:
			t.Errorf("%s: on its pieces the op lands within %.3g of the op run whole: the numerical check does not catch it", m.name, rel)
		default:
			t.Logf("%s: relative error %.3g on its pieces", m.name, rel)
		}
		// The program that runs the mutant, its leaves fed in the layouts
		// the mutant reads, as TestEveryRuleMatchesSingleDevice builds
		// one for each listed rule: every precondition holds, so Check
		// must refuse it at the attention and for its rule alone.
		mp, err := programWith(mg, m.rule, segs, n)
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		err = spmd.Check(mg, mp)
		var ie *spmd.InstrError
		if err == nil || !errors.As(err, &ie) || mp.Instrs[ie.Index].Kind != spmd.Compute || mp.Instrs[ie.Index].Op != 0 || !strings.Contains(err.Error(), "is not a sharding rule") {
			t.Errorf("%s: spmd.Check says %v; want the attention's rule refused as not a sharding rule", m.name, err)
		}
		if rep, err := Verify(mg, mp, Options{DType: ir.Float64, Steps: 1, Seed: 3, Optimizer: ir.SGD(0.1)}); err == nil && rep.Max() <= verifyTolerance {
			t.Errorf("%s: Verify passed the program (relative error %.3g)", m.name, rep.Max())
		}
	}
}

// runOnPieces runs g's first op (an op on leaves) under rule on n devices
// cut by segs, from random inputs: each device runs the op on the pieces
// of its inputs that rule.In gives it, and the output is rebuilt from the
// devices' pieces as rule.Out says (a Gather's pieces placed, a Reduce's
// summed, an Identity's each taken as the whole). It returns the largest
// error, relative to the largest element, against the op run on the whole
// inputs; an error where the local op cannot run on the pieces.
func runOnPieces(g *ir.Graph, rule spmd.Rule, segs []spmd.Segment, n int, rng *rand.Rand) (float64, error) {
	op := &g.Ops[0]
	p := &spmd.Program{Devices: n, Segments: segs}
	ins := make([]*cpu.Tensor[float64], len(op.Inputs))
	for j, id := range op.Inputs {
		shape := g.Tensors[id].Shape
		v := make([]float64, shape.Numel())
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		ins[j] = cpu.FromFloat64[float64](shape, v)
	}
	outShape := g.Tensors[op.Outputs[0]].Shape
	whole := cpu.NewTensor[float64](outShape, ir.Float64)
	if err := cpu.Exec(&cpu.Ctx{}, op, ins, []*cpu.Tensor[float64]{whole}); err != nil {
		return 0, err
	}
	outPl := spmd.Placement{Outer: spmd.I, Inner: rule.Out[0]}
	pieces := make([]*cpu.Tensor[float64], n)
	for d := range pieces {
		local := make([]*cpu.Tensor[float64], len(ins))
		for j, v := range ins {
			local[j] = shard(v, p, spmd.Placement{Outer: spmd.I, Inner: rule.In[j]}, v.Shape, d)
		}
		_, shape := p.Piece(outPl, outShape, d)
		pieces[d] = cpu.NewTensor[float64](shape, ir.Float64)
		if err := cpu.Exec(&cpu.Ctx{}, op, local, pieces[d:d+1]); err != nil {
			return 0, fmt.Errorf("device %d: %w", d, err)
		}
	}
	var rebuilt [][]float64
	switch rule.Out[0].Kind {
	case spmd.Gather:
		y, err := assemble("y", p, outPl, outShape, pieces)
		if err != nil {
			return 0, err
		}
		rebuilt = append(rebuilt, y.Data)
	case spmd.Reduce:
		sum := make([]float64, outShape.Numel())
		for _, piece := range pieces {
			for i, x := range piece.Data {
				sum[i] += x
			}
		}
		rebuilt = append(rebuilt, sum)
	case spmd.Identity:
		for _, piece := range pieces {
			rebuilt = append(rebuilt, piece.Data)
		}
	}
	scale := 0.0
	for _, x := range whole.Data {
		scale = math.Max(scale, math.Abs(x))
	}
	worst := 0.0
	for _, y := range rebuilt {
		for i, x := range y {
			worst = math.Max(worst, math.Abs(x-whole.Data[i])/scale)
		}
	}
	return worst, nil
}

// programWith is the program TestEveryRuleMatchesSingleDevice verifies for
// rule: g's first op runs rule, its inputs fed in the layouts it wants,
// the rest completed greedily. Assemble takes the rule the chooser gives
// as it is, listed or not: Check is what refuses a rule spmd.Rules does
// not list.
func programWith(g *ir.Graph, rule spmd.Rule, segs []spmd.Segment, n int) (*spmd.Program, error) {
	op := &g.Ops[0]
	var leaves []spmd.LeafLayout
	for i := range g.Tensors {
		tt := &g.Tensors[i]
		if !tt.Kind.IsLeaf() {
			continue
		}
		l := spmd.I
		for j, in := range op.Inputs {
			if in == tt.ID {
				l = rule.In[j]
			}
		}
		leaves = append(leaves, spmd.LeafLayout{Tensor: tt.ID, Layout: l})
	}
	ch := forced{op: op.ID, rule: rule, rest: spmd.Greedy{Devices: n, FLOPsPerByte: 1}}
	return spmd.Assemble(g, n, segs, leaves, ch, func(ir.TensorID, spmd.Layout, spmd.Layout) string { return spmd.MethodPadded })
}
