package lower

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"hap/cost"
	"hap/devprog"
	"hap/ir"
)

// collectiveKinds maps ir's collective ops to the cost model's.
var collectiveKinds = map[ir.OpKind]cost.Collective{
	ir.OpAllGather:     cost.AllGather,
	ir.OpReduceScatter: cost.ReduceScatter,
	ir.OpAllReduce:     cost.AllReduce,
	ir.OpAllToAll:      cost.AllToAll,
}

// Schedule turns every device's local training step (one graph per device,
// as BuildLocal and ir.BuildTrainStep make them) into the per-device
// program the simulator and runtimes consume: one kernel per op with its
// work, one collective call per collective op with every rank's element
// count and its method, data dependencies, and memory: parameters, inputs
// and optimizer state resident; activations and gradients allocated by
// their producer and freed after their last use; updates in place.
//
// A collective runs over its op's group (ir.Attrs.Group; every device when
// that is empty). Its ID is that of the group's n-th collective: the
// members of a group reach its collectives in the same order, since every
// device's step has the same structure. Collectives of the same op (by
// name) on different groups — a mesh program's sibling groups along one
// axis — run together; each records how many there are (Comm.Sharing), so
// that the cost model splits the network among those that cross it. (This
// takes every sibling to cross every node's links, as in megatron's mesh,
// where each machine holds a member of every cross-replica group.)
func Schedule(steps []*ir.Graph) (*devprog.Program, error) {
	return ScheduleContext(context.Background(), steps)
}

// ScheduleContext is Schedule, stopped with ctx's error when ctx ends:
// scheduling tens of thousands of devices takes seconds.
func ScheduleContext(ctx context.Context, steps []*ir.Graph) (*devprog.Program, error) {
	n := len(steps)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	ids := map[string]int{} // "group#n" → collective ID
	p := &devprog.Program{Devices: make([]devprog.DeviceProgram, n)}
	// groupless[g] is the first device scheduled with step g when no op of
	// g names a group: another device with the same step (CostSteps shares
	// one among the devices holding the same pieces) gets the same
	// instructions, since every collective runs over every device and
	// takes the same ID.
	groupless := map[*ir.Graph]int{}
	var keys groupKeys
	for d, g := range steps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("schedule: %w", err)
		}
		if e, ok := groupless[g]; ok {
			p.Devices[d] = p.Devices[e].Clone()
			continue
		}
		grouped := false
		seq := map[string]int{} // group → collectives of it so far on d
		dp := &p.Devices[d]
		dp.Instrs = make([]devprog.Instr, 0, len(g.Ops))
		last := make([]int, len(g.Tensors))
		for i := range last {
			last[i] = -1
		}
		for i := range g.Ops {
			for _, in := range g.Ops[i].Inputs {
				last[in] = i
			}
		}
		for i := range g.Tensors {
			if t := &g.Tensors[i]; t.Kind.IsLeaf() {
				dp.Resident += bytesOf(t)
			}
		}
		instr := make([]int, len(g.Ops))
		for i := range g.Ops {
			op := &g.Ops[i]
			in := devprog.Instr{Name: op.Name}
			for _, t := range op.Inputs {
				if prod := g.Tensors[t].Producer; prod != ir.NoOp {
					in.Deps = append(in.Deps, instr[prod])
				}
			}
			if kind, ok := collectiveKinds[op.Kind]; ok {
				group := all
				if len(op.Attrs.Group) > 0 {
					group, grouped = op.Attrs.Group, true
				}
				key := keys.of(group)
				nth := key + "#" + strconv.Itoa(seq[key])
				seq[key]++
				id, seen := ids[nth]
				if !seen {
					id = len(ids)
					ids[nth] = id
				}
				c, err := commOf(g, op, kind, id, group)
				if err != nil {
					return nil, fmt.Errorf("device %d op %q: %w", d, op.Name, err)
				}
				in.Comm = c
			} else {
				fwd, _ := g.Work(op.ID)
				in.Kernel = &devprog.Kernel{Op: string(op.Kind), Work: &fwd}
			}
			if op.Phase != ir.Update {
				for _, t := range op.Outputs {
					in.Alloc += bytesOf(&g.Tensors[t])
				}
			}
			for _, t := range op.Inputs {
				tt := &g.Tensors[t]
				if last[t] == i && !tt.Kind.IsLeaf() {
					in.Free += bytesOf(tt)
				}
			}
			instr[i] = dp.Append(in)
		}
		if !grouped {
			groupless[g] = d
		}
	}
	siblings := map[string]map[string]bool{} // op name → groups running it
	for d := range p.Devices {
		for _, in := range p.Devices[d].Instrs {
			if c := in.Comm; c != nil {
				if siblings[in.Name] == nil {
					siblings[in.Name] = map[string]bool{}
				}
				siblings[in.Name][keys.of(c.Group)] = true
			}
		}
	}
	for d := range p.Devices {
		for _, in := range p.Devices[d].Instrs {
			if n := len(siblings[in.Name]); in.Comm != nil && n > 1 {
				in.Comm.Sharing = n
			}
		}
	}
	return p, p.Validate()
}

func bytesOf(t *ir.Tensor) int64 { return int64(t.Shape.Numel() * t.DType.Size()) }

// commOf describes a collective op as a call: every rank's element count in
// the cost model's convention, and the method for uneven pieces.
func commOf(g *ir.Graph, op *ir.Op, kind cost.Collective, id int, group []int) (*devprog.Comm, error) {
	x := &g.Tensors[op.Inputs[0]]
	a := &op.Attrs
	n := len(group)
	if op.Kind != ir.OpAllReduce && len(a.Sizes) != n {
		return nil, fmt.Errorf("%s has %d pieces for a group of %d devices %v", op.Kind, len(a.Sizes), n, group)
	}
	group = append([]int{}, group...)
	counts := make([]int64, n)
	even := true
	// inner is the elements per unit length of the cut dimension.
	inner := func(s ir.Shape, axis int) int64 {
		p := int64(1)
		for d, v := range s {
			if d != axis {
				p *= int64(v)
			}
		}
		return p
	}
	switch op.Kind {
	case ir.OpAllGather, ir.OpReduceScatter:
		u := inner(x.Shape, a.Axis)
		for r, s := range a.Sizes {
			counts[r] = int64(s) * u
			even = even && s == a.Sizes[0]
		}
	case ir.OpAllToAll:
		u := inner(x.Shape, a.Axes[0])
		for r, s := range a.Sizes {
			counts[r] = int64(s) * u
			even = even && s == a.Sizes[0] && a.Split[r] == a.Split[0]
		}
	default:
		for r := range counts {
			counts[r] = int64(x.Shape.Numel())
		}
	}
	c := &devprog.Comm{ID: id, Kind: kind, Group: group, Counts: counts, ElemBytes: int64(x.DType.Size())}
	// A grouped all-gather or reduce-scatter stays grouped when its pieces
	// happen to be equal: the planner priced it grouped, and the even ring
	// is the padded method's price at equal pieces.
	switch {
	case (op.Kind == ir.OpAllGather || op.Kind == ir.OpReduceScatter) && a.Method == "grouped":
		c.Method = cost.MethodGrouped
	case even || op.Kind == ir.OpAllReduce:
		c.Method = cost.MethodEven
	case op.Kind == ir.OpAllToAll:
		c.Method = cost.MethodGrouped
	default:
		c.Method = cost.MethodPadded
	}
	return c, nil
}

// groupKeys names groups as groupKey does, remembering the last group
// named: a device's collectives mostly run over the group of the one
// before (every device, outside a mesh).
type groupKeys struct {
	last []int
	key  string
}

func (k *groupKeys) of(g []int) string {
	if k.key == "" || !slices.Equal(g, k.last) {
		k.last, k.key = g, groupKey(g)
	}
	return k.key
}

// groupKey names a device group (fmt.Sprint's reflection made it a third
// of lowering time on 64 devices).
func groupKey(g []int) string {
	b := make([]byte, 0, 4*len(g))
	for _, d := range g {
		b = strconv.AppendInt(b, int64(d), 10)
		b = append(b, ',')
	}
	return string(b)
}
