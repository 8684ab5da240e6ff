package encode_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/encode"
	"hap/encode/encodetest"
	"hap/models"
	"hap/solve"
)

// The tolerances within which a MILP solver may hand back an integer
// column a hair off its integer: ChoiceFrom must read the same choice
// from all of them.
const (
	// cbcPrimalTolerance is the primal feasibility tolerance milp/cbc sets
	// (1e-9, against CBC's default 1e-7).
	cbcPrimalTolerance = 1e-9
	// cbcDefaultPrimalTolerance is CBC's own default, where a backend
	// that does not set it leaves it.
	cbcDefaultPrimalTolerance = 1e-7
	// cbcIntegerTolerance is CBC's integrality tolerance (CbcModel's
	// CbcIntegerTolerance, 1e-6): a value this far from an integer counts
	// as that integer. milp/cbc rounds integer columns before returning
	// them, so this is the most any backend should leave.
	cbcIntegerTolerance = 1e-6
)

// zooEncoding is model at batch on the named cluster, encoded over its
// candidate segments without a memory cap.
func zooEncoding(t *testing.T, model, clusterName string, batch int) *encode.Encoding {
	t.Helper()
	g, err := models.Load(model, models.Options{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.Load(clusterName)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(cl, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := encode.Encode(g, solve.CandidateSegments(g), m, encode.EncodeOptions{MemoryFraction: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// ChoiceFrom reads a solution whose integer columns lie a hair off their
// integers (within a solver's tolerances, either side, every column at
// once or each its own way) as the choice the exact integers make: the
// same rules, leaf layouts, methods and all-to-alls, and lengths that
// still sum to each segment's units. The exact solution is the choice's
// own columns (Encoding.StartValues, which the pinned MILP's optimum
// equals), on encodings with device groups of several sizes (paper-29's
// 7, 1, 3, 8, 1, 6, 1 and 2 GPUs), all-to-alls (bert-moe-tiny) and
// skewed lengths, whose group totals reach 0 and a whole segment.
func TestChoiceFromRoundsNearIntegers(t *testing.T) {
	cases := []struct {
		model, cluster string
		batch          int
	}{
		{"mlp-tiny", "paper-29", 8},
		{"bert-moe-tiny", "paper-8", 8},
		{"gpt2-tiny", "paper-16", 6},
	}
	// Each perturbation moves column j by delta times sign(j).
	perturbations := []struct {
		name  string
		delta float64
		sign  func(rng *rand.Rand) float64
	}{
		{"all up by cbc/primal", cbcPrimalTolerance, func(*rand.Rand) float64 { return 1 }},
		{"all down by cbc/primal", cbcPrimalTolerance, func(*rand.Rand) float64 { return -1 }},
		{"either way by CBC's default primal", cbcDefaultPrimalTolerance, randomSign},
		{"all up by CBC's integrality", cbcIntegerTolerance, func(*rand.Rand) float64 { return 1 }},
		{"all down by CBC's integrality", cbcIntegerTolerance, func(*rand.Rand) float64 { return -1 }},
		{"either way by CBC's integrality", cbcIntegerTolerance, randomSign},
	}
	rng := rand.New(rand.NewPCG(21, 22))
	for _, c := range cases {
		e := zooEncoding(t, c.model, c.cluster, c.batch)
		model, vars := e.MILP()
		checked := 0
		for trial := 0; trial < 400 && checked < 6; trial++ {
			lengths := []encodetest.Lengths{encodetest.NearEven, encodetest.Skewed}[trial%2]
			ch := encodetest.RandomChoiceWith(rng, e, lengths)
			ch.AllToAll = make([]bool, len(e.Tensors))
			for ti := range ch.AllToAll {
				ch.AllToAll[ti] = rng.IntN(2) == 0
			}
			e.SpreadInGroups(ch) // as the MILP holds lengths
			if _, err := e.Evaluate(ch); err != nil {
				continue
			}
			checked++
			name := fmt.Sprintf("%s on %s, %v lengths %v", c.model, c.cluster, lengths, ch.Lengths)
			exact := make([]float64, len(model.Cols))
			for col, v := range e.StartValues(vars, ch) {
				exact[col] = v
			}
			want := e.ChoiceFrom(vars, exact)
			if !reflect.DeepEqual(want.Rule, ch.Rule) || !reflect.DeepEqual(want.Leaf, ch.Leaf) || !reflect.DeepEqual(want.Lengths, ch.Lengths) {
				t.Fatalf("%s: from its exact columns ChoiceFrom reads rules %v, leaf layouts %v, lengths %v; want %v, %v, %v", name, want.Rule, want.Leaf, want.Lengths, ch.Rule, ch.Leaf, ch.Lengths)
			}
			for _, p := range perturbations {
				x := make([]float64, len(exact))
				for j, v := range exact {
					x[j] = v + p.delta*p.sign(rng)
				}
				got := e.ChoiceFrom(vars, x)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s, %s (%g): ChoiceFrom read\n%+v\nwant, from the exact values,\n%+v", name, p.name, p.delta, got, want)
				}
				for s, seg := range e.Segs {
					sum := 0
					for _, l := range got.Lengths[s] {
						if l < 0 {
							t.Errorf("%s, %s: segment %q has a negative length in %v", name, p.name, seg.Name, got.Lengths[s])
						}
						sum += l
					}
					if sum != seg.Units {
						t.Errorf("%s, %s: segment %q lengths %v sum to %d, want its %d units", name, p.name, seg.Name, got.Lengths[s], sum, seg.Units)
					}
				}
			}
		}
		if checked < 4 {
			t.Fatalf("%s on %s: only %d valid random choices", c.model, c.cluster, checked)
		}
	}
}

func randomSign(rng *rand.Rand) float64 {
	if rng.IntN(2) == 0 {
		return -1
	}
	return 1
}
