package solve

import (
	"slices"
	"testing"

	"hap/cost"
	"hap/encode"
	"hap/executor"
	"hap/ir"
	"hap/models"
	"hap/spmd"
	"hap/strategy"
)

// tinyStarts is the encoding of a tiny zoo model on paper-8 and the
// choices of the hand-written strategies it can express.
func tinyStarts(t *testing.T, model string) (*ir.Graph, *encode.Encoding, []*encode.Choice) {
	t.Helper()
	g, e, _, starts := zooStarts(t, model, models.Options{}, "paper-8")
	return g, e, starts
}

// zooStarts is the encoding of a zoo model on a built-in cluster, under
// Adam, its cost model, and the choices of the hand-written strategies it
// can express (at least one).
func zooStarts(t testing.TB, model string, opt models.Options, clusterName string) (*ir.Graph, *encode.Encoding, *cost.Model, []*encode.Choice) {
	t.Helper()
	g, c, m := zooOn(t, model, opt, clusterName)
	e, err := encode.Encode(g, CandidateSegments(g), m, encode.EncodeOptions{Optimizer: ir.Adam(1e-3)})
	if err != nil {
		t.Fatal(err)
	}
	var starts []*encode.Choice
	for _, name := range strategy.Names() {
		if p, err := strategy.Build(name, g, c); err == nil {
			if ch, ok := e.ChoiceOf(p); ok {
				starts = append(starts, ch)
			}
		}
	}
	if len(starts) == 0 {
		t.Fatalf("%s: no strategy expressible as a choice", model)
	}
	return g, e, m, starts
}

// usesSegment reports whether op class ci (leaf class ti when ci < 0)
// splits anything by segment s under ch.
func usesSegment(e *encode.Encoding, ch *encode.Choice, ci, ti, s int) bool {
	on := func(l spmd.Layout) bool { return l.Kind == spmd.Gather && l.Seg == s }
	if ci < 0 {
		return on(e.Tensors[ti].LeafLayouts[ch.Leaf[ti]])
	}
	r := e.Classes[ci].Rules[ch.Rule[ci]]
	return slices.ContainsFunc(r.In, on) || slices.ContainsFunc(r.Out, on)
}

// TestSegmentComponentMoves checks the relabelling move on every segment
// of the tiny models' strategy choices: the components partition the
// segment's users; a component moved to another segment leaves none of
// its members on the old one and is a valid program, which one moved
// program per model proves equal to single-device training.
func TestSegmentComponentMoves(t *testing.T) {
	for _, model := range []string{"bert-base-tiny", "vit-tiny", "mlp-tiny"} {
		g, e, starts := tinyStarts(t, model)
		moved, verified := 0, false
		for _, ch := range starts {
			for s := range e.Segs {
				comps := segmentComponents(e, ch, s)
				seenOp := map[int]int{}
				seenLeaf := map[int]int{}
				for k, u := range comps {
					for _, ci := range u.ops {
						seenOp[ci]++
						if !usesSegment(e, ch, ci, -1, s) {
							t.Errorf("%s: component %d of segment %d holds op class %d, which does not use it", model, k, s, ci)
						}
					}
					for _, ti := range u.leaves {
						seenLeaf[ti]++
					}
				}
				for ci := range e.Classes {
					if usesSegment(e, ch, ci, -1, s) && seenOp[ci] != 1 {
						t.Errorf("%s: op class %d uses segment %d but is in %d components", model, ci, s, seenOp[ci])
					}
				}
				for ti, tc := range e.Tensors {
					if tc.Producer < 0 && usesSegment(e, ch, -1, ti, s) != (seenLeaf[ti] == 1) {
						t.Errorf("%s: leaf class %d on segment %d in %d components", model, ti, s, seenLeaf[ti])
					}
				}
				for _, u := range comps {
					for to := range e.Segs {
						if to == s {
							continue
						}
						mv := ch.Clone()
						undo, ok := moveComponent(e, mv, u, s, to)
						if !ok {
							continue
						}
						back := mv.Clone()
						undo()
						if !slices.Equal(mv.Rule, ch.Rule) || !slices.Equal(mv.Leaf, ch.Leaf) {
							t.Fatalf("%s: undoing the move %d → %d does not restore the choice", model, s, to)
						}
						mv = back
						moved++
						for _, ci := range u.ops {
							if usesSegment(e, mv, ci, -1, s) {
								t.Errorf("%s: op class %d still on segment %d after moving to %d", model, ci, s, to)
							}
						}
						if _, err := e.Evaluate(mv); err != nil {
							t.Errorf("%s: segment %d → %d: %v", model, s, to, err)
							continue
						}
						p, err := e.Decode(mv)
						if err != nil {
							t.Errorf("%s: segment %d → %d does not decode: %v", model, s, to, err)
							continue
						}
						if verified {
							continue
						}
						rep, err := executor.Verify(g, p, executor.Options{DType: ir.Float64, Steps: 2, Seed: 1, Optimizer: ir.SGD(1e-2)})
						if err != nil {
							t.Fatalf("%s: segment %d → %d: %v", model, s, to, err)
						}
						if rep.Max() > movedProgramTolerance {
							t.Errorf("%s: moved program differs from single-device training by %.3g", model, rep.Max())
						}
						verified = true
					}
				}
			}
		}
		t.Logf("%s: %d component moves", model, moved)
		if moved == 0 {
			t.Errorf("%s: no component could move: the test exercises nothing", model)
		}
	}
}

// movedProgramTolerance is the largest relative difference from
// single-device training in float64 a moved program may show: only
// summation order differs.
const movedProgramTolerance = 1e-9

// TestEvenUnusedKeepsCost checks that splitting the unused segments evenly
// changes neither what a choice costs nor any segment it uses.
func TestEvenUnusedKeepsCost(t *testing.T) {
	_, e, starts := tinyStarts(t, "bert-base-tiny")
	changed := 0
	for _, start := range starts {
		// The strategies split every segment evenly: pile each unused
		// one on the last device, as a lengths solve may leave it.
		ch := start.Clone()
		for s, u := range e.SegmentsUsed(ch) {
			if !u {
				clear(ch.Lengths[s])
				ch.Lengths[s][e.N-1] = e.Segs[s].Units
			}
		}
		before, err := e.Evaluate(ch)
		if err != nil {
			t.Fatal(err)
		}
		even := evenUnused(e, ch)
		after, err := e.Evaluate(even)
		if err != nil {
			t.Fatal(err)
		}
		if before.Seconds != after.Seconds || !slices.Equal(before.Memory, after.Memory) {
			t.Errorf("evenUnused changed the cost: %g s → %g s", before.Seconds, after.Seconds)
		}
		used := e.SegmentsUsed(ch)
		for s := range e.Segs {
			if used[s] && !slices.Equal(ch.Lengths[s], even.Lengths[s]) {
				t.Errorf("segment %d is used but its lengths changed", s)
			}
			if !used[s] {
				lo, hi := slices.Min(even.Lengths[s]), slices.Max(even.Lengths[s])
				if hi-lo > 1 {
					t.Errorf("unused segment %d not even: %v", s, even.Lengths[s])
				}
				if !slices.Equal(ch.Lengths[s], even.Lengths[s]) {
					changed++
				}
			}
		}
	}
	if changed == 0 {
		t.Error("no start had an uneven unused segment: the test exercises nothing")
	}
}
