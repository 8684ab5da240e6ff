package encode

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"hap/cost"
	"hap/ir"
	"hap/spmd"
)

// Encoding is the planning problem of one forward graph on one cluster,
// reduced to tables: op classes (identical ops of repeated layers tied into
// one), their candidate rules with per-device times, tensor classes with
// their consumers, the communication each layout change costs, and memory.
// Evaluate prices a Choice from these tables; the MILP encodes the same
// prices, so the two agree on every program (the exhaustive tests check
// this).
//
// The cost model (one step, seconds) is the timeline of timeline.go:
// per device, forward and backward compute with the layout changes they
// wait for, and a communication stream on which replicated parameters'
// gradient all-reduces overlap the rest of backward:
//
//	compute(op, d) = time(op, d)·share(rule, d)   (share: Lengths[seg][d]/Units[seg], or 1)
//	update(p, d)   = update time·share(layout, d)
//	T = max_d max(compute stream, communication stream)   (timeline.go)
//
// It matches the simulator's time for the lowered program to within 1% on
// the zoo's models and the hand-written strategies (plan's tests).
type Encoding struct {
	G        *ir.Graph
	N        int
	Segs     []spmd.Segment // Units set; Lengths chosen by the solver
	Classes  []OpClass
	Tensors  []TensorClass
	Capacity []float64 // bytes per device
	model    *cost.Model
	opt      EncodeOptions
	// classOf maps a forward op to its class; tclassOf a tensor to its.
	classOf  []int
	tclassOf []int
	// Groups are the devices the MILP treats as one: identical hardware,
	// each group's units spread evenly over its devices.
	Groups [][]int
	// groupOfDevice is each device's index in Groups.
	groupOfDevice []int
	// hardware names each device's type (identical for interchangeable
	// devices even with NoGroup); Evaluate prices one device per type and
	// lengths.
	hardware []string
	// coll holds collCoeffs by (tensor class, layout), layouts each
	// class's Layouts; both are filled when the encoding is built.
	coll    map[collKey]Coll
	layouts [][]spmd.Layout
	// blocks is the step-time timeline (timeline.go); terms its terms,
	// and flat the same terms as indices into one device's timelineTerms
	// and bucket sums, in the same order (Evaluate's bucketSums).
	blocks []block
	terms  []term
	flat   []flatTerm
	// memFlat is the memory model's per-block sums as flatTerms
	// (memoryTerms).
	memFlat []flatTerm
	// spread are the leaf classes read in several blocks, whose layout
	// change the timeline places at the first reader that needs it
	// (timeline.go); spreadOf maps a tensor class to its index there, −1
	// for the others.
	spread   []spreadLeaf
	spreadOf []int
	// a2a prices an all-to-all over every device from the bytes each
	// holds (cost.AllToAllTerms).
	a2a cost.AllToAllTerms
	// methods, per tensor class and layout index, is the collective
	// method fixed by dominance (prune.go), methodFree where the search
	// chooses; nil with NoPrune.
	methods [][]methodFix
	// units are the graph's units of recomputation and unitOfBlock the
	// recomputed unit of each block (−1 for a kept one); both nil when
	// nothing is recomputed.
	units       []RecomputeUnit
	unitOfBlock []int
}

type collKey struct {
	tc int
	l  spmd.Layout
}

// EncodeOptions shape the encoding.
type EncodeOptions struct {
	Optimizer ir.Optimizer
	// MemoryFraction of each device's memory plans may use (the rest is
	// left to the framework, allocator slack and workspace); 0 means
	// DefaultMemoryFraction. Tests pass 1e6 to take memory out of play.
	MemoryFraction float64
	// NoTie turns off tying of identical layers (for tests).
	NoTie bool
	// NoGroup gives every device its own MILP variables; by default
	// identical devices (same type, memory and throughput) share them.
	NoGroup bool
	// NoAllToAll leaves all-to-all out of the search: Gathers are made
	// from other Gathers through Identity only (the paper's instruction
	// set for this conversion; tests use it to keep the other collectives
	// covered).
	NoAllToAll bool
	// NoPrune keeps dominated choices in the search (prune.go); the
	// exhaustive tests enumerate without pruning to prove it exact.
	NoPrune bool
	// Recompute lists the units of recomputation (RecomputeUnits) whose
	// activations backward recomputes rather than keeps (recompute.go).
	Recompute []int
}

// DefaultMemoryFraction leaves 10% of each device for workspace and
// fragmentation.
const DefaultMemoryFraction = 0.9

// OpClass is a set of identical forward ops (same kind, attributes and
// shapes, at the same place in repeated layers) that run under one rule.
type OpClass struct {
	Name  string
	Ops   []ir.OpID
	Rules []spmd.Rule
	// WorkSeg is, per rule, the segment that splits its work (−1: every
	// device does all of it).
	WorkSeg []int
	// Time is per device the seconds of forward+backward of all Ops at
	// share 1, Acc apart; TimeF and TimeB its forward and backward parts.
	Time, TimeF, TimeB []float64
	// TimeW is the part of TimeB that the op's backward runs after its
	// last input gradient: the parameter gradients that follow it (a
	// matmul's dW after its dX). A blocking adjoint of the op's input
	// overlaps it (timeline.go).
	TimeW []float64
	// Fixed, FixedF, FixedB and FixedW are the parts of Time, TimeF, TimeB
	// and TimeW that do not shrink with a device's share of the work
	// (cost.Model.FixedTime: each kernel's launch overhead, and the
	// small-kernel fill time of FLOP-bound ones): a device pays them once
	// for its shard's kernels, whatever the share, as the simulator does.
	Fixed, FixedF, FixedB, FixedW []float64
	// Acc are the adds that sum an input's gradient with its other
	// readers' (ir.Accumulation), apart from Time: they work on the input
	// as the rule reads it, not on the rule's share of the work. A
	// column-parallel matmul reads its input whole, so the sum of q, k
	// and v's input gradients is whole on every device (on vit h100-16,
	// 0.16 ms of 1.8 ms of compute that the work share priced at 1/12).
	Acc []AccumulationTime
	// Roof are the class's kernels a rule can leave reading or writing
	// operands whole, whose time Time's share understates
	// (roofline.go); one op's each.
	Roof []rooflineKernel
}

// AccumulationTime is the backward seconds per device, at share 1 and over all
// of a class's ops, of the adds that sum the gradient of its input slot
// Slot; W is the part of it in the op's parameter-gradient tail (a
// parameter that two ops read: the tied embedding). TimeS is the add the
// reader would make had backward not met it first (ir.GradStart): priced
// too, so that every reader of a summed tensor is priced alike, and taken
// back by the tensor's sum tree (gradsum.go). The work LP leaves it out:
// it is no kernel.
type AccumulationTime struct {
	Slot  int
	TimeB []float64
	TimeW []float64
	TimeS []float64
	// FixedB and FixedW are the parts of TimeB and TimeW paid whole
	// whatever the share (as OpClass.Fixed).
	FixedB, FixedW []float64
}

// workPart is a part of an op class's time that one segment's share
// scales under some of its rules: the rule's own work (work) when seg is
// its work segment, and the accumulations whose input the rule reads on
// seg (acc[ai] == '1' for OpClass.Acc[ai]).
type workPart struct {
	seg  int
	work bool
	acc  string
}

// times are the part's forward, backward and parameter-gradient-tail
// seconds on device d at share 1 that scale with the share (the class's
// fixed seconds apart: OpClass.Fixed).
func (p workPart) times(c *OpClass, d int) (f, b, w float64) {
	if p.work {
		f, b, w = c.TimeF[d]-c.FixedF[d], c.TimeB[d]-c.FixedB[d], c.TimeW[d]-c.FixedW[d]
	}
	for ai := range p.acc {
		if p.acc[ai] == '1' {
			b += c.Acc[ai].TimeB[d] - c.Acc[ai].FixedB[d] + c.Acc[ai].TimeS[d]
			w += c.Acc[ai].TimeW[d] - c.Acc[ai].FixedW[d]
		}
	}
	return f, b, w
}

// workParts splits class ci's compute into the parts the MILP prices with
// one share term each, with the rules (a sum of their x columns) under
// which each applies. Without accumulations that is one part per work
// segment; a rule that reads an accumulated input on its work segment
// prices both in one part.
func (e *Encoding) workParts(v *MILPVars, ci int) ([]workPart, []lin) {
	c := &e.Classes[ci]
	index := map[workPart]int{}
	var parts []workPart
	var on []lin
	for ri := range c.Rules {
		acc := map[int][]byte{} // per segment, the rule's accumulations on it
		segs := map[int]bool{c.WorkSeg[ri]: true}
		for ai := range c.Acc {
			s := c.accSeg(ri, &c.Acc[ai])
			if acc[s] == nil {
				acc[s] = bytes.Repeat([]byte{'0'}, len(c.Acc))
			}
			acc[s][ai] = '1'
			segs[s] = true
		}
		for _, s := range sortedKeys(segs) {
			p := workPart{seg: s, work: s == c.WorkSeg[ri], acc: string(acc[s])}
			k, ok := index[p]
			if !ok {
				k = len(parts)
				index[p] = k
				parts = append(parts, p)
				on = append(on, lin{})
			}
			on[k].add(v.x[ci][ri], 1)
		}
	}
	return parts, on
}

// accumulation is c's accumulation of input slot's gradient, added (for n
// devices) if it has none yet.
func (c *OpClass) accumulation(slot, n int) *AccumulationTime {
	for i := range c.Acc {
		if c.Acc[i].Slot == slot {
			return &c.Acc[i]
		}
	}
	c.Acc = append(c.Acc, AccumulationTime{Slot: slot, TimeB: make([]float64, n), TimeW: make([]float64, n), TimeS: make([]float64, n),
		FixedB: make([]float64, n), FixedW: make([]float64, n)})
	return &c.Acc[len(c.Acc)-1]
}

// accSeg is the segment that scales accumulation a of class c under rule
// r: that of the layout the rule reads the input in (−1: whole).
func (c *OpClass) accSeg(r int, a *AccumulationTime) int {
	return layoutSeg(c.Rules[r].In[a.Slot])
}

// TensorClass is a set of tensors in identical positions.
type TensorClass struct {
	Name    string
	Tensors []ir.TensorID
	Shape   ir.Shape
	Bytes   float64 // of one tensor
	Kind    ir.TensorKind
	ReqGrad bool
	// Integer tensors (token ids, labels) cross no collective: the only
	// layout change they get is the local dynamic slice of Identity.
	Integer bool
	// Producer is the producing op class and output index (−1 for leaves).
	Producer, OutIdx int
	// LeafLayouts are the candidate layouts of a leaf class.
	LeafLayouts []spmd.Layout
	// Update is per device the optimizer's seconds for all Tensors (params)
	// at share 1; StateFactor the optimizer state per parameter byte.
	Update []float64
	// UpdateFixed is the part of Update a device pays whole whatever its
	// share (cost.Model.FixedTime: each update kernel's launch).
	UpdateFixed []float64
	// PadWhole is per device the seconds a pad of one tensor of the class
	// takes to write it whole; reading the piece it places adds that
	// piece's share of it (a pad is a data-movement kernel over its input
	// and output bytes). See padTimes.
	PadWhole []float64
	// Consumers are (op class, input slot) pairs.
	Consumers [][2]int
	// ConsumerSaves[k] reports whether the backward of Consumers[k] reads
	// that input (matmul does, add does not): the tensor, in the layout
	// that consumer reads, is then held from forward into backward.
	// ProducerSaves: the producer's own backward reads it (relu, softmax).
	ConsumerSaves []bool
	ProducerSaves bool
	// SumAdd is per device the seconds of one add of one tensor's whole
	// gradient, for a class whose gradients backward sums over several
	// readers (nil otherwise, or where the adds are negligible: see
	// sumNegligible): what its sum tree prices (gradsum.go).
	SumAdd []float64
}

// Encode builds the encoding of forward graph g with candidate segments
// segs on the cluster priced by m.
func Encode(g *ir.Graph, segs []spmd.Segment, m *cost.Model, opt EncodeOptions) (*Encoding, error) {
	if opt.MemoryFraction == 0 {
		opt.MemoryFraction = DefaultMemoryFraction
	}
	// Above 1 is allowed: tests lift the memory rows out of the way with
	// a fraction of 1e6 (hap plan allows (0, 1]).
	if !(opt.MemoryFraction > 0) || math.IsInf(opt.MemoryFraction, 1) {
		return nil, fmt.Errorf("memory fraction %g: want a positive, finite share of each device's memory", opt.MemoryFraction)
	}
	if opt.Optimizer.Kind == "" {
		opt.Optimizer = ir.Adam(1e-3)
	}
	n := m.NumDevices()
	e := &Encoding{G: g, N: n, Segs: segs, model: m, opt: opt, classOf: make([]int, len(g.Ops)), tclassOf: make([]int, len(g.Tensors))}
	byKey := map[string]int{}
	for d := 0; d < n; d++ {
		e.Capacity = append(e.Capacity, float64(m.Capacity(d))*opt.MemoryFraction)
		sp := m.Spec(d)
		k := fmt.Sprintf("%s|%v|%v|%v|%d", sp.Name, sp.FP32, sp.FP16, sp.MemBandwidth, m.Capacity(d))
		if opt.NoGroup {
			k = fmt.Sprint(d)
		}
		hwKey := k
		if opt.NoGroup {
			hwKey = fmt.Sprintf("%s|%v|%v|%v|%d", sp.Name, sp.FP32, sp.FP16, sp.MemBandwidth, m.Capacity(d))
		}
		e.hardware = append(e.hardware, hwKey)
		g, ok := byKey[k]
		if !ok {
			g = len(e.Groups)
			byKey[k] = g
			e.Groups = append(e.Groups, nil)
		}
		e.Groups[g] = append(e.Groups[g], d)
		e.groupOfDevice = append(e.groupOfDevice, g)
	}
	step, err := ir.BuildTrainStep(g, opt.Optimizer)
	if err != nil {
		return nil, err
	}
	// Backward work per forward op: the actual gradient ops autodiff emits,
	// in the order it emits them; tail[i] counts the last of op i's that
	// only make parameter gradients (weightTail).
	// bwdSlot[i][k] is the input slot whose gradient bwd[i][k] accumulates
	// (step.Train.Accumulations), −1 for the op's own gradient work.
	bwd := make([][]ir.Work, len(g.Ops))
	bwdIDs := make([][]ir.OpID, len(g.Ops))
	bwdSlot := make([][]int, len(g.Ops))
	tail := weightTail(step, len(g.Ops))
	accSlot := map[ir.OpID]int{}
	for _, a := range step.Train.Accumulations {
		accSlot[a.Add] = a.Slot
	}
	sumAdd, starts := gradientSums(step, m, n)
	for i := range step.Ops {
		op := &step.Ops[i]
		if op.Phase == ir.Backward && op.GradOf != ir.NoOp && int(op.GradOf) < len(g.Ops) {
			w, _ := step.Work(op.ID)
			bwd[op.GradOf] = append(bwd[op.GradOf], w)
			bwdIDs[op.GradOf] = append(bwdIDs[op.GradOf], op.ID)
			slot, ok := accSlot[op.ID]
			if !ok {
				slot = -1
			}
			bwdSlot[op.GradOf] = append(bwdSlot[op.GradOf], slot)
		}
	}
	// update[p] is parameter p's update as the training step runs it: the
	// optimizer's op over p, its gradient and state (Adam's moments read
	// and written; SGD's none), which the simulator prices the same way.
	update := map[ir.TensorID]ir.Work{}
	for _, s := range step.Train.Params {
		w, _ := step.Work(step.Tensors[s.Updated].Producer)
		update[s.Param] = w
	}
	// savedFor[t] holds the forward ops whose backward reads forward
	// tensor t: what a device keeps from forward into backward (memory.go).
	savedFor := make([]map[ir.OpID]bool, len(g.Tensors))
	for i := range step.Ops {
		op := &step.Ops[i]
		if op.Phase != ir.Backward || op.GradOf == ir.NoOp {
			continue
		}
		for _, t := range op.Inputs {
			if int(t) < len(g.Tensors) { // the step keeps forward tensor IDs
				if savedFor[t] == nil {
					savedFor[t] = map[ir.OpID]bool{}
				}
				savedFor[t][op.GradOf] = true
			}
		}
	}
	req := ir.RequiresGrad(g)

	// Ops and leaves are keyed by where they sit in the graph's repeated
	// layers, found by structure (ir.FindLayers), never by name: the
	// corresponding ops of identical layers share a key, and every other
	// op or leaf has one of its own. With NoTie every one has its own.
	var layers *ir.Layers
	if !opt.NoTie {
		layers = ir.FindLayers(g)
	}
	opKey := func(id ir.OpID) string {
		if layers != nil && layers.Ops[id].Key != "" {
			return layers.Ops[id].Key
		}
		return "op" + strconv.Itoa(int(id))
	}
	leafKey := func(id ir.TensorID) string {
		if layers != nil && layers.Tensors[id].Key != "" {
			return layers.Tensors[id].Key
		}
		return "t" + strconv.Itoa(int(id))
	}
	tkeys := map[string]int{}
	addTensor := func(t *ir.Tensor, k string, producer, outIdx int) int {
		if id, ok := tkeys[k]; ok {
			tc := &e.Tensors[id]
			tc.Tensors = append(tc.Tensors, t.ID)
			return id
		}
		id := len(e.Tensors)
		tkeys[k] = id
		e.Tensors = append(e.Tensors, TensorClass{Name: t.Name, Tensors: []ir.TensorID{t.ID}, Shape: t.Shape, Bytes: float64(t.Shape.Numel() * t.DType.Size()),
			Kind: t.Kind, ReqGrad: req[t.ID], Integer: !t.DType.IsFloat(), Producer: producer, OutIdx: outIdx})
		return id
	}
	okeys := map[string]int{}
	for i := range g.Ops {
		op := &g.Ops[i]
		// An op's class key: its place in the repeated layers, kind,
		// attributes and input shapes — identical layers coincide.
		var b strings.Builder
		a := op.Attrs
		a.Seed = 0 // dropout seeds differ per layer; the sharding does not
		fmt.Fprintf(&b, "%s|%s|%+v", opKey(op.ID), op.Kind, a)
		for _, t := range op.Inputs {
			fmt.Fprintf(&b, "|%v", g.Tensors[t].Shape)
		}
		k := b.String()
		ci, ok := okeys[k]
		if !ok {
			ci = len(e.Classes)
			okeys[k] = ci
			rules := spmd.Rules(g, op, segs)
			oc := OpClass{Name: op.Name, Rules: rules, Time: make([]float64, n), TimeF: make([]float64, n), TimeB: make([]float64, n), TimeW: make([]float64, n),
				Fixed: make([]float64, n), FixedF: make([]float64, n), FixedB: make([]float64, n), FixedW: make([]float64, n)}
			for _, r := range rules {
				oc.WorkSeg = append(oc.WorkSeg, workSeg(r))
			}
			oc.Roof = rooflineKernels(g, step, i, bwdIDs[i], bwdSlot[i], tail[i], rules, oc.WorkSeg, m, n)
			e.Classes = append(e.Classes, oc)
		}
		oc := &e.Classes[ci]
		oc.Ops = append(oc.Ops, op.ID)
		e.classOf[i] = ci
		fw, _ := g.Work(op.ID)
		works := append([]ir.Work{{Class: fw.Class, FLOPs: fw.FLOPs, Bytes: fw.Bytes}}, bwd[i]...)
		for d := 0; d < n; d++ {
			for k, w := range works {
				t := m.ComputeTime(d, w)
				inTail := k > len(bwd[i])-tail[i]
				fx := m.FixedTime(d, w)
				if k > 0 && bwdSlot[i][k-1] >= 0 {
					a := oc.accumulation(bwdSlot[i][k-1], n)
					a.TimeB[d] += t
					a.FixedB[d] += fx
					if inTail {
						a.TimeW[d] += t
						a.FixedW[d] += fx
					}
					continue
				}
				oc.Time[d] += t
				oc.Fixed[d] += fx
				switch {
				case k == 0:
					oc.TimeF[d] += t
					oc.FixedF[d] += fx
				case inTail:
					oc.TimeW[d] += t
					oc.TimeB[d] += t
					oc.FixedW[d] += fx
					oc.FixedB[d] += fx
				default:
					oc.TimeB[d] += t
					oc.FixedB[d] += fx
				}
			}
			for _, slot := range starts[op.ID] {
				oc.accumulation(slot, n).TimeS[d] += sumAdd[op.Inputs[slot]][d]
			}
		}
	}
	e.pruneRooflines()
	// Tensor classes: leaves by their place in the layers and shape,
	// computed tensors by their producer's class and output — and both by
	// the op classes and slots that read them, so that every instance of
	// a class needs the same layouts (the last layer's output, read by the
	// head rather than by another layer, is a class of its own).
	readers := make([][][2]int, len(g.Tensors))
	for i := range g.Ops {
		for slot, t := range g.Ops[i].Inputs {
			if cs := [2]int{e.classOf[i], slot}; !slices.Contains(readers[t], cs) {
				readers[t] = append(readers[t], cs)
			}
		}
	}
	readKey := func(t ir.TensorID) string {
		rs := slices.Clone(readers[t])
		slices.SortFunc(rs, func(a, b [2]int) int { return cmp.Or(a[0]-b[0], a[1]-b[1]) })
		return fmt.Sprint(rs)
	}
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if t.Kind.IsLeaf() {
			e.tclassOf[i] = addTensor(t, "leaf:"+leafKey(t.ID)+t.Shape.String()+t.DType.String()+readKey(t.ID), -1, -1)
		}
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		ci := e.classOf[i]
		for j, t := range op.Outputs {
			tc := addTensor(&g.Tensors[t], fmt.Sprintf("out:%d:%d:%s", ci, j, readKey(t)), ci, j)
			e.tclassOf[t] = tc
			if savedFor[t][op.ID] {
				e.Tensors[tc].ProducerSaves = true
			}
		}
	}
	// Consumers, from every instance (a tied op may read different tensor
	// classes in different layers: layer 0 reads the embedding's output).
	for i := range g.Ops {
		for slot, t := range g.Ops[i].Inputs {
			tc := &e.Tensors[e.tclassOf[t]]
			cs := [2]int{e.classOf[i], slot}
			saves := savedFor[t][g.Ops[i].ID]
			k := slices.Index(tc.Consumers, cs)
			if k < 0 {
				tc.Consumers = append(tc.Consumers, cs)
				tc.ConsumerSaves = append(tc.ConsumerSaves, saves)
			} else {
				tc.ConsumerSaves[k] = tc.ConsumerSaves[k] || saves
			}
		}
	}
	// Leaf layouts, parameter updates and sums' adds.
	for ti := range e.Tensors {
		tc := &e.Tensors[ti]
		for _, t := range tc.Tensors {
			if a := sumAdd[t]; a != nil {
				if tc.SumAdd == nil {
					tc.SumAdd = make([]float64, n)
				}
				for d := range n {
					tc.SumAdd[d] += a[d] / float64(len(tc.Tensors))
				}
			}
		}
		tc.PadWhole = make([]float64, n)
		for d := range n {
			tc.PadWhole[d] = m.ComputeTime(d, ir.Work{Class: ir.ClassDataMovement, Bytes: tc.Bytes})
		}
		if 2*float64(len(tc.Tensors))*slices.Max(tc.PadWhole) < padNegligible {
			clear(tc.PadWhole)
		}
		if tc.Producer >= 0 {
			continue
		}
		tc.LeafLayouts = []spmd.Layout{spmd.I}
		for d := range tc.Shape {
			for s := range segs {
				if l := spmd.G(d, s); spmd.Fits(l, tc.Shape, segs) {
					tc.LeafLayouts = append(tc.LeafLayouts, l)
				}
			}
		}
		if tc.Kind == ir.Param {
			tc.Update, tc.UpdateFixed = make([]float64, n), make([]float64, n)
			w, ok := update[tc.Tensors[0]]
			if !ok {
				return nil, fmt.Errorf("parameter %s has no update in the training step", g.Tensors[tc.Tensors[0]].Name)
			}
			for d := 0; d < n; d++ {
				tc.Update[d] = float64(len(tc.Tensors)) * m.ComputeTime(d, w)
				tc.UpdateFixed[d] = float64(len(tc.Tensors)) * m.FixedTime(d, w)
			}
		}
	}
	if g.Loss == ir.NoTensor {
		return nil, fmt.Errorf("graph %s has no loss", g.Name)
	}
	// Every program ends with the loss as Reduce (each device's partial
	// loss; backward seeds every device with 1). Without a rule of the
	// loss's op that leaves a partial sum, no choice is valid: say so now
	// rather than hand the solver an infeasible model.
	if lc := &e.Classes[e.LossClass()]; !slices.ContainsFunc(lc.Rules, func(r spmd.Rule) bool { return r.Out[0] == spmd.R }) {
		op := &g.Ops[lc.Ops[0]]
		return nil, fmt.Errorf("the loss %q (op %q, %s) cannot end as Reduce: none of its %d sharding rules over the segments %s leaves a partial sum (split its input's first dimension by a segment)",
			g.Tensors[g.Loss].Name, op.Name, op.Kind, len(lc.Rules), SegmentNames(segs))
	}
	if err := e.buildBlocks(); err != nil {
		return nil, err
	}
	if e.a2a, err = m.AllToAllTerms(e.group()); err != nil {
		return nil, err
	}
	// Every class's layouts and collective coefficients, computed now so
	// that an Encoding is read-only once built: Evaluate may run on
	// several goroutines.
	e.layouts = make([][]spmd.Layout, len(e.Tensors))
	e.coll = map[collKey]Coll{}
	for ti := range e.Tensors {
		e.layouts[ti] = e.computeLayouts(ti)
		tc := &e.Tensors[ti]
		for _, l := range e.layouts[ti] {
			if l.Kind == spmd.Gather || l == spmd.I {
				c, err := e.computeColl(tc, l)
				if err != nil {
					return nil, fmt.Errorf("pricing the collectives of tensor %s in layout %v: %w", tc.Name, l, err)
				}
				e.coll[e.collKeyOf(tc, l)] = c
			}
		}
	}
	if !opt.NoPrune {
		e.pruneMethods()
	}
	return e, nil
}

// SegmentNames lists segments for messages: "[batch(32) heads(12)]".
func SegmentNames(segs []spmd.Segment) string {
	names := make([]string, len(segs))
	for i, s := range segs {
		names[i] = fmt.Sprintf("%s(%d)", s.Name, s.Units)
	}
	return "[" + strings.Join(names, " ") + "]"
}

// workSeg: the segment of the first Gather layout among a rule's operands.
func workSeg(r spmd.Rule) int {
	for _, ls := range [][]spmd.Layout{r.Out, r.In} {
		for _, l := range ls {
			if l.Kind == spmd.Gather {
				return l.Seg
			}
		}
	}
	return -1
}

// LossClass is the op class producing the loss.
func (e *Encoding) LossClass() int { return e.classOf[e.G.Tensors[e.G.Loss].Producer] }

// OpClassOf and TensorClassOf expose the tying.
func (e *Encoding) OpClassOf(op ir.OpID) int        { return e.classOf[op] }
func (e *Encoding) TensorClassOf(t ir.TensorID) int { return e.tclassOf[t] }

// Model is the cost model the encoding prices with.
func (e *Encoding) Model() *cost.Model { return e.model }

// group is every device, in order.
func (e *Encoding) group() []int {
	g := make([]int, e.N)
	for i := range g {
		g[i] = i
	}
	return g
}

// affine fits a collective's time as a + b·x over x ∈ [0, xmax] from its
// two ends: exact for one algorithm's alpha-beta formula on one link class.
func affine(f func(x float64) float64, xmax float64) (a, b float64) {
	a = f(0)
	if xmax <= 0 {
		return a, 0
	}
	return a, (f(xmax) - a) / xmax
}

// Coll holds the coefficients of one tensor class's collectives.
type Coll struct {
	// Padded all-gather / reduce-scatter of a Gather(·, s) layout: time =
	// A + B·maxLength (in units of segment s).
	PadA, PadB [2]float64 // [0] all-gather, [1] reduce-scatter
	// Grouped: time = GA·(non-empty pieces) + GB·Units.
	GrpA, GrpB [2]float64
	// AllReduce of the whole tensor.
	AllReduce float64
}

// collCoeffs prices tensor class tc's collectives for a Gather layout on
// segment s (dim d).
func (e *Encoding) collCoeffs(tc *TensorClass, l spmd.Layout) Coll {
	if c, ok := e.coll[e.collKeyOf(tc, l)]; ok {
		return c
	}
	// Not among the layouts Encode priced: priced now, unkept (the
	// encoding is read-only once built). Encode priced this class's
	// collectives over the same group with no more bytes, so the cost
	// model cannot refuse these calls but for a bug.
	c, err := e.computeColl(tc, l)
	if err != nil {
		panic(fmt.Sprintf("encode: internal: tensor class %s in layout %v, priced after Encode: %v", tc.Name, l, err))
	}
	return c
}

// collKeyOf keys tensor class tc's collectives in layout l (every
// non-Gather layout's as Identity's).
func (e *Encoding) collKeyOf(tc *TensorClass, l spmd.Layout) collKey {
	k := collKey{e.tclassOf[tc.Tensors[0]], l}
	if l.Kind != spmd.Gather {
		k.l = spmd.I
	}
	return k
}

// computeColl prices tensor class tc's collectives in layout l; an error
// is a call the cost model refuses, named with the collective and its
// bytes.
func (e *Encoding) computeColl(tc *TensorClass, l spmd.Layout) (Coll, error) {
	var c Coll
	grp := e.group()
	m := e.model
	// calls keep the first error: the coefficients are then refused
	// whole, not fitted to a collective priced at 0.
	var callErr error
	price := func(call cost.Call, algoKind cost.Collective) float64 {
		if callErr != nil {
			return 0
		}
		algo, err := e.algorithm(algoKind, tc.Bytes)
		if err != nil {
			callErr = err
			return 0
		}
		call.Group, call.Algorithm = grp, algo
		t, err := m.CollectiveTime(call)
		if err != nil {
			callErr = fmt.Errorf("%s of %g bytes per rank (%s): %w", call.Kind, call.Bytes[0], algo, err)
		}
		return t
	}
	same := func(bytes float64) []float64 {
		b := make([]float64, e.N)
		for i := range b {
			b[i] = bytes
		}
		return b
	}
	evenCall := func(kind cost.Collective, per float64) float64 {
		return price(cost.Call{Kind: kind, Bytes: same(per)}, kind)
	}
	c.AllReduce = evenCall(cost.AllReduce, tc.Bytes)
	if l.Kind != spmd.Gather {
		return c, callErr
	}
	seg := &e.Segs[l.Seg]
	unitBytes := tc.Bytes / float64(seg.Units)
	for k, kind := range []cost.Collective{cost.AllGather, cost.ReduceScatter} {
		// Padded: every piece is the largest, maxLen units.
		c.PadA[k], c.PadB[k] = affine(func(maxLen float64) float64 { return evenCall(kind, maxLen*unitBytes) }, float64(seg.Units))
		// Grouped: one broadcast (reduce) per non-empty piece: latency per
		// call plus the bytes of every piece.
		bc := cost.Broadcast
		if kind == cost.ReduceScatter {
			bc = cost.Reduce
		}
		one := func(bytes float64) float64 {
			// Routed as the collective it stands in for is.
			return price(cost.Call{Kind: bc, Bytes: same(bytes)}, kind)
		}
		a, slope := affine(one, tc.Bytes)
		c.GrpA[k], c.GrpB[k] = a, slope*unitBytes
	}
	if callErr != nil {
		return Coll{}, callErr
	}
	return c, nil
}

// algorithm fixes ring or hierarchical per collective kind and size, so
// every coefficient comes from one affine formula.
func (e *Encoding) algorithm(kind cost.Collective, bytes float64) (cost.Algorithm, error) {
	b := make([]float64, e.N)
	for i := range b {
		b[i] = bytes / float64(e.N)
	}
	if kind == cost.AllReduce {
		for i := range b {
			b[i] = bytes
		}
	}
	est, err := e.model.Collective(cost.Call{Kind: kind, Group: e.group(), Bytes: b})
	if err != nil {
		return "", fmt.Errorf("choosing the %s algorithm for %g bytes: %w", kind, bytes, err)
	}
	return est.Algorithm, nil
}

// Choice is one point of the search space.
type Choice struct {
	Rule    []int    // per op class: index into its Rules
	Leaf    []int    // per tensor class: index into LeafLayouts (leaves only)
	Grouped [][]bool // per tensor class, per layout index: uneven collectives use grouped calls (ignored where the encoding fixed the method, prune.go)
	// AllToAll, per tensor class (nil: none), makes the Gathers its
	// consumers read from the Gather it is produced in by one all-to-all
	// each rather than through Identity (an all-gather and free slices).
	// It applies only where that is possible (see allToAll) and is
	// ignored elsewhere.
	AllToAll []bool
	Lengths  [][]int // per segment, per device
}

// Clone is a deep copy of c.
func (c *Choice) Clone() *Choice {
	out := &Choice{Rule: slices.Clone(c.Rule), Leaf: slices.Clone(c.Leaf), AllToAll: slices.Clone(c.AllToAll)}
	if c.Grouped != nil {
		out.Grouped = make([][]bool, len(c.Grouped))
		for i, g := range c.Grouped {
			out.Grouped[i] = slices.Clone(g)
		}
	}
	out.Lengths = make([][]int, len(c.Lengths))
	for i, l := range c.Lengths {
		out.Lengths[i] = slices.Clone(l)
	}
	return out
}

// FlipMethod switches the method that makes layout qi (an index into
// Layouts(ti)) of tensor class ti between padded and grouped, making room
// in ch.Grouped as needed. Flipping twice restores ch. A method pruning
// fixed (prune.go) ignores the flag: MethodApplies says so.
func (e *Encoding) FlipMethod(ch *Choice, ti, qi int) {
	if ch.Grouped == nil {
		ch.Grouped = make([][]bool, len(e.Tensors))
	}
	if ch.Grouped[ti] == nil {
		ch.Grouped[ti] = make([]bool, len(e.Layouts(ti)))
	}
	ch.Grouped[ti][qi] = !ch.Grouped[ti][qi]
}

// Breakdown is Evaluate's account of a Choice.
type Breakdown struct {
	Seconds float64
	Compute []float64 // per device
	Comm    float64
	Memory  []float64 // per device, bytes
}

// share is device d's fraction of segment s (1 for −1).
func share(lengths [][]int, segs []spmd.Segment, s, d int) float64 {
	if s < 0 {
		return 1
	}
	return float64(lengths[s][d]) / float64(segs[s].Units)
}

// ErrInfeasibleChoice marks a choice that is not a valid program.
var ErrInfeasibleChoice = fmt.Errorf("infeasible choice")

// Layouts are the layouts a tensor class can take, numbered by their index
// here: its leaf layouts, or every layout its producer's rules and
// consumers' rules use.
func (e *Encoding) Layouts(tc int) []spmd.Layout {
	return e.layouts[tc]
}

func (e *Encoding) computeLayouts(tc int) []spmd.Layout {
	seen := map[spmd.Layout]bool{}
	var out []spmd.Layout
	add := func(l spmd.Layout) {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	t := &e.Tensors[tc]
	add(spmd.I)
	if t.Producer < 0 {
		for _, l := range t.LeafLayouts {
			add(l)
		}
	} else {
		for _, r := range e.Classes[t.Producer].Rules {
			add(r.Out[t.OutIdx])
		}
	}
	for _, cs := range t.Consumers {
		for _, r := range e.Classes[cs[0]].Rules {
			add(r.In[cs[1]])
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Have is the layout tensor class tc is produced in under ch.
func (e *Encoding) Have(ch *Choice, tc int) spmd.Layout { return e.have(ch, tc) }

func (e *Encoding) have(ch *Choice, tc int) spmd.Layout {
	t := &e.Tensors[tc]
	if t.Producer < 0 {
		return t.LeafLayouts[ch.Leaf[tc]]
	}
	return e.Classes[t.Producer].Rules[ch.Rule[t.Producer]].Out[t.OutIdx]
}

// Needs is the set of layouts tc's consumers read under ch, closed under
// the canonical conversions: a Gather needed from a different Gather goes
// through Identity, unless the choice makes it by all-to-all.
func (e *Encoding) Needs(ch *Choice, tc int) spmd.LayoutSet {
	return e.appendNeeds(nil, ch, tc)
}

// appendNeeds appends Needs(ch, tc) to dst[:0], reusing its memory.
func (e *Encoding) appendNeeds(dst spmd.LayoutSet, ch *Choice, tc int) spmd.LayoutSet {
	need := dst[:0]
	for _, cs := range e.Tensors[tc].Consumers {
		need = need.Add(e.Classes[cs[0]].Rules[ch.Rule[cs[0]]].In[cs[1]])
	}
	if h := e.have(ch, tc); h.Kind == spmd.Gather && !e.allToAll(ch, tc, h, need) {
		for _, q := range need {
			if q.Kind == spmd.Gather && q != h {
				return need.Add(spmd.I)
			}
		}
	}
	return need
}

// allToAll reports whether tensor class tc, made in h and read in the
// layouts read, makes its other Gathers by all-to-all under ch: the choice
// asks for it, h is a Gather, no consumer reads Identity (which would make
// every Gather a free slice), every other Gather read cuts a different
// dimension (all-to-all moves the cut from one dimension to another), at
// least one is read, and the tensor is floating-point.
func (e *Encoding) allToAll(ch *Choice, tc int, h spmd.Layout, read spmd.LayoutSet) bool {
	return ch.AllToAll != nil && ch.AllToAll[tc] && e.allToAllPossible(tc, h, read)
}

// AllToAllApplies reports whether setting Choice.AllToAll[tc] would change
// how tensor class tc's layouts are made under ch (the local search tries
// the flag only there).
func (e *Encoding) AllToAllApplies(ch *Choice, tc int) bool {
	var read spmd.LayoutSet
	for _, cs := range e.Tensors[tc].Consumers {
		read = read.Add(e.Classes[cs[0]].Rules[ch.Rule[cs[0]]].In[cs[1]])
	}
	return e.allToAllPossible(tc, e.have(ch, tc), read)
}

// allToAllCandidate reports whether the encoding offers all-to-all for
// tensors of this class: floating-point activations. Integers cross no
// collective; a leaf can be fed in the layout its consumers read, which
// needs no conversion at all, so all-to-alls of leaves would add many
// choices that rarely pay (BERT-MoE on paper-8: 374 of the 1,338
// conversion pairs, each columns and rows of the MILP).
func (t *TensorClass) allToAllCandidate() bool { return !t.Integer && t.Producer >= 0 }

// allToAllPossible is allToAll without the choice's flag.
func (e *Encoding) allToAllPossible(tc int, h spmd.Layout, read spmd.LayoutSet) bool {
	if h.Kind != spmd.Gather || e.opt.NoAllToAll || !e.Tensors[tc].allToAllCandidate() {
		return false
	}
	some := false
	for _, q := range read {
		switch {
		case q == spmd.I:
			return false
		case q.Kind == spmd.Gather && q != h:
			if q.Dim == h.Dim {
				return false
			}
			some = true
		}
	}
	return some
}

// allToAllLeast is a lower bound on allToAllSeconds of a tensor of class
// t over every split of its bytes B among the devices: α plus, for each
// kind of term of cost.AllToAllTerms, B/Σ 1/k — the maximum of k_i·b_i
// under Σ b_i = B is least when every k_i·b_i is equal — or 0 when some
// term has k = 0 (a device alone on its node, which could hold it all).
func (e *Encoding) allToAllLeast(t *TensorClass) float64 {
	least := func(ks []float64) float64 {
		inv := 0.0
		for _, k := range ks {
			if k <= 0 {
				return 0
			}
			inv += 1 / k
		}
		if inv == 0 {
			return 0
		}
		return t.Bytes / inv
	}
	return e.a2a.Alpha + max(least(e.a2a.PerRank), least(e.a2a.PerNode))
}

// usesAllToAll reports whether tensor class tc makes layouts by all-to-all
// under ch: where Choice.AllToAll applies, not merely where it is set.
func (e *Encoding) usesAllToAll(ch *Choice, tc int) bool {
	return e.allToAll(ch, tc, e.have(ch, tc), e.Needs(ch, tc))
}

// allToAllSeconds is the time of one all-to-all of a tensor of class t
// held in Gather layout l under lengths: every device sends what it holds
// of the tensor (bytes in proportion to its length of l's segment).
func (e *Encoding) allToAllSeconds(t *TensorClass, l spmd.Layout, lengths [][]int) float64 {
	ls, U := lengths[l.Seg], float64(e.Segs[l.Seg].Units)
	worst := 0.0
	for r, k := range e.a2a.PerRank {
		worst = max(worst, k*t.Bytes*float64(ls[r])/U)
	}
	for j, k := range e.a2a.PerNode {
		n := 0
		for _, r := range e.a2a.Nodes[j] {
			n += ls[r]
		}
		worst = max(worst, k*t.Bytes*float64(n)/U)
	}
	return e.a2a.Alpha + worst
}

// pricedAlike reports whether devices a and b are of one type and hold
// the same length of every segment under ch, so they price the same.
func (e *Encoding) pricedAlike(ch *Choice, a, b int) bool {
	if e.hardware[a] != e.hardware[b] {
		return false
	}
	for _, ls := range ch.Lengths {
		if ls[a] != ls[b] {
			return false
		}
	}
	return true
}

// maxLen and nonEmpty summarise a segment's lengths.
func maxLen(ls []int) int {
	m := 0
	for _, l := range ls {
		m = max(m, l)
	}
	return m
}

func nonEmpty(ls []int) int {
	n := 0
	for _, l := range ls {
		if l > 0 {
			n++
		}
	}
	return n
}

// commSeconds is one tensor's communication: Forward its layout changes,
// Adjoint their adjoints in backward (paid when the tensor needs a
// gradient). Every collective's adjoint costs what it does, except an
// all-to-all's, which exchanges the other layout's pieces.
type commSeconds struct{ Forward, Adjoint float64 }

// tensorComm is the communication of one tensor of class ti under ch, and
// whether a Reduce tensor reaches its Gather layouts through Identity
// (all-reduce, then free slices) rather than by reduce-scatters.
//
//	have Identity: Gather by a free slice; Reduce impossible
//	have Gather:   Identity by all-gather; another Gather through Identity,
//	               or by all-to-all when the choice says so (allToAll);
//	               Reduce by a free pad
//	have Reduce:   Identity by all-reduce; Gathers by reduce-scatter each,
//	               or through Identity when Identity is needed anyway or,
//	               for a tensor without a gradient or whose pads cost
//	               nothing, the all-reduce costs less than the
//	               reduce-scatters
func (e *Encoding) tensorComm(ch *Choice, ti int) (sec commSeconds, viaIdentity bool, err error) {
	return e.tensorCommFor(ch, ti, e.have(ch, ti), e.Needs(ch, ti))
}

// tensorCommFor is tensorComm given the layout h tensor class ti is made
// in and the layouts it is read in (Needs).
func (e *Encoding) tensorCommFor(ch *Choice, ti int, h spmd.Layout, need spmd.LayoutSet) (sec commSeconds, viaIdentity bool, err error) {
	t := &e.Tensors[ti]
	if t.Integer && h.Kind != spmd.Identity {
		for _, q := range need {
			if q != h {
				return sec, false, fmt.Errorf("%w: integer tensor %s is %s but a consumer needs %s (no collective moves integers)", ErrInfeasibleChoice, t.Name, h, q)
			}
		}
	}
	same := func(s float64) commSeconds { return commSeconds{s, s} }
	switch h.Kind {
	case spmd.Identity:
		if need.Has(spmd.R) {
			return sec, false, fmt.Errorf("%w: %s is Identity but a consumer needs Reduce", ErrInfeasibleChoice, t.Name)
		}
		return sec, false, nil
	case spmd.Gather:
		if need.Has(spmd.I) {
			return same(e.gatherCost(ch, ti, h, spmd.I, 0)), false, nil
		}
		if e.allToAll(ch, ti, h, need) {
			for _, q := range need {
				if q.Kind == spmd.Gather && q != h {
					sec.Forward += e.allToAllSeconds(t, h, ch.Lengths)
					sec.Adjoint += e.allToAllSeconds(t, q, ch.Lengths)
				}
			}
		}
		return sec, false, nil
	}
	ar := e.collCoeffs(t, spmd.I).AllReduce
	if need.Has(spmd.I) {
		return same(ar), true, nil
	}
	rs, gathers := 0.0, 0
	for _, q := range e.Layouts(ti) {
		if q.Kind == spmd.Gather && need.Has(q) {
			rs += e.gatherCost(ch, ti, q, q, 1)
			gathers++
		}
	}
	// Through Identity only where that cannot add work the all-reduce's
	// price leaves out: with a gradient, each slice's adjoint is a pad
	// (padTimes), compute that the stream's saving need not repay (the
	// MILP's choice then, padRows).
	if gathers > 0 && ar < rs && !(t.ReqGrad && t.padsCost()) {
		return same(ar), true, nil
	}
	return same(rs), false, nil
}

// padsCost reports whether the class's pads are priced (padNegligible).
func (t *TensorClass) padsCost() bool { return slices.Max(t.PadWhole) > 0 }

// padNegligible is the least a tensor class's pad can take (seconds, every
// instance read and written whole) for padTimes to count it: a
// nanosecond, as for aheadNegligible. A real model's pads take
// microseconds; the tiny models' take picoseconds, and their rows, with
// coefficients of 1e-5 of the MILP's unit, had CBC prove "optimal" plans
// up to 0.04% above the exhaustive test's optimum (two of its 200 cases).
const padNegligible = 1e-9

// padTimes is the compute one tensor of class ti spends in pads on device
// d under ch, made in h, read in need, and (via) a Reduce made Identity
// by all-reduce: fwd, the pad that makes Reduce from a Gather; bwd, with
// a gradient, the pads that are the adjoints of its dynamic slices —
// every Gather read other than h cut from an Identity copy. The slice is
// a view and costs nothing, but its adjoint writes the whole tensor: on
// three L4s, a VGG19 plan gathered fc2's weight and sliced it into
// another Gather, and its 0.37 ms pad (with 0.21 ms of others) put the
// planner 4.6% under the simulator.
func (e *Encoding) padTimes(ch *Choice, ti, d int, h spmd.Layout, need spmd.LayoutSet, via bool) (fwd, bwd float64) {
	t := &e.Tensors[ti]
	whole := t.PadWhole[d]
	if whole == 0 {
		return 0, 0
	}
	if h.Kind == spmd.Gather && need.Has(spmd.R) {
		fwd = whole * (1 + share(ch.Lengths, e.Segs, h.Seg, d))
	}
	if t.ReqGrad && (h.Kind == spmd.Identity || need.Has(spmd.I) || via) {
		for _, q := range need {
			if q.Kind == spmd.Gather && q != h {
				bwd += whole * (1 + share(ch.Lengths, e.Segs, q.Seg, d))
			}
		}
	}
	return fwd, bwd
}

// hasCollective reports whether tensor class ti's layout changes under ch
// take a collective (all-gather, all-to-all, all-reduce or reduce-scatter).
func (e *Encoding) hasCollective(ch *Choice, ti int) bool {
	h := e.have(ch, ti)
	need := e.Needs(ch, ti)
	return e.collectiveBetween(ch, ti, h, need)
}

// collectiveBetween reports whether making the layouts need of tensor
// class ti from have takes a collective.
func (e *Encoding) collectiveBetween(ch *Choice, ti int, have spmd.Layout, need spmd.LayoutSet) bool {
	switch have.Kind {
	case spmd.Gather:
		return need.Has(spmd.I) || e.allToAll(ch, ti, have, need)
	case spmd.Reduce:
		for _, q := range need {
			if q != spmd.R {
				return true
			}
		}
	}
	return false
}

// gatherCost: k = 0 all-gather, 1 reduce-scatter, of Gather layout l,
// making layout target (whose method the choice records).
func (e *Encoding) gatherCost(ch *Choice, ti int, l, target spmd.Layout, k int) float64 {
	c := e.collCoeffs(&e.Tensors[ti], l)
	ls := ch.Lengths[l.Seg]
	if e.grouped(ch, ti, target) {
		return c.GrpA[k]*float64(nonEmpty(ls)) + c.GrpB[k]*float64(e.Segs[l.Seg].Units)
	}
	return c.PadA[k] + c.PadB[k]*float64(maxLen(ls))
}

// ProducedLayouts reports which layout kinds tensor class tc can be
// produced in.
func (e *Encoding) ProducedLayouts(tc int) map[spmd.PropKind]bool {
	t := &e.Tensors[tc]
	out := map[spmd.PropKind]bool{}
	if t.Producer < 0 {
		for _, l := range t.LeafLayouts {
			out[l.Kind] = true
		}
		return out
	}
	for _, r := range e.Classes[t.Producer].Rules {
		out[r.Out[t.OutIdx].Kind] = true
	}
	return out
}

// weightTail counts, per forward op of a training step's first nf ops, how
// many of its last backward ops (in step order) make only parameter
// gradients: their outputs reach no backward op of another forward op,
// only the update (directly or through more of the op's own backward ops).
// The lowered step runs them after the op's input gradients, so a layout
// change's adjoint that waits for those can run beside them.
func weightTail(step *ir.Graph, nf int) []int {
	consumers := make([][]ir.OpID, len(step.Tensors))
	for i := range step.Ops {
		for _, t := range step.Ops[i].Inputs {
			consumers[t] = append(consumers[t], ir.OpID(i))
		}
	}
	// only[o]: op o's results flow to parameter gradients only; ops are in
	// topological order, so a reverse sweep sees every consumer first.
	only := make([]bool, len(step.Ops))
	for i := len(step.Ops) - 1; i >= 0; i-- {
		op := &step.Ops[i]
		if op.Phase != ir.Backward || op.GradOf == ir.NoOp {
			continue
		}
		ok := true
		for _, t := range op.Outputs {
			for _, c := range consumers[t] {
				co := &step.Ops[c]
				if co.Phase == ir.Backward && !(co.GradOf == op.GradOf && only[c]) {
					ok = false
				}
			}
		}
		only[i] = ok
	}
	tail := make([]int, nf)
	done := make([]bool, nf) // a non-tail op of it has been seen, sweeping back
	for i := len(step.Ops) - 1; i >= 0; i-- {
		op := &step.Ops[i]
		if op.Phase != ir.Backward || op.GradOf == ir.NoOp || int(op.GradOf) >= nf || done[op.GradOf] {
			continue
		}
		if only[i] {
			tail[op.GradOf]++
		} else {
			done[op.GradOf] = true
		}
	}
	return tail
}

// SegmentsUsed reports, per segment, whether ch splits anything by it: a
// layout one of its rules reads or makes, the work of one of its rules, or
// a leaf's layout. The lengths of the other segments do not change what ch
// costs.
func (e *Encoding) SegmentsUsed(ch *Choice) []bool {
	used := make([]bool, len(e.Segs))
	mark := func(l spmd.Layout) {
		if s := layoutSeg(l); s >= 0 {
			used[s] = true
		}
	}
	for ci, c := range e.Classes {
		r := c.Rules[ch.Rule[ci]]
		for _, l := range r.In {
			mark(l)
		}
		for _, l := range r.Out {
			mark(l)
		}
		if s := c.WorkSeg[ch.Rule[ci]]; s >= 0 {
			used[s] = true
		}
	}
	for ti, t := range e.Tensors {
		if t.Producer < 0 {
			mark(t.LeafLayouts[ch.Leaf[ti]])
		}
	}
	return used
}
