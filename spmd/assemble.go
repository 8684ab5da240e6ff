package spmd

import (
	"fmt"
	"math"

	"hap/ir"
)

// Chooser picks the rule an op runs under, given its rules and a way to ask
// what converting an input costs.
type Chooser interface {
	Choose(g *ir.Graph, op *ir.Op, rules []Rule, avail [][]Layout) (Rule, error)
}

// conversionOrder ranks sources when several available layouts convert to
// the one needed: local instructions first, then the cheaper collectives.
var conversionRank = map[ir.OpKind]int{
	ir.OpDynamicSlice: 0, ir.OpPad: 1, ir.OpAllToAll: 2, ir.OpAllGather: 3, ir.OpReduceScatter: 4, ir.OpAllReduce: 5,
}

// bestSource returns the available layout that converts to want most
// cheaply, and the instruction, or ok false.
func bestSource(avail []Layout, want Layout) (from Layout, kind ir.OpKind, ok bool) {
	best := math.MaxInt
	for _, l := range avail {
		k := Conversion(l, want)
		if k == "" {
			continue
		}
		if r := conversionRank[k]; r < best {
			best, from, kind, ok = r, l, k, true
		}
	}
	return from, kind, ok
}

// Assemble builds a program: for each forward op in order, choose a rule,
// insert the communication that establishes its inputs' layouts (method
// picks each collective's method), then compute. A loss that does not end
// as Reduce is an error: no instruction makes Reduce from another layout.
func Assemble(g *ir.Graph, devices int, segs []Segment, leaves []LeafLayout, ch Chooser, method func(t ir.TensorID, from, to Layout) string) (*Program, error) {
	p := &Program{Devices: devices, Segments: segs, Leaves: leaves}
	avail := make([][]Layout, len(g.Tensors))
	for _, lf := range leaves {
		avail[lf.Tensor] = []Layout{lf.Layout}
	}
	convert := func(t ir.TensorID, want Layout) error {
		if hasLayout(avail[t], want) {
			return nil
		}
		from, kind, ok := bestSource(avail[t], want)
		if !ok {
			return fmt.Errorf("no instruction turns %q from %s into %s", g.Tensors[t].Name, layoutSet(avail[t]), want)
		}
		m := ""
		if kind == ir.OpAllGather || kind == ir.OpReduceScatter {
			m = method(t, from, want)
		}
		p.Instrs = append(p.Instrs, Instr{Kind: Comm, Tensor: t, From: from, To: want, Collective: kind, Method: m})
		avail[t] = append(avail[t], want)
		return nil
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Phase != ir.Forward {
			continue
		}
		rules := Rules(g, op, segs)
		r, err := ch.Choose(g, op, rules, avail)
		if err != nil {
			return nil, fmt.Errorf("op %q (%s): %w", op.Name, op.Kind, err)
		}
		for j, t := range op.Inputs {
			if err := convert(t, r.In[j]); err != nil {
				return nil, fmt.Errorf("op %q (%s) rule %s: %w", op.Name, op.Kind, r.Name, err)
			}
		}
		p.Instrs = append(p.Instrs, Instr{Kind: Compute, Op: op.ID, Rule: r})
		for j, t := range op.Outputs {
			avail[t] = []Layout{r.Out[j]}
		}
	}
	if g.Loss != ir.NoTensor && !hasLayout(avail[g.Loss], R) {
		return nil, fmt.Errorf("the loss %q ends as %s, not Reduce", g.Tensors[g.Loss].Name, layoutSet(avail[g.Loss]))
	}
	return p, nil
}

// Greedy chooses, for each op, the allowed rule with the least estimated
// cost: bytes the input conversions move plus the op's work on the busiest
// device expressed in bytes at FLOPsPerByte. It is the completion
// heuristic the hand-written strategies use; the synthesizer optimises
// globally instead.
type Greedy struct {
	Devices int
	// FLOPsPerByte converts work to communication volume: a GPU doing
	// ~10 TFLOP/s against a ~10 GB/s link is worth ~1000 FLOPs per byte.
	FLOPsPerByte float64
	// Allow filters rules; nil allows every rule.
	Allow func(op *ir.Op, r Rule) bool
}

// Choose implements Chooser.
func (c Greedy) Choose(g *ir.Graph, op *ir.Op, rules []Rule, avail [][]Layout) (Rule, error) {
	best, bestCost := -1, math.Inf(1)
	fwd, bwd := g.Work(op.ID)
	work := fwd.FLOPs + bwd.FLOPs
	for i, r := range rules {
		if c.Allow != nil && !c.Allow(op, r) {
			continue
		}
		cost := 0.0
		ok := true
		for j, t := range op.Inputs {
			if hasLayout(avail[t], r.In[j]) {
				continue
			}
			_, kind, found := bestSource(avail[t], r.In[j])
			if !found {
				ok = false
				break
			}
			tt := &g.Tensors[t]
			bytes := float64(tt.Shape.Numel() * tt.DType.Size())
			switch kind {
			case ir.OpAllReduce:
				cost += 2 * bytes
			case ir.OpAllGather, ir.OpReduceScatter:
				cost += bytes
			case ir.OpAllToAll:
				cost += bytes / float64(max(c.Devices, 1))
			}
		}
		if !ok {
			continue
		}
		share := 1.0
		for _, l := range r.Out {
			if l.Kind != Identity {
				share = 1 / float64(max(c.Devices, 1))
			}
		}
		cost += work * share / c.FLOPsPerByte
		if cost < bestCost {
			best, bestCost = i, cost
		}
	}
	if best < 0 {
		return Rule{}, fmt.Errorf("no allowed sharding rule (of %d) can be established", len(rules))
	}
	return rules[best], nil
}
