package lower

import (
	"fmt"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/ir"
	"hap/models"
	"hap/strategy"
)

// Megatron on paper-16 lowers to per-device programs whose collectives run
// over sub-groups: a machine's two GPUs, or one GPU of each of the 8
// machines; every parameter's gradient is all-reduced across replicas, and
// sibling collectives (one per rank) record that they share the network.
func TestMeshLowering(t *testing.T) {
	g, err := models.Load("bert-base-tiny", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Load("paper-16")
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build("megatron", g, c)
	if err != nil {
		t.Fatal(err)
	}
	steps := make([]*ir.Graph, p.NumDevices())
	for d := range steps {
		loc, err := BuildLocal(g, p, d)
		if err != nil {
			t.Fatal(err)
		}
		if steps[d], err = ir.BuildTrainStep(loc.Graph, ir.SGD(0.1)); err != nil {
			t.Fatal(err)
		}
	}
	machine := func(d int) []int { return []int{d &^ 1, d | 1} }
	rank := func(d int) []int {
		var g []int
		for m := 0; m < 8; m++ {
			g = append(g, 2*m+d%2)
		}
		return g
	}
	for d, step := range steps {
		replicated := 0
		for _, op := range step.Ops {
			if op.Kind == ir.OpReplicate && fmt.Sprint(op.Attrs.Group) == fmt.Sprint(rank(d)) {
				replicated++
			}
			if !ir.IsCollective(op.Kind) && op.Kind != ir.OpReplicate {
				continue
			}
			if s := fmt.Sprint(op.Attrs.Group); s != fmt.Sprint(machine(d)) && s != fmt.Sprint(rank(d)) {
				t.Fatalf("device %d: %s %q over %s, neither its machine %v nor its rank's devices %v", d, op.Kind, op.Name, s, machine(d), rank(d))
			}
		}
		if params := len(g.TensorsOfKind(ir.Param)); replicated != params {
			t.Errorf("device %d: %d parameters pass through a replicate across replicas, want all %d", d, replicated, params)
		}
	}
	prog, err := Schedule(steps)
	if err != nil {
		t.Fatal(err)
	}
	across, within := 0, 0
	for _, in := range prog.Devices[3].Instrs {
		c := in.Comm
		if c == nil {
			continue
		}
		switch len(c.Group) {
		case 8:
			across++
			if c.Sharing != 2 || c.Kind != cost.AllReduce && c.Kind != cost.AllGather && c.Kind != cost.ReduceScatter {
				t.Errorf("%q across replicas: %s sharing %d, want 2 (one sibling per rank)", in.Name, c.Kind, c.Sharing)
			}
		case 2:
			within++
			if c.Sharing != 8 {
				t.Errorf("%q within a machine: sharing %d, want 8 (one sibling per machine)", in.Name, c.Sharing)
			}
		default:
			t.Errorf("%q over %v", in.Name, c.Group)
		}
	}
	if across == 0 || within == 0 {
		t.Errorf("device 3 has %d collectives across replicas and %d within its machine, want both", across, within)
	}
}
