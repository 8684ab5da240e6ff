package plan

import (
	"slices"
	"strings"
	"testing"

	"hap/cluster"
	"hap/models"
	"hap/strategy"
)

// FuzzPlanDocument feeds mutated plan documents through everything
// `hap explain` and `hap simulate` do with a plan file: parse, resolve
// against the model and cluster it names, check, lower and simulate. Bad
// documents must come back as errors, never as a panic or a hang. The seeds
// are real plans of a tiny model, data-parallel and megatron (a mesh), one
// with a solver record of every option (SolverOptions), and one on two of
// paper-16's devices (cluster.use). A solver record that parses writes
// back the pairs it was read from, in hap's order.
func FuzzPlanDocument(f *testing.F) {
	add := func(pl *Plan) {
		b, err := pl.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{"dp-ev", "dp-cp", "megatron"} {
		_, _, pl := strategyPlan(f, "mlp-tiny", "paper-8", s)
		add(pl)
	}
	_, _, recorded := strategyPlan(f, "mlp-tiny", "paper-8", "dp-ev")
	recorded.Solver.Options, _ = everyOption()
	add(recorded)
	in, err := LoadInputs("mlp-tiny", models.Options{}, "paper-16")
	if err != nil {
		f.Fatal(err)
	}
	if in, err = in.OnDevices([]int{0, 1}); err != nil {
		f.Fatal(err)
	}
	p, err := strategy.Build("dp-cp", in.Graph, in.Cluster)
	if err != nil {
		f.Fatal(err)
	}
	pl, err := Build(in, p, "dp-cp", Solver{Status: "heuristic"})
	if err != nil {
		f.Fatal(err)
	}
	add(pl)
	f.Fuzz(func(t *testing.T, data []byte) {
		pl, err := Parse(data, "fuzz.json")
		if err != nil {
			return
		}
		if back, err := ReadSolverOptions(pl.Solver.Options.Pairs()); err != nil || !sameOptions(back, pl.Solver.Options) {
			t.Fatalf("solver options %v read back as %v, %v", pl.Solver.Options.Pairs(), back.Pairs(), err)
		}
		if !fuzzableSpec(pl.Model.Spec) || !fuzzableSpec(pl.Cluster.Spec) {
			return
		}
		in, p, err := pl.Resolve()
		if err != nil {
			return
		}
		if _, err := Simulate(in, p); err != nil {
			return
		}
		// What explain does on load: re-simulate and compare.
		if _, err := pl.Recost(in, p); err != nil {
			t.Fatalf("a program that simulated does not re-simulate: %v", err)
		}
	})
}

// fuzzableSpec keeps the fuzzer on the tiny zoo model and the built-in
// clusters: a mutated spec naming a file path would read this machine's
// files, and a full-size model would make every run slow enough to look
// like a hang without testing anything more.
func fuzzableSpec(spec string) bool {
	switch spec {
	case "mlp-tiny", "paper-8", "paper-16":
		return true
	}
	return false
}

// A plan whose device count disagrees with its cluster is refused with the
// two counts, before anything is sized by the plan's count.
func TestResolveRejectsDeviceCount(t *testing.T) {
	_, _, pl := strategyPlan(t, "mlp-tiny", "paper-8", "dp-ev")
	pl.Cluster.Devices = 1 << 30
	_, _, err := pl.Resolve()
	if err == nil || !strings.Contains(err.Error(), "1073741824 devices; it has 8") {
		t.Fatalf("Resolve: %v, want the device counts named", err)
	}
}

// FuzzParseDeviceList feeds hap plan --devices lists through the parser:
// never a panic or a huge allocation, never a negative device, and a list
// in increasing order reads back from how DeviceList writes it.
func FuzzParseDeviceList(f *testing.F) {
	for _, s := range []string{"0", "0-3,8", "0–3, 8", " 4 - 5 , 9", "3-1", "0-99999999999", "-1", ",", "1-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		use, err := ParseDeviceList(s)
		if err != nil {
			return
		}
		if len(use) > cluster.MaxDevices {
			t.Fatalf("%q: %d devices", s, len(use))
		}
		for i, d := range use {
			if d < 0 {
				t.Fatalf("%q: device %d", s, d)
			}
			if i > 0 && d <= use[i-1] {
				return // not increasing: no round trip to check
			}
		}
		back, err := ParseDeviceList(DeviceList(use))
		if err != nil || !slices.Equal(back, use) {
			t.Fatalf("%q: %v written %q read back %v, %v", s, use, DeviceList(use), back, err)
		}
	})
}
