package plan

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"hap/encode"
	"hap/ir"
	"hap/lower"
	"hap/models"
	"hap/strategy"
)

// TestCostStepsScheduleAsTrainSteps: the simulator's steps, shared among
// devices alike but for their pieces' positions (lower.CostSteps), give
// every device the instructions, costs and memory its own step gives
// (lower.TrainSteps), on every hand-written strategy (the 2-D meshes
// among them) and on random programs, even and uneven, of the tiny models
// on clusters of 8, 29 and 6 devices of two and three types; and they are shared, or the
// test would prove nothing.
func TestCostStepsScheduleAsTrainSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	shared, devices := 0, 0
	check := func(in *Inputs, what string, p *encode.Program) {
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
			if d > 0 && alike[d] == alike[d-1] {
				shared++
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
				ch := randomChoice(rng, e)
				if found == 1 {
					for s := range ch.Lengths {
						ch.Lengths[s] = encode.EvenLengths(e.Segs[s].Units, e.N)
					}
				}
				if p, err := e.Decode(ch); err == nil {
					check(in, name+" on "+c+", a random program", p)
					found++
				}
			}
		}
	}
	if shared == 0 {
		t.Fatalf("no device shared a step in %d", devices)
	}
	t.Logf("%d of %d devices took a step shared with the device before", shared, devices)
}

// BenchmarkLowerSteps derives every device's training step of bert-base's
// dp-cp program on paper-64 at the paper's batch (2048), each device's own
// (own) and shared among alike devices as the simulator takes them (alike,
// 3 steps for 64 devices): the plan and its baselines are lowered so
// after every search.
func BenchmarkLowerSteps(b *testing.B) {
	in, err := LoadInputs("bert-base", models.Options{Batch: 2048}, "paper-64")
	if err != nil {
		b.Fatal(err)
	}
	p, err := strategy.Build("dp-cp", in.Graph, in.Cluster)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		steps func(*ir.Graph, *encode.Program, ir.Optimizer) ([]*ir.Graph, error)
	}{{"own", lower.TrainSteps}, {"alike", lower.CostSteps}} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				if _, err := bc.steps(in.Graph, p, in.Optimizer); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
