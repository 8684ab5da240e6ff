package plan

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"hap/milp"
	"hap/solve"
)

// A real plan's solver record (hap plan --model bert-base --cluster
// paper-16 --batch 512, made before the record was typed) reads into its
// typed fields and writes back byte for byte.
func TestSolverRecordRoundTripsAGoldenPlan(t *testing.T) {
	golden, err := os.ReadFile("testdata/solver.bert-base.paper-16.b512.json")
	if err != nil {
		t.Fatal(err)
	}
	var s Solver
	dec := json.NewDecoder(bytes.NewReader(golden))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatal(err)
	}
	nodes, limit := 10, time.Duration(0)
	want := SolverOptions{NodeLimit: &nodes, TimeLimit: &limit, Threads: 1, Optimizer: "adam", MemoryFraction: 0.9,
		Search:  &JointSearch{NoCuts: true, NoHeuristics: true, NoStrongBranching: true, NoPresolve: true},
		Bound:   BoundSource{By: BoundByLP},
		Ties:    Ties{OpClasses: 36, ForwardOps: 344, DeviceGroups: 2, Devices: 16},
		Devices: DevicesTypes}
	if !sameOptions(s.Options, want) {
		t.Errorf("read %+v, want %+v", s.Options.Pairs(), want.Pairs())
	}
	if !s.Options.Ties.LayersTied() || !s.Options.Ties.DevicesTied() || !s.Options.Bound.FromLP() || s.Options.Bound.OverAnyOrder() {
		t.Errorf("ties %+v, bound %+v: want both tied, a list-order transport LP bound", s.Options.Ties, s.Options.Bound)
	}
	got, err := json.MarshalIndent(&s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if got = append(got, '\n'); !bytes.Equal(got, golden) {
		t.Errorf("written back:\n%s\nwant:\n%s", got, golden)
	}
}

// sameOptions compares two records by what they hold, not by where their
// pointers point.
func sameOptions(a, b SolverOptions) bool {
	pa, pb := a.Pairs(), b.Pairs()
	if len(pa) != len(pb) {
		return false
	}
	for i := range pa {
		if pa[i] != pb[i] {
			return false
		}
	}
	return true
}

// everyOption is a record with every option set, and the pairs the
// document lists for it, in its order.
func everyOption() (SolverOptions, []Software) {
	nodes, limit := 0, 90*time.Second
	o := SolverOptions{NodeLimit: &nodes, TimeLimit: &limit, Threads: 1, Optimizer: "sgd", MemoryFraction: 0.85,
		Search:          &JointSearch{NoCuts: true, PumpPasses: 20, NoStrongBranching: true},
		Bound:           BoundSource{By: BoundByLPAnyOrder, Branched: true},
		BoundLPs:        6,
		Ties:            Ties{OpClasses: 9, ForwardOps: 9, DeviceGroups: 1, Devices: 1},
		RetriedFraction: RecordedFraction(0.712345),
		Untie:           Untie{Layers: true, Devices: true},
		Devices:         DevicesKinds,
		JointOrder:      JointOrder{Rounds: 3, Priced: 5, Ended: solve.OrderNoProposal}}
	pairs := []Software{
		{NodeLimitOption, "0"}, {TimeLimitOption, "1m30s"}, {ThreadsOption, "1"}, {OptimizerOption, "sgd"},
		{MemoryFractionOption, "0.85"}, {SearchOption, "no cuts, feasibility pump (20 passes), no strong branching"},
		{BoundOption, "transport-lp-any-order-branched"}, {BoundLPsOption, "6"},
		{TiedOption, "9 op classes for 9 forward ops, 1 device groups for 1 devices"},
		{MemoryRetryOption, "0.7123"}, {UntieOption, "layers,devices"}, {DevicesOption, "kinds"},
		{JointOrderOption, "3 rounds, 5 priced, no plan under the incumbent within the node limit"},
	}
	return o, pairs
}

// Every option writes as the list of pairs plans have, in its fixed
// order, and the list reads back into the same record; a hand-written
// strategy's plan, recording none, has no options at all.
func TestSolverOptionsRoundTrip(t *testing.T) {
	o, pairs := everyOption()
	got, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(pairs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("written\n%s\nwant\n%s", got, want)
	}
	var back SolverOptions
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if !sameOptions(back, o) || *back.NodeLimit != 0 || *back.TimeLimit != 90*time.Second || back.RetriedFraction != 0.7123 {
		t.Errorf("read back %+v, want %+v", back.Pairs(), o.Pairs())
	}
	// Read in another order, the record is the same.
	shuffled := append([]Software{pairs[len(pairs)-1]}, pairs[:len(pairs)-1]...)
	if r, err := ReadSolverOptions(shuffled); err != nil || !sameOptions(r, o) {
		t.Errorf("shuffled: %v, %+v", err, r.Pairs())
	}

	b, err := json.Marshal(Solver{Status: "heuristic"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"options"`) {
		t.Errorf("a heuristic plan's solver record %s: want no options", b)
	}
}

// A value the record cannot read, or not in the form hap writes, an
// unknown option and one recorded twice are refused, each with one error
// naming the option and the value.
func TestSolverOptionsRefuseMalformedValues(t *testing.T) {
	for _, c := range []struct {
		pairs []Software
		want  string
	}{
		{[]Software{{TiedOption, "a future wording"}}, `solver option "tied": value "a future wording": want "N op classes`},
		{[]Software{{TiedOption, "36 op classes for 58 forward ops, 3 device groups for 8 devices, and more"}}, `solver option "tied": value "36 op classes for 58 forward ops, 3 device groups for 8 devices, and more" is not in the form hap writes`},
		{[]Software{{TiedOption, "0 op classes for 58 forward ops, 3 device groups for 8 devices"}}, `solver option "tied": value "0 op classes for 58 forward ops, 3 device groups for 8 devices": a count below 1`},
		{[]Software{{NodeLimitOption, "ten"}}, `solver option "node-limit": value "ten": not a whole number`},
		{[]Software{{NodeLimitOption, "-1"}}, `solver option "node-limit": value "-1": below 0`},
		{[]Software{{NodeLimitOption, "010"}}, `solver option "node-limit": value "010" is not in the form hap writes (it reads back as "10")`},
		{[]Software{{TimeLimitOption, "10"}}, `solver option "time-limit": value "10": time: missing unit`},
		{[]Software{{TimeLimitOption, "-1s"}}, `solver option "time-limit": value "-1s": negative`},
		{[]Software{{TimeLimitOption, "60s"}}, `solver option "time-limit": value "60s" is not in the form hap writes (it reads back as "1m0s")`},
		{[]Software{{ThreadsOption, "0"}}, `solver option "threads": value "0": below 1`},
		{[]Software{{OptimizerOption, "lamb"}}, `solver option "optimizer": value "lamb": want adam or sgd`},
		{[]Software{{MemoryFractionOption, "0"}}, `solver option "memory-fraction": value "0": not a finite fraction above 0`},
		{[]Software{{MemoryFractionOption, "+Inf"}}, `solver option "memory-fraction": value "+Inf": not a finite fraction above 0`},
		{[]Software{{MemoryFractionOption, "NaN"}}, `solver option "memory-fraction": value "NaN": not a number`},
		{[]Software{{MemoryFractionOption, "0.90"}}, `solver option "memory-fraction": value "0.90" is not in the form hap writes (it reads back as "0.9")`},
		{[]Software{{MemoryRetryOption, "0.71234"}}, `solver option "memory-fraction-retried": value "0.71234" is not in the form hap writes (it reads back as "0.7123")`},
		{[]Software{{SearchOption, "cuts"}}, `solver option "joint-milp-search": value "cuts": want "[no] cuts`},
		{[]Software{{SearchOption, "cuts, heuristics, strong branching, no perturbation, no presolve"}}, `"no presolve": want no presolve, then no perturbation`},
		{[]Software{{SearchOption, "cuts, feasibility pump (0 passes), strong branching"}}, `want feasibility pump (N passes), N above 0`},
		{[]Software{{BoundOption, "transport-lp-something"}}, `solver option "bound": value "transport-lp-something": want transport-lp, transport-lp-any-order, joint-milp or work-lp`},
		{[]Software{{BoundOption, "work-lp-stopped"}}, `solver option "bound": value "work-lp-stopped": work-lp's bound is neither stopped nor branched`},
		{[]Software{{BoundOption, "transport-lp-branched-stopped"}}, `stopped or branched, not both`},
		{[]Software{{BoundLPsOption, "0"}}, `solver option "bound-lps": value "0": below 1`},
		{[]Software{{UntieOption, "heads"}}, `solver option "untie": value "heads": untie "heads"`},
		{[]Software{{UntieOption, "all"}}, `solver option "untie": value "all" is not in the form hap writes (it reads back as "layers,devices")`},
		{[]Software{{DevicesOption, "0-3"}}, `solver option "devices": value "0-3": want all, machines, types or kinds`},
		{[]Software{{JointOrderOption, "3 rounds, 5 priced, tired"}}, `solver option "joint-order-search": value "3 rounds, 5 priced, tired": ending "tired"`},
		{[]Software{{JointOrderOption, "3 rounds"}}, `solver option "joint-order-search": value "3 rounds": want "N rounds, N priced, ENDING"`},
		{[]Software{{"relgap", "0.01"}}, `unknown solver option "relgap" (value "0.01")`},
		{[]Software{{ThreadsOption, "1"}, {ThreadsOption, "2"}}, `solver option "threads" recorded twice ("1" and "2")`},
	} {
		_, err := ReadSolverOptions(c.pairs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.pairs, err, c.want)
		}
	}
}

// A malformed record in a plan document is refused by Parse, naming the
// file, the option and the value; so are an unknown field and a value of
// the wrong JSON type inside the list, as everywhere else in the document.
func TestParseRefusesAMalformedSolverRecord(t *testing.T) {
	_, _, pl := strategyPlan(t, "mlp-tiny", "paper-8", "dp-ev")
	pl.Solver.Options, _ = everyOption()
	doc, err := pl.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(doc, "plan.json")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := back.Encode(); err != nil || !bytes.Equal(again, doc) {
		t.Errorf("read and written again: %v; bytes equal %v", err, bytes.Equal(again, doc))
	}
	for _, c := range []struct{ from, to, want string }{
		{`"version": "1m30s"`, `"version": "soon"`, `plan.json: not a plan document (hap plan -o writes one): solver option "time-limit": value "soon": time: invalid duration`},
		{`"name": "threads"`, `"name": "cores"`, `unknown solver option "cores" (value "1")`},
		{`"name": "threads",`, `"name": "threads", "why": "CBC",`, `solver options: json: unknown field "why"`},
		{`"version": "1m30s"`, `"version": 90`, `solver options: got JSON number for `},
	} {
		bad := strings.Replace(string(doc), c.from, c.to, 1)
		if bad == string(doc) {
			t.Fatalf("%q is not in the document", c.from)
		}
		if _, err := Parse([]byte(bad), "plan.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: %v, want an error with %q", c.from, c.to, err, c.want)
		}
	}
}

// JointSearch writes the joint MILP's search settings in milp's own words
// and reads them back, for every setting Synthesize can record.
func TestJointSearchRoundTrip(t *testing.T) {
	for bits := range 1 << 5 {
		for _, pump := range []int{0, 20} {
			o := milp.Options{NoCuts: bits&1 != 0, NoHeuristics: bits&2 != 0, NoStrongBranching: bits&4 != 0,
				NoPresolve: bits&8 != 0, NoPerturbation: bits&16 != 0, PumpPasses: pump}
			s := JointSearchOf(&o)
			if got := s.String(); got != o.Search() {
				t.Errorf("%+v: written %q, milp says %q", o, got, o.Search())
			}
			back, err := parseJointSearch(s.String())
			if err != nil || back != s {
				t.Errorf("%q: read back %+v, %v; want %+v", s, back, err, s)
			}
		}
	}
}

// Ties say which of the joint MILP's ties shrink its space.
func TestTies(t *testing.T) {
	for _, tc := range []struct {
		ties            Ties
		layers, devices bool
	}{
		{Ties{36, 64, 2, 8}, true, true},
		{Ties{9, 9, 2, 8}, false, true},
		{Ties{36, 64, 8, 8}, true, false},
		{Ties{9, 9, 1, 1}, false, false},
		{Ties{}, false, false}, // none recorded
	} {
		if tc.ties.LayersTied() != tc.layers || tc.ties.DevicesTied() != tc.devices || tc.ties.Shrink() != (tc.layers || tc.devices) {
			t.Errorf("%+v: layers %v, devices %v, shrink %v", tc.ties, tc.ties.LayersTied(), tc.ties.DevicesTied(), tc.ties.Shrink())
		}
	}
}

// The bound's source reads its relaxation and the transport LP's ending.
func TestBoundSource(t *testing.T) {
	for _, tc := range []struct {
		written                                     string
		fromLP, stopped, branched, anyOrder, byWork bool
	}{
		{"joint-milp", false, false, false, false, false},
		{"transport-lp", true, false, false, false, false},
		{"transport-lp-stopped", true, true, false, false, false},
		{"transport-lp-branched", true, false, true, false, false},
		{"transport-lp-any-order", true, false, false, true, false},
		{"transport-lp-any-order-stopped", true, true, false, true, false},
		{"work-lp", false, false, false, true, true},
	} {
		b, err := parseBoundSource(tc.written)
		if err != nil {
			t.Fatalf("%q: %v", tc.written, err)
		}
		if b.String() != tc.written || b.FromLP() != tc.fromLP || b.FromStoppedLP() != tc.stopped || b.FromBranchedLP() != tc.branched ||
			b.OverAnyOrder() != tc.anyOrder || b.FromWork() != tc.byWork {
			t.Errorf("%q: read %+v (%q): from LP %v, stopped %v, branched %v, any order %v, work %v", tc.written, b, b, b.FromLP(), b.FromStoppedLP(), b.FromBranchedLP(), b.OverAnyOrder(), b.FromWork())
		}
	}
}
