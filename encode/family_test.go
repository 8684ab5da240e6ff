package encode_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/encode"
	"hap/encode/encodetest"
	"hap/ir"
	"hap/milp"
	"hap/models"
	"hap/solve"
)

// TestMILPFamiliesAreOrdered checks the declared build: every family
// needs only families listed before it, and none is listed twice.
func TestMILPFamiliesAreOrdered(t *testing.T) {
	if err := encode.CheckFamilies(); err != nil {
		t.Fatal(err)
	}
}

// familyCase is an encoding on which some families add columns or rows.
type familyCase struct {
	name    string
	graph   func() (*ir.Graph, error)
	cluster string
	// transport pins the transport MILP rather than MILPBelow's.
	transport bool
	// memory puts every device's capacity just above, then just below,
	// the peak Evaluate gives each choice: the pinned MILP must take the
	// first and refuse the second (its memory rows state the peak).
	memory bool
}

func zoo(name string, batch int) func() (*ir.Graph, error) {
	return func() (*ir.Graph, error) { return models.Load(name, models.Options{Batch: batch}) }
}

// oneLayerBERT is BERT-Base's layer once, at a short sequence: wide enough
// that a gradient's sum tree is priced (the tiny models' adds are below
// sumNegligible), small enough to pin in a second.
func oneLayerBERT() (*ir.Graph, error) {
	cfg, err := models.Lookup("bert-base")
	if err != nil {
		return nil, err
	}
	cfg.Layers, cfg.Batch, cfg.Seq, cfg.Vocab = 1, 8, 32, 1000
	return models.Build(cfg)
}

// TestEveryMILPFamilyPricesAsEvaluate is the test of each row family: on
// a case where the family adds columns or rows (checked, so that none
// goes untested when a model changes), the MILP pinned to random choices
// prices each as Evaluate does — near-even and skewed lengths, all-to-alls
// drawn at random — or, for the memory family, fits exactly the
// capacities Evaluate's peak fits. A family that mispriced its term would
// move the pinned objective off Evaluate's on the case that exercises it.
func TestEveryMILPFamilyPricesAsEvaluate(t *testing.T) {
	grouped := familyCase{name: "mlp-tiny on paper-29", graph: zoo("mlp-tiny", 8), cluster: "paper-29"}
	moe := familyCase{name: "bert-moe-tiny on paper-8", graph: zoo("bert-moe-tiny", 8), cluster: "paper-8"}
	tied := familyCase{name: "gpt2-tiny on paper-16", graph: zoo("gpt2-tiny", 6), cluster: "paper-16"}
	sums := familyCase{name: "one BERT-Base layer on three L4s", graph: oneLayerBERT, cluster: "../plan/testdata/three-l4.yaml"}
	transport := familyCase{name: "bert-base-tiny on paper-29, transport", graph: zoo("bert-base-tiny", 3), cluster: "paper-29", transport: true}
	memory := familyCase{name: "bert-base-tiny on paper-29, memory", graph: zoo("bert-base-tiny", 3), cluster: "paper-29", memory: true}
	caseOf := map[string]familyCase{
		"lengths": grouped, "rules": grouped, "leaf layouts": grouped, "compute": grouped, "tensors": grouped,
		"conservation": grouped, "objective": grouped, "spread": tied, "timeline": grouped, "memory": memory,
		"tensor memory": memory, "needs": grouped, "all-to-all pairs": moe, "closure": grouped, "integer": grouped,
		"identity not reduce": grouped, "conversions": grouped, "all-to-all conversions": moe, "pads": grouped,
		"sum tree": sums, "transport": transport, "covers": grouped,
	}
	for _, name := range encode.FamilyNames() {
		t.Run(name, func(t *testing.T) {
			c, ok := caseOf[name]
			if !ok {
				t.Fatalf("family %q has no case: add one where it adds columns or rows", name)
			}
			checkFamilyCase(t, name, c)
		})
	}
}

func checkFamilyCase(t *testing.T, family string, c familyCase) {
	g, err := c.graph()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.Load(c.cluster)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cost.New(cl, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fraction := 1e6 // memory out of play, but where it is the point
	if c.memory {
		fraction = 1
	}
	e, err := encode.Encode(g, solve.CandidateSegments(g), cm, encode.EncodeOptions{MemoryFraction: fraction})
	if err != nil {
		t.Fatal(err)
	}
	model := func() (*milp.Model, *encode.MILPVars) {
		if c.transport {
			return e.TransportMILP(0, encode.BoundOptions{Memory: true})
		}
		return e.MILP()
	}
	rng := rand.New(rand.NewPCG(66, 5))
	checked := 0
	for trial := 0; trial < 200 && checked < 3; trial++ {
		lengths := []encodetest.Lengths{encodetest.NearEven, encodetest.Skewed}[trial%2]
		ch := encodetest.RandomChoiceWith(rng, e, lengths)
		a2a := trial%4 >= 2
		if a2a {
			ch.AllToAll = make([]bool, len(e.Tensors))
			for ti := range ch.AllToAll {
				ch.AllToAll[ti] = rng.IntN(2) == 0
			}
		}
		e.SpreadInGroups(ch)
		br, err := e.Evaluate(ch)
		if err != nil {
			continue
		}
		checked++
		if c.memory {
			peak := slices.Max(br.Memory)
			for _, over := range []bool{true, false} {
				capacity := peak * (1 - encodetest.PinnedMemoryMargin)
				if over {
					capacity = peak * (1 + encodetest.PinnedMemoryMargin)
				}
				for d := range e.Capacity {
					e.Capacity[d] = capacity
				}
				checkFamilyAdds(t, family, e, c)
				m, v := model()
				res, _ := encodetest.SolvePinnedModel(t, e, m, v, ch)
				if fits := res.Status == milp.Optimal; fits != over {
					t.Errorf("%s, %v lengths %v: capacity %.6g B against Evaluate's peak %.6g B: the pinned MILP ended %s", c.name, lengths, ch.Lengths, capacity, peak, res.Status)
				}
			}
			continue
		}
		if checked == 1 {
			checkFamilyAdds(t, family, e, c)
		}
		m, v := model()
		res, got := encodetest.SolvePinnedModel(t, e, m, v, ch)
		if res.Status != milp.Optimal {
			t.Fatalf("%s, %v lengths %v: the pinned MILP ended %s", c.name, lengths, ch.Lengths, res.Status)
		}
		lo, hi := br.Seconds*(1-encodetest.PinnedTolerance), br.Seconds*(1+encodetest.PinnedTolerance)
		if a2a {
			hi = br.Seconds * (1 + encodetest.AllToAllGroupOver)
		}
		if got < lo || got > hi {
			t.Errorf("%s, %v lengths %v, all-to-all %v: MILP %.7g s, Evaluate %.7g s (%+.4f%%)", c.name, lengths, ch.Lengths, a2a, got, br.Seconds, 100*(got/br.Seconds-1))
		}
	}
	if checked < 2 {
		t.Fatalf("%s: only %d valid random choices", c.name, checked)
	}
}

// checkFamilyAdds fails unless family adds columns or rows to c's model.
func checkFamilyAdds(t *testing.T, family string, e *encode.Encoding, c familyCase) {
	t.Helper()
	rows, cols := e.FamilyRows(c.transport)
	if rows[family] == 0 && cols[family] == 0 {
		t.Fatalf("%s: family %q adds no column or row: the case does not exercise it", c.name, family)
	}
}
