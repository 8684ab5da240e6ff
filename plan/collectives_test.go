package plan

import (
	"strings"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/ir"
	"hap/models"
	"hap/spmd"
	"hap/strategy"
)

// collectives is the indices of p's collectives.
func collectives(p *spmd.Program) []int {
	var out []int
	for i, in := range p.Instrs {
		if in.Kind == spmd.Comm && ir.IsCollective(in.Collective) {
			out = append(out, i)
		}
	}
	return out
}

// EstimateCollective prices an all-gather as the cost model prices one
// call of it over the group, each rank's piece its share of the tensor:
// even pieces (a batch of 16 on eight V100s) on the even ring, with
// grouping the rejected method; uneven ones (a batch of 4: four ranks
// hold a sample, four none) padded, as the plan says, with grouping the
// alternative. An all-to-all's alternative is the all-gather and slice;
// an instruction that is not a collective costs nothing.
func TestEstimateCollective(t *testing.T) {
	for _, c := range []struct {
		batch         int
		pieces        []float64 // samples per rank
		method, other cost.Method
	}{
		{16, []float64{2, 2, 2, 2, 2, 2, 2, 2}, cost.MethodEven, cost.MethodGrouped},
		{4, []float64{1, 1, 1, 1, 0, 0, 0, 0}, cost.MethodPadded, cost.MethodGrouped},
	} {
		in, err := LoadInputs("bert-base-tiny", models.Options{Batch: c.batch}, "v100-8")
		if err != nil {
			t.Fatal(err)
		}
		p, err := strategy.Build("tp", in.Graph, in.Cluster)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cost.New(in.Cluster, cost.Options{})
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, i := range collectives(p) {
			ins := &p.Instrs[i]
			if ins.Collective != ir.OpAllGather || ins.From.Dim != 0 {
				continue // the batch's all-gathers
			}
			est, err := EstimateCollective(m, in.Graph, p, i)
			if err != nil {
				t.Fatal(err)
			}
			tn := &in.Graph.Tensors[ins.Tensor]
			sample := float64(tn.Shape.Numel()*tn.DType.Size()) / float64(c.batch)
			call := cost.Call{Kind: cost.AllGather, Group: []int{0, 1, 2, 3, 4, 5, 6, 7}, Method: c.method}
			for _, n := range c.pieces {
				call.Bytes = append(call.Bytes, n*sample)
			}
			want, err := m.CollectiveTime(call)
			if err != nil {
				t.Fatal(err)
			}
			call.Method = c.other
			alt, err := m.CollectiveTime(call)
			if err != nil {
				t.Fatal(err)
			}
			// The latency: the same call with a byte in each nonempty piece.
			call.Method = c.method
			for r, n := range c.pieces {
				call.Bytes[r] = min(n, 1)
			}
			lat, err := m.CollectiveTime(call)
			if err != nil {
				t.Fatal(err)
			}
			if lat <= 0 || lat >= want {
				t.Errorf("batch %d: latency %g s of %g s; want a positive part of it", c.batch, lat, want)
			}
			if est != (CollectiveEstimate{Seconds: want, Alternative: string(c.other), AltSeconds: alt, Latency: lat}) {
				t.Errorf("batch %d: all-gather of %s: %+v, want %s %g s and %s %g s", c.batch, tn.Name, est, c.method, want, c.other, alt)
			}
			checked++
		}
		if checked == 0 {
			t.Fatalf("batch %d: tp on v100-8 has no all-gather of the batch to check", c.batch)
		}
		for i, ins := range p.Instrs {
			if ins.Kind != spmd.Compute {
				continue
			}
			if est, err := EstimateCollective(m, in.Graph, p, i); err != nil || est != (CollectiveEstimate{}) {
				t.Errorf("batch %d: compute instruction %d: %+v, %v; want nothing", c.batch, i, est, err)
			}
			break
		}
	}

	in, p, _ := strategyPlan(t, "bert-moe-tiny", "paper-8", "ep")
	m, err := cost.New(in.Cluster, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range collectives(p) {
		est, err := EstimateCollective(m, in.Graph, p, i)
		if err != nil {
			t.Fatal(err)
		}
		if p.Instrs[i].Collective != ir.OpAllToAll || est.Alternative != "all-gather+slice" || !(est.Seconds > 0 && est.AltSeconds > 0) {
			t.Errorf("instruction %d (%s): %+v, want an all-to-all with the all-gather its alternative", i, p.Instrs[i].Collective, est)
		}
	}
}

// A collective the cost model refuses (here over devices the model's
// cluster lacks) is an error naming the collective, the tensor and the
// group, not a collective that costs nothing.
func TestEstimateCollectiveRefusal(t *testing.T) {
	in, p, _ := strategyPlan(t, "bert-base-tiny", "paper-8", "tp")
	small, err := cluster.Load("testdata/duo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(small, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	i := collectives(p)[0]
	_, err = EstimateCollective(m, in.Graph, p, i)
	name := in.Graph.Tensors[p.Instrs[i].Tensor].Name
	if err == nil || !strings.Contains(err.Error(), "of tensor "+name) || !strings.Contains(err.Error(), "over devices [0 1 2 3 4 5 6 7]") || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("priced on a two-device model: %v, want the tensor, the group and the cost model's reason", err)
	}
}
