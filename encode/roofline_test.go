package encode

import (
	"testing"

	"hap/ir"
)

// TestMergedDim: a reshape that merges a cut dim with its neighbours (a
// weight gradient's x flattened from [batch, tokens, d] to
// [batch·tokens, d]) keeps it in the merged dim; one that splits it, or
// cuts across it, has none.
func TestMergedDim(t *testing.T) {
	for _, c := range []struct {
		from, to ir.Shape
		d, want  int
		ok       bool
	}{
		{ir.Shape{8, 65, 768}, ir.Shape{520, 768}, 0, 0, true},
		{ir.Shape{8, 65, 768}, ir.Shape{520, 768}, 1, 0, true},
		{ir.Shape{8, 65, 768}, ir.Shape{520, 768}, 2, 1, true},
		{ir.Shape{8, 65, 768}, ir.Shape{8, 65, 768}, 1, 1, true},
		{ir.Shape{8, 12, 64}, ir.Shape{8, 768}, 1, 1, true},
		{ir.Shape{8, 1, 12, 64}, ir.Shape{8, 768}, 2, 1, true},
		{ir.Shape{8, 768}, ir.Shape{8, 12, 64}, 1, 0, false}, // split
		{ir.Shape{6, 10}, ir.Shape{4, 15}, 0, 0, false},      // across
		{ir.Shape{6, 10}, ir.Shape{4, 15}, 1, 0, false},
	} {
		got, ok := mergedDim(c.from, c.to, c.d)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("mergedDim(%v, %v, %d) = %d, %v; want %d, %v", c.from, c.to, c.d, got, ok, c.want, c.ok)
		}
	}
}

// TestSplitBytes: a kernel's bytes split into what its share scales and
// what it moves whatever the share, from its own work function: an
// embedding's gradient writes its whole table twice however few ids a
// device holds; attention cut by batch moves nothing whole; attention
// with queries and keys both cut along the sequence does FLOPs in the
// product of their shares, not a line, and is left to Time's share.
func TestSplitBytes(t *testing.T) {
	b := ir.NewBuilder("split", ir.Float32)
	table := b.Param("table", 10, 4)
	ids := b.Label("ids", 2, 6)
	emb := b.Embedding(ids, table)
	q := b.Param("q", 2, 3, 6, 4)
	k := b.Param("k", 2, 3, 6, 4)
	att := b.Attention(q, k, b.Param("v", 2, 3, 6, 4), false)
	g, err := b.Finish(b.Add(b.ReduceSum(emb, 0, 1, 2), b.ReduceSum(att, 0, 1, 2, 3)))
	if err != nil {
		t.Fatal(err)
	}
	step, err := ir.BuildTrainStep(g, ir.SGD(0.1))
	if err != nil {
		t.Fatal(err)
	}
	var grad, attention ir.OpID = ir.NoOp, ir.NoOp
	for i := range step.Ops {
		switch step.Ops[i].Kind {
		case ir.OpEmbeddingGrad:
			grad = ir.OpID(i)
		case ir.OpAttention:
			attention = ir.OpID(i)
		}
	}
	if grad == ir.NoOp || attention == ir.NoOp {
		t.Fatal("no embedding gradient or attention in the step")
	}
	work := func(id ir.OpID) ir.Work { w, _ := step.Work(id); return w }
	op := &step.Ops[grad]
	w := work(grad)
	b0, b1, ok := splitBytes(step, grad, map[ir.TensorID]int{op.Inputs[0]: 0, op.Inputs[1]: 0}, w)
	if tableBytes := float64(10 * 4 * 4); !ok || b0 != 2*tableBytes || b0+b1 != w.Bytes {
		t.Errorf("embedding gradient cut by batch: B0 %g, B1 %g, %v; want B0 %g (the table, twice) of %g", b0, b1, ok, 2*tableBytes, w.Bytes)
	}
	op = &step.Ops[attention]
	batch := map[ir.TensorID]int{op.Outputs[0]: 0}
	for _, in := range op.Inputs {
		batch[in] = 0
	}
	if b0, b1, ok := splitBytes(step, attention, batch, work(attention)); !ok || b0 != 0 || b1 != work(attention).Bytes {
		t.Errorf("attention cut by batch: B0 %g, B1 %g, %v; want 0, %g", b0, b1, ok, work(attention).Bytes)
	}
	seq := map[ir.TensorID]int{op.Inputs[0]: 2, op.Inputs[1]: 2, op.Outputs[0]: 2}
	if _, _, ok := splitBytes(step, attention, seq, work(attention)); ok {
		t.Error("attention with queries and keys cut along the sequence: split as a line")
	}
}

// TestPruneRooflinesLeavesOutTheLeastWithinItsBudget: the extras that
// can add least to a step (ops × their most on any device) go first,
// while their sum stays within RooflineBudget of the least compute any
// plan's busiest device does; a kernel with no rule left goes too.
func TestPruneRooflinesLeavesOutTheLeastWithinItsBudget(t *testing.T) {
	// Two devices; the floor is (min(1, 2) + min(1.5, 1)) / 2 = 1 s of
	// compute, so the budget is RooflineBudget seconds.
	b := RooflineBudget
	kernel := func(betas ...float64) rooflineKernel {
		k := rooflineKernel{alpha: []float64{0, 0}}
		for _, beta := range betas {
			if beta < 0 {
				k.beta, k.gamma, k.empty = append(k.beta, nil), append(k.gamma, nil), append(k.empty, nil)
				continue
			}
			k.beta = append(k.beta, []float64{beta, beta / 2})
			k.gamma = append(k.gamma, []float64{-beta, -beta})
			k.empty = append(k.empty, []float64{0, 0})
		}
		return k
	}
	e := &Encoding{N: 2, Classes: []OpClass{
		// Two ops: each extra counts twice.
		{Ops: []ir.OpID{0, 1}, Time: []float64{1, 2}, Roof: []rooflineKernel{kernel(0.1*b, -1, 0.3*b), kernel(5 * b)}},
		{Ops: []ir.OpID{2}, Time: []float64{1.5, 1}, Roof: []rooflineKernel{kernel(0.35 * b)}},
	}}
	e.Classes[1].Roof[0].empty[0] = []float64{0, 0.45 * b} // its empty shard writes more than β
	e.pruneRooflines()
	// Smallest first: 0.2b (class 0, rule 0), 0.45b (class 1), 0.6b
	// (class 0, rule 2) would pass the budget: kept, as is 10b.
	c0, c1 := &e.Classes[0], &e.Classes[1]
	if len(c0.Roof) != 2 || c0.Roof[0].beta[0] != nil || c0.Roof[0].beta[2] == nil || c0.Roof[1].beta[0] == nil {
		t.Errorf("class 0's kernels after pruning: %+v", c0.Roof)
	}
	if len(c1.Roof) != 0 {
		t.Errorf("class 1's only extra is within the budget, yet its kernel stays: %+v", c1.Roof)
	}
}
