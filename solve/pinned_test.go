package solve

import (
	"context"
	"testing"

	"hap/ir"
	"hap/milp"
)

// lengthsFor prices a group of devices at its even share, but a group's
// first device holds the odd unit. Where memory binds, the solve's best
// lengths then put that device over its memory by a fraction of a sample:
// here 5001 samples of 16 MB on two RTX 4090s (24 GB) and two A100-80GBs,
// where every solve without exact ceilings ended 10 MB over a 4090's 23.19
// GB and dp-ev's even split stood. The lengths it returns must fit, and
// beat the even split.
func TestLengthsForFitsAGroupsFirstDevice(t *testing.T) {
	const batch = 5001
	b := ir.NewBuilder("tall", ir.Float32)
	x := b.Input("x", ir.Float32, batch, 1024, 4096)
	g, err := b.Finish(b.CrossEntropy(b.ReduceSum(b.GELU(b.MatMul(x, b.Param("w", 4096, 64))), 1), b.Label("y", batch)))
	if err != nil {
		t.Fatal(err)
	}
	e, c := encodeOn(t, g, "name: mix\nnodes:\n  - {name: a, device: RTX-4090, count: 2, intra: {class: pcie, bandwidth: 12GB/s}}\n  - {name: b, device: A100-80GB, count: 2, intra: {class: nvlink, bandwidth: 300GB/s}}\ninter: {class: ethernet, bandwidth: 25Gb/s}\n")
	_, dp := strategyChoice(t, g, c, e, "dp-ev")
	even, err := e.Evaluate(dp)
	if err != nil {
		t.Fatalf("dp-ev: %v; the test needs a start that fits", err)
	}
	model, vars := e.MILPBelow(0)
	sized, sec, err := lengthsFor(context.Background(), e, model, vars, dp, milp.Options{NodeLimit: 10, NoCuts: true, NoHeuristics: true}, false)
	if err != nil {
		t.Fatalf("lengthsFor: %v", err)
	}
	if _, err := e.Evaluate(sized); err != nil || sec >= even.Seconds {
		t.Errorf("lengths %v: %v, %.4g s against the even split's %.4g s", sized.Lengths[0], err, sec, even.Seconds)
	}
}
