package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"hap/encode/encodetest"
	"hap/ir"
	"hap/lower"
	"hap/models"
	"hap/spmd"
	"hap/strategy"
)

// TestCostStepsScheduleAsTrainSteps: the simulator's steps, shared among
// devices alike but for their pieces' positions (lower.CostSteps), give
// every device the instructions, costs and memory its own step gives
// (lower.TrainSteps), on every hand-written strategy (the 2-D meshes
// among them) and on random programs, even and uneven, of the tiny models
// on clusters of 8, 29 and 6 devices of two and three types; and they are
// shared, as they are or (in a mesh) regrouped, or the test would prove
// nothing.
func TestCostStepsScheduleAsTrainSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	shared, regrouped, devices := 0, 0, 0
	check := func(in *Inputs, what string, p *spmd.Program) {
		t.Helper()
		own, err := lower.TrainSteps(in.Graph, p, in.Optimizer)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		alike, err := lower.CostSteps(in.Graph, p, in.Optimizer)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		want, err := lower.Schedule(own)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got, err := lower.Schedule(alike)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for d := range want.Devices {
			if !reflect.DeepEqual(got.Devices[d], want.Devices[d]) {
				t.Errorf("%s, device %d: the shared step schedules otherwise than its own", what, d)
			}
			switch {
			case d == 0:
			case alike[d] == alike[d-1]:
				shared++
			case alike[d].Train == alike[d-1].Train:
				regrouped++ // a copy naming its own groups
			}
		}
		devices += len(alike)
	}
	for _, name := range []string{"mlp-tiny", "bert-base-tiny", "vgg19-tiny", "gpt2-tiny", "bert-moe-tiny"} {
		for _, c := range []string{"paper-8", "paper-29", "three-types"} {
			in := deviceSearchInputs(t, name, 0, c)
			byName, _ := handWritten(in)
			for _, s := range strategy.Names() {
				if p, ok := byName[s]; ok {
					check(in, name+" on "+c+", "+s, p)
				}
			}
			_, e := uncappedEncoding(t, in)
			for trial, found := 0, 0; trial < 50 && found < 2; trial++ {
				ch := encodetest.RandomChoice(rng, e)
				if found == 1 {
					for s := range ch.Lengths {
						ch.Lengths[s] = spmd.EvenLengths(e.Segs[s].Units, e.N)
					}
				}
				if p, err := e.Decode(ch); err == nil {
					check(in, name+" on "+c+", a random program", p)
					found++
				}
			}
		}
	}
	// Mesh programs whose replicas cut their samples among their ranks
	// otherwise than each other (hand-written meshes cut every replica
	// alike): a device's collectives among ranks then carry its replica's
	// pieces, which differ from those of a device elsewhere holding as many.
	for _, name := range []string{"bert-base-tiny", "gpt2-tiny"} {
		in := deviceSearchInputs(t, name, 48, "modern-24")
		byName, _ := handWritten(in)
		for trial := range 3 {
			p := redrawnRows(rng, byName["megatron"])
			if err := spmd.Check(in.Graph, p); err != nil {
				t.Fatalf("%s on modern-24, megatron with its rows redrawn: %v", name, err)
			}
			check(in, fmt.Sprintf("%s on modern-24, megatron with its rows redrawn (%d)", name, trial), p)
		}
	}
	if shared == 0 || regrouped == 0 {
		t.Fatalf("of %d devices, %d shared a step and %d a mesh program's step regrouped", devices, shared, regrouped)
	}
	t.Logf("%d of %d devices took the step of the device before, %d a copy of it naming their groups", shared, devices, regrouped)
}

// redrawnRows is mesh program p with each nested segment's lengths among
// a replica's ranks drawn at random, each replica's still summing to its
// length of the mesh segment the segment is nested in.
func redrawnRows(rng *rand.Rand, p *spmd.Program) *spmd.Program {
	q := *p
	q.Segments = slices.Clone(p.Segments)
	for i := range q.Segments {
		s := &q.Segments[i]
		if s.Within == nil {
			continue
		}
		s.Lengths = make([]int, len(s.Lengths))
		for r, total := range p.Mesh.Segments[*s.Within].Lengths {
			for range total {
				s.Lengths[r*p.Devices+rng.IntN(p.Devices)]++
			}
		}
	}
	return &q
}

// BenchmarkLowerSteps derives every device's training step of bert-base's
// dp-cp and megatron programs on paper-64 at the paper's batch (2048),
// each device's own (own) and shared among devices holding the same
// pieces as the simulator takes them (alike: 3 steps derived for dp-cp's
// 64 devices, 2 for megatron's): the plan and its baselines are lowered so
// for every set of devices searched.
func BenchmarkLowerSteps(b *testing.B) {
	in, err := LoadInputs("bert-base", models.Options{Batch: 2048}, "paper-64")
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range []string{"dp-cp", "megatron"} {
		p, err := strategy.Build(s, in.Graph, in.Cluster)
		if err != nil {
			b.Fatal(err)
		}
		for _, bc := range []struct {
			name  string
			steps func(*ir.Graph, *spmd.Program, ir.Optimizer) ([]*ir.Graph, error)
		}{{"own", lower.TrainSteps}, {"alike", lower.CostSteps}} {
			b.Run(s+"/"+bc.name, func(b *testing.B) {
				for range b.N {
					if _, err := bc.steps(in.Graph, p, in.Optimizer); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSimulateBaselines lowers and simulates bert-base's hand-written
// programs on paper-64 at the paper's batch (2048), as every set the
// device search plans on does for the baselines the encoding cannot
// price (megatron, megatron-cp, tp, zero3) and for its plan (dp-cp
// stands for a 1-D uneven one).
func BenchmarkSimulateBaselines(b *testing.B) {
	in, err := LoadInputs("bert-base", models.Options{Batch: 2048}, "paper-64")
	if err != nil {
		b.Fatal(err)
	}
	byName, _ := handWritten(in)
	for _, s := range []string{"megatron", "megatron-cp", "tp", "zero3", "dp-cp"} {
		p, ok := byName[s]
		if !ok {
			b.Fatalf("no %s program for bert-base on paper-64", s)
		}
		b.Run(s, func(b *testing.B) {
			for range b.N {
				if _, err := Simulate(in, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
