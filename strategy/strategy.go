// Package strategy holds hap's hand-written parallelisation strategies — the
// baselines the synthesizer is measured against — each producing a
// distributed program (spmd.Program) in the same form the synthesizer
// does, so every plan is checked, lowered, simulated and verified alike.
//
//	dp-ev     data parallel, batch split evenly
//	dp-cp     data parallel, batch split in proportion to device FP32 throughput
//	tp        tensor parallel over every device (Megatron's column/row split of
//	          attention heads and FFN), activations replicated between blocks
//	megatron  tensor parallel within a machine, data parallel across machines
//	          (a 2-D mesh program; see megatron), batch split evenly
//	megatron-cp  megatron with the batch split across replicas in proportion
//	          to their FP32 throughput
//	ep        expert parallel MoE layers (experts split evenly, tokens moved
//	          there and back by all-to-all), data parallel elsewhere
//	zero3     ZeRO stage 3: data parallel (even split) with every parameter,
//	          its gradient and optimizer state sharded over all devices and
//	          all-gathered before use
//
// A strategy fixes segments, the layouts of inputs and parameters, and which
// rules are allowed; spmd.Assemble completes the program greedily.
// What tp, megatron and ep shard is found by structure, whatever the
// names (find.go): attention's projections by how they feed the attention
// op, feed-forward pairs by their matmul-elementwise-matmul shape, experts
// by what top2_gate's dispatch reaches. Where they find nothing to shard
// they refuse with what they looked for, never running another strategy
// in their place.
//
// strategy imports ir, spmd and cluster; never encode or milp.
package strategy

import (
	"fmt"
	"strings"

	"hap/cluster"
	"hap/ir"
	"hap/spmd"
)

// Names lists the strategies.
func Names() []string {
	return []string{"dp-cp", "dp-ev", "ep", "megatron", "megatron-cp", "tp", "zero3"}
}

// Build makes the named strategy's program for forward graph g on c.
func Build(name string, g *ir.Graph, c *cluster.Cluster) (*spmd.Program, error) {
	n := c.NumDevices()
	if n < 1 {
		return nil, fmt.Errorf("cluster %s has no devices", c.Name)
	}
	switch name {
	case "dp-ev":
		return dataParallel(g, n, evenShares(n), nil)
	case "dp-cp":
		return dataParallel(g, n, throughputShares(c), nil)
	case "tp":
		return tensorParallel(g, n)
	case "megatron":
		return megatron(g, c, false)
	case "megatron-cp":
		return megatron(g, c, true)
	case "ep":
		return expertParallel(g, n)
	case "zero3":
		return zero3(g, n)
	}
	return nil, fmt.Errorf("unknown strategy %q (want one of %s)", name, strings.Join(Names(), ", "))
}

func evenShares(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

// throughputShares is each device's FP32 peak, the paper's DP-CP split.
func throughputShares(c *cluster.Cluster) []float64 {
	var s []float64
	for _, d := range c.Devices() {
		s = append(s, d.Spec.FP32)
	}
	return s
}

// batchSize is dim 0 of the first fed input: the global batch.
func batchSize(g *ir.Graph) (int, error) {
	for _, t := range g.TensorsOfKind(ir.Input) {
		if len(g.Tensors[t].Shape) > 0 {
			return g.Tensors[t].Shape[0], nil
		}
	}
	return 0, fmt.Errorf("graph %s has no input with a batch dimension", g.Name)
}

// batchLeaves lays inputs and labels out along the batch segment (seg 0)
// where they fit, and everything else as Identity except what params
// assigns.
func batchLeaves(g *ir.Graph, segs []spmd.Segment, params map[ir.TensorID]spmd.Layout) []spmd.LeafLayout {
	var leaves []spmd.LeafLayout
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if !t.Kind.IsLeaf() {
			continue
		}
		l := spmd.I
		if (t.Kind == ir.Input || t.Kind == ir.Label) && len(t.Shape) > 0 && spmd.Fits(spmd.G(0, 0), t.Shape, segs) {
			l = spmd.G(0, 0)
		}
		if pl, ok := params[t.ID]; ok {
			l = pl
		}
		leaves = append(leaves, spmd.LeafLayout{Tensor: t.ID, Layout: l})
	}
	return leaves
}

// keepParams allows only rules that read every parameter in its own
// layout: parameters never move, activations do.
func keepParams(g *ir.Graph, leaves []spmd.LeafLayout) func(op *ir.Op, r spmd.Rule) bool {
	own := map[ir.TensorID]spmd.Layout{}
	for _, lf := range leaves {
		if g.Tensors[lf.Tensor].Kind == ir.Param {
			own[lf.Tensor] = lf.Layout
		}
	}
	return func(op *ir.Op, r spmd.Rule) bool {
		for j, t := range op.Inputs {
			if l, ok := own[t]; ok && r.In[j] != l {
				return false
			}
		}
		return true
	}
}

func padded(ir.TensorID, spmd.Layout, spmd.Layout) string { return spmd.MethodPadded }

// flopsPerByte weighs compute against communication in the greedy
// completion (see spmd.Greedy).
const flopsPerByte = 1000

func assemble(g *ir.Graph, n int, segs []spmd.Segment, params map[ir.TensorID]spmd.Layout) (*spmd.Program, error) {
	leaves := batchLeaves(g, segs, params)
	return complete(g, n, segs, leaves, keepParams(g, leaves))
}

// complete finishes a program greedily from its leaves' layouts, choosing
// only rules allow accepts, and checks it.
func complete(g *ir.Graph, n int, segs []spmd.Segment, leaves []spmd.LeafLayout, allow func(op *ir.Op, r spmd.Rule) bool) (*spmd.Program, error) {
	ch := spmd.Greedy{Devices: n, FLOPsPerByte: flopsPerByte, Allow: allow}
	p, err := spmd.Assemble(g, n, segs, leaves, ch, padded)
	if err != nil {
		return nil, err
	}
	return p, spmd.Check(g, p)
}

// both accepts a rule both filters accept.
func both(a, b func(op *ir.Op, r spmd.Rule) bool) func(op *ir.Op, r spmd.Rule) bool {
	return func(op *ir.Op, r spmd.Rule) bool { return a(op, r) && b(op, r) }
}

// noPartials rejects rules that leave partial sums, except the loss's own
// (a sum over each device's samples): activations then stay split or whole
// between ops, as data- and expert-parallel systems keep them.
func noPartials(g *ir.Graph) func(op *ir.Op, r spmd.Rule) bool {
	return func(op *ir.Op, r spmd.Rule) bool {
		for j, l := range r.Out {
			if l.Kind == spmd.Reduce && op.Outputs[j] != g.Loss {
				return false
			}
		}
		return true
	}
}

func dataParallel(g *ir.Graph, n int, shares []float64, extra map[ir.TensorID]spmd.Layout) (*spmd.Program, error) {
	b, err := batchSize(g)
	if err != nil {
		return nil, err
	}
	segs := []spmd.Segment{{Name: "batch", Units: b, Lengths: spmd.RoundLengths(b, shares)}}
	return assemble(g, n, segs, extra)
}

// tensorParallel splits attention by heads and the FFN by its hidden
// units: q, k, v and fc1 column-parallel, out and fc2 row-parallel. What
// it splits is found by structure (findAttention, findFeedForward); a
// graph without attention is refused.
func tensorParallel(g *ir.Graph, n int) (*spmd.Program, error) {
	b, err := batchSize(g)
	if err != nil {
		return nil, err
	}
	// Megatron's is the tensor parallelism of transformers: a graph
	// without attention is refused, whatever feed-forward pairs it has (a
	// plain MLP is a stack of them, and is data parallel's to run).
	attn, ffn := findAttention(g), findFeedForward(g)
	if len(attn.heads) == 0 {
		return nil, nothingFound("tp", g.Name, "no attention op whose q, k and v are projections by 2-D parameters (x·W, + bias, split into heads by reshape and permute) and whose output is projected back by one: no transformer layer to split by heads, nor its feed-forward x·W1[d,f] (+ bias) → ReLU/GELU/… → ·W2[f,d] by hidden units")
	}
	segs := []spmd.Segment{{Name: "batch", Units: b, Lengths: spmd.EvenLengths(b, n)}}
	params := map[ir.TensorID]spmd.Layout{}
	// segment adds one segment per distinct count (heads, widths), the
	// first named plainly and the others by their count.
	segment := func(name string, counts []int) map[int]int {
		at := map[int]int{}
		for k, c := range counts {
			nm := name
			if k > 0 {
				nm = fmt.Sprint(name, c)
			}
			segs = append(segs, spmd.Segment{Name: nm, Units: c, Lengths: spmd.EvenLengths(c, n)})
			at[c] = len(segs) - 1
		}
		return at
	}
	hs := segment("heads", attn.heads)
	for _, t := range attn.qkvW {
		params[t] = spmd.G(1, hs[attn.headsOf[t]])
	}
	for _, t := range attn.qkvB {
		params[t] = spmd.G(0, hs[attn.headsOf[t]])
	}
	for _, t := range attn.outW {
		params[t] = spmd.G(0, hs[attn.headsOf[t]])
	}
	fs := segment("ffn", ffn.widths)
	for _, t := range ffn.w1 {
		params[t] = spmd.G(1, fs[ffn.widthOf[t]])
	}
	for _, t := range ffn.b1 {
		params[t] = spmd.G(0, fs[ffn.widthOf[t]])
	}
	for _, t := range ffn.w2 {
		params[t] = spmd.G(0, fs[ffn.widthOf[t]])
	}
	// Inputs stay whole: every device sees the whole batch. On one device
	// every layout is the whole tensor, and nothing then makes the greedy
	// completion prefer a rule whose loss ends as Reduce (the sum of every
	// device's part, which a program's loss must be); splitting the batch
	// over that one device changes nothing else and ends the loss as Reduce.
	p, err := assembleWith(g, n, segs, params, n == 1)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func assembleWith(g *ir.Graph, n int, segs []spmd.Segment, params map[ir.TensorID]spmd.Layout, splitBatch bool) (*spmd.Program, error) {
	leaves := batchLeaves(g, segs, params)
	if !splitBatch {
		for i := range leaves {
			if k := g.Tensors[leaves[i].Tensor].Kind; k == ir.Input || k == ir.Label {
				leaves[i].Layout = spmd.I
			}
		}
	}
	ch := spmd.Greedy{Devices: n, FLOPsPerByte: flopsPerByte, Allow: keepParams(g, leaves)}
	p, err := spmd.Assemble(g, n, segs, leaves, ch, padded)
	if err != nil {
		return nil, err
	}
	return p, spmd.Check(g, p)
}

// expertParallel splits the experts of every MoE layer among devices and
// runs everything else data parallel.
func expertParallel(g *ir.Graph, n int) (*spmd.Program, error) {
	b, err := batchSize(g)
	if err != nil {
		return nil, err
	}
	experts, e := findExperts(g)
	if len(experts) == 0 {
		return nil, nothingFound("ep", g.Name, "no mixture-of-experts layer: no top2_gate op whose dispatched tokens meet parameters with one row per expert before its combine brings them back")
	}
	segs := []spmd.Segment{
		{Name: "batch", Units: b, Lengths: spmd.EvenLengths(b, n)},
		{Name: "experts", Units: e, Lengths: spmd.EvenLengths(e, n)},
	}
	params := map[ir.TensorID]spmd.Layout{}
	for _, t := range experts {
		params[t] = spmd.G(0, 1)
	}
	// Tokens go to their experts and come back by all-to-all (GShard,
	// DeepSpeed-MoE). Without noPartials the greedy completion would
	// contract the combine einsum over locally held experts instead,
	// leaving every device a partial sum of the whole batch's output to
	// reduce-scatter: more traffic than the return all-to-all.
	leaves := batchLeaves(g, segs, params)
	return complete(g, n, segs, leaves, both(keepParams(g, leaves), noPartials(g)))
}

// megatron is Megatron-LM's layout: replicas of t GPUs inside one machine
// run the tensor-parallel program (tp over t ranks), and the replicas run
// data parallel, the batch split evenly among them (or, with proportional,
// in proportion to each replica's FP32 throughput); each parameter shard's
// gradient is all-reduced across the replicas among the devices holding
// it. On one machine that is tp over all its GPUs, with one GPU per machine
// it is dp-ev (dp-cp), and otherwise a mesh program (spmd.Compose of a
// data-parallel program over the replicas and tp over t ranks).
//
// t is the largest degree that divides every machine's GPU count (their
// greatest common divisor), each machine holding count/t replicas. Every
// replica must have the same ranks so that the devices of one rank hold
// the same shard and can all-reduce its gradient, and Megatron never
// stretches a tensor-parallel group across machines: its per-layer
// all-reduces would cross the slow network. So machines of different sizes
// (paper-29: 7, 1, 3, 8, 1, 6, 1, 2 GPUs) get the degree all of them allow,
// which there is 1 — plain data parallelism — rather than an error.
func megatron(g *ir.Graph, c *cluster.Cluster, proportional bool) (*spmd.Program, error) {
	n := c.NumDevices()
	if len(c.Nodes) == 1 {
		return tensorParallel(g, n)
	}
	t := 0
	for _, nd := range c.Nodes {
		if nd.Count > 0 {
			t = gcd(t, nd.Count)
		}
	}
	if t <= 1 {
		if proportional {
			return dataParallel(g, n, throughputShares(c), nil)
		}
		return dataParallel(g, n, evenShares(n), nil)
	}
	var replicas [][]int
	var fp32 []float64
	for _, d := range c.Devices() {
		if d.Local%t == 0 {
			replicas = append(replicas, nil)
			fp32 = append(fp32, 0)
		}
		replicas[len(replicas)-1] = append(replicas[len(replicas)-1], d.Index)
		fp32[len(fp32)-1] += d.Spec.FP32
	}
	shares := evenShares(len(replicas))
	if proportional {
		shares = fp32
	}
	outer, err := dataParallel(g, len(replicas), shares, nil)
	if err != nil {
		return nil, fmt.Errorf("megatron across %d replicas: %w", len(replicas), err)
	}
	inner, err := tensorParallel(g, t)
	if err != nil {
		return nil, fmt.Errorf("megatron inside %d-GPU replicas: %w", t, err)
	}
	// Both programs cut samples with their segment 0 ("batch"): tp's
	// share of the samples (the loss's) nests inside each replica's.
	p, err := spmd.Compose(g, outer, inner, replicas, map[int]int{0: 0}, padded)
	if err != nil {
		return nil, fmt.Errorf("megatron on %s (%d replicas × %d ranks): %w", c.Name, len(replicas), t, err)
	}
	return p, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
