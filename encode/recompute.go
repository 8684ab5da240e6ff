package encode

import (
	"fmt"
	"slices"
	"strconv"

	"hap/ir"
)

// Activation recomputation (docs/planner.md, "Recomputation"). A unit is
// a run of the timeline's blocks (a block starts at each parameter's first
// consumer): one layer of a stack of repeated layers (ir.FindLayers), or,
// outside every stack, a run that starts at a block whose first op reads
// a weight of two or more dimensions (a VGG convolution with its bias and
// ReLU). Units are recomputed by group — every layer of a stack together
// (the class of repeated layers the encoding ties: its layers run the same
// rules, so they hold the same activations), and the units outside every
// stack together — so that the choice is one of a few, which the solver
// weighs by solving each (solve.Recompute...). The unit that computes the
// loss is never recomputed: its backward follows its forward at once, so
// recomputing it frees nothing.

// RecomputeUnit is one unit of recomputation.
type RecomputeUnit struct {
	// Name is the unit's first op's name.
	Name string
	// Group is the stack the unit is a layer of ("stack 0", ...) or
	// "other" outside every stack; units of one group recompute together.
	Group string
	// Ops are its forward ops, in order.
	Ops []ir.OpID
	// Blocks are its timeline blocks [first, last].
	Blocks [2]int
	// Recomputable is false for the loss's unit and a unit nothing of
	// which is differentiated.
	Recomputable bool
}

// OtherGroup names the units outside every stack.
const OtherGroup = "other"

// blockStarts marks the forward ops that start a timeline block: the
// first op and every parameter's first consumer.
func blockStarts(g *ir.Graph) []bool {
	starts := make([]bool, len(g.Ops))
	if len(starts) > 0 {
		starts[0] = true
	}
	seen := make([]bool, len(g.Tensors))
	for i := range g.Ops {
		for _, t := range g.Ops[i].Inputs {
			if !seen[t] {
				seen[t] = true
				if g.Tensors[t].Kind == ir.Param {
					starts[i] = true
				}
			}
		}
	}
	return starts
}

// RecomputeUnits cuts forward graph g into its units of recomputation.
func RecomputeUnits(g *ir.Graph) []RecomputeUnit {
	layers := ir.FindLayers(g)
	starts := blockStarts(g)
	req := ir.RequiresGrad(g)
	var units []RecomputeUnit
	block := -1
	var key string // the current unit's layer, "" outside every stack
	for i := range g.Ops {
		if starts[i] {
			block++
			pos := layers.Ops[i]
			k := ""
			if pos.Stack >= 0 {
				k = strconv.Itoa(pos.Stack) + "." + strconv.Itoa(pos.Layer)
			}
			open := len(units) == 0 || k != key
			if !open && k == "" {
				open = readsWeight(g, i)
			}
			if open {
				grp := OtherGroup
				if pos.Stack >= 0 {
					grp = "stack " + strconv.Itoa(pos.Stack)
				}
				units = append(units, RecomputeUnit{Name: g.Ops[i].Name, Group: grp, Blocks: [2]int{block, block}})
			}
			key = k
		}
		u := &units[len(units)-1]
		u.Ops = append(u.Ops, ir.OpID(i))
		u.Blocks[1] = block
	}
	lossOp := ir.NoOp
	if g.Loss != ir.NoTensor {
		lossOp = g.Tensors[g.Loss].Producer
	}
	for ui := range units {
		u := &units[ui]
		if slices.Contains(u.Ops, lossOp) {
			continue
		}
		for _, op := range u.Ops {
			for _, t := range g.Ops[op].Inputs {
				u.Recomputable = u.Recomputable || req[t]
			}
		}
	}
	return units
}

// readsWeight reports whether op i reads a parameter of two or more
// dimensions: where a unit outside every stack starts.
func readsWeight(g *ir.Graph, i int) bool {
	for _, t := range g.Ops[i].Inputs {
		if tt := &g.Tensors[t]; tt.Kind == ir.Param && len(tt.Shape) >= 2 {
			return true
		}
	}
	return false
}

// RecomputeGroups lists the groups of g's recomputable units, stacks
// first, in order.
func RecomputeGroups(units []RecomputeUnit) []string {
	var out []string
	for _, u := range units {
		if u.Recomputable && !slices.Contains(out, u.Group) {
			out = append(out, u.Group)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		return b2i(a == OtherGroup) - b2i(b == OtherGroup)
	})
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// RecomputeSelect is the indices of the recomputable units of the named
// groups.
func RecomputeSelect(units []RecomputeUnit, groups []string) []int {
	var out []int
	for i, u := range units {
		if u.Recomputable && slices.Contains(groups, u.Group) {
			out = append(out, i)
		}
	}
	return out
}

// setRecompute marks the blocks of the units EncodeOptions.Recompute
// names (buildBlocks calls it before listing the terms).
func (e *Encoding) setRecompute() error {
	if len(e.opt.Recompute) == 0 {
		return nil
	}
	e.units = RecomputeUnits(e.G)
	e.unitOfBlock = make([]int, len(e.blocks))
	for k := range e.unitOfBlock {
		e.unitOfBlock[k] = -1
	}
	for _, ui := range e.opt.Recompute {
		if ui < 0 || ui >= len(e.units) || !e.units[ui].Recomputable {
			return fmt.Errorf("recompute: unit %d is not one of the %d units that can recompute", ui, len(e.units))
		}
		u := &e.units[ui]
		for k := u.Blocks[0]; k <= u.Blocks[1]; k++ {
			e.unitOfBlock[k] = ui
		}
	}
	return nil
}

// recomputed reports whether block k is recomputed.
func (e *Encoding) recomputed(k int) bool { return e.unitOfBlock != nil && e.unitOfBlock[k] >= 0 }

// unitStart reports whether block k starts its recomputed unit.
func (e *Encoding) unitStart(k int) bool {
	return e.recomputed(k) && (k == 0 || e.unitOfBlock[k-1] != e.unitOfBlock[k])
}

// Recomputed lists the units this encoding recomputes (indices into
// RecomputeUnits(e.G)).
func (e *Encoding) Recomputed() []int { return slices.Clone(e.opt.Recompute) }

// RecomputeOps is the program's Recompute field for the units the
// encoding recomputes.
func (e *Encoding) RecomputeOps() [][]ir.OpID {
	var out [][]ir.OpID
	for _, ui := range e.opt.Recompute {
		out = append(out, slices.Clone(e.units[ui].Ops))
	}
	return out
}

// recomputeTerms adds to the timeline the recomputation of block k, a
// block of a recomputed unit: before the unit's backward each device runs
// the block's forward again — its ops, its layout changes (leaves' and
// activations'), its pads — so the block's backward chain B is longer by
// all of it. The changes are charged on the device, as blocking as the
// compute they feed, and without the synchronisation a forward collective
// makes: the recomputed forward runs where the backward is, every device
// one after another's collectives, which the timeline's backward does not
// model apart (a leaf read in several blocks, whose change the timeline
// places at its reader, is left out: GPT-2's embedding).
func (e *Encoding) recomputeTerms(k int, visit func(k int, b bucket, a atom, class int, n float64)) {
	bl := &e.blocks[k]
	for _, oc := range bl.ops {
		visit(k, bucketB, atomFwd, oc.class, float64(oc.n))
	}
	for _, tc := range bl.tensors {
		n := float64(tc.n)
		if e.Tensors[tc.class].Producer >= 0 || e.spreadOf[tc.class] < 0 {
			visit(k, bucketB, atomComm, tc.class, n)
		}
		visit(k, bucketB, atomPadF, tc.class, n)
	}
}
