package encode

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"hap/ir"
	"hap/spmd"
)

// The step-time model: a timeline of blocks, shared by Evaluate and the
// MILP so that both price every choice the same.
//
// Lowering runs each device's step on two in-order streams (see lower and
// sim): compute (forward ops, backward ops in reverse, then the updates)
// and communication (every collective, in program order). A collective
// starts when every device of its group has reached it. A layout change
// of an activation blocks its consumer, in forward and — its adjoint — in
// backward; a parameter's gather is prefetched by the communication
// stream; a replicated parameter's gradient all-reduce (and the adjoint of
// a parameter's gather) blocks nothing until the update, so it overlaps
// the rest of backward. Lowering issues that all-reduce as soon as the
// gradient is complete, right after the backward of the parameter's first
// consumer and the adjoints of that consumer's input layout changes; and
// Decode makes a consumer's leaves' layouts before its activations' (P
// before Fa below, and in backward A before N), since the communication
// stream runs in program order.
//
// The forward ops are cut into blocks, a new block starting at every op
// that is the first consumer of a parameter. With, per device d and block
// b,
//
//	Fc_{d,b}  forward compute + the block's activations' layout changes (blocking)
//	          + the pads that make Reduce from a Gather
//	Fa_b      those layout changes (on the communication stream)
//	P_b       the block's leaves' layout changes (prefetched)
//	B_{d,b}   backward compute + the adjoints of those changes (blocking)
//	          + the pads that are the adjoints of the block's slices
//	A_b       those adjoints (on the communication stream)
//	W_{d,b}   the block's first op's parameter gradients that its backward
//	          makes after its input gradients (a matmul's dW after its dX),
//	          and the pads of its parameters' gradients that follow them
//	N_b       the block's parameters' gradient all-reduces and gather adjoints
//	U_d       the optimizer updates
//
// the step is the chain below (stepTime; syncRows states it for the MILP):
// x_d is where device d has got to, cf and cb where the communication
// stream has.
//
//	forward, b = 0 … K−1:   p = cf + P_b
//	  no collective in b:    x_d = max(x_d, p) + Fc_{d,b};  cf = p
//	  a collective in b:     s = max(p, max_d x_d);  x_d = s + Fc_{d,b};  cf = s + R_b + Fa_b
//	backward, b = K−1 … 0:  (cb = cf)
//	  no blocking adjoint:   x_d += B_{d,b}
//	  a blocking adjoint:    e = max(cb, max_d (x_d + B_{d,b} − A_b − W_{d,b})) + A_b
//	                         x_d = max(e, x_d + B_{d,b} − A_b)
//	  then:                  cb = max(cb, max_d x_d) + N_b
//	T = max_d max(x_d, cb) + U_d
//
// with R_b the forward compute in block b ahead of the reader of its last
// activation that a collective changes (the most any device has to run
// before that reader: 0 when the block's first op reads it).
//
// A block's collectives synchronise every device: the forward's are made
// before the block's first op (the parameter's consumer) reads them, so
// the block starts when the slowest device has ended the one before; the
// backward's adjoints come at the block's end, after its compute, and wait
// for the communication stream to drain what was issued before it — the
// gradient all-reduces of later blocks. Without the synchronisation (each
// device's own sums, maximised at the end) the estimate missed the waits
// for the slowest device (−1.5% on VGG19's synthesized plan) and an
// all-reduce delaying the next blocking adjoint (−1.9% on tp). The
// adjoint needs only the input gradient of the block's first op, so it
// runs beside that op's parameter gradients (W): without that, expert
// parallelism's dispatch all-to-all was priced +2.65% on BERT-MoE.
//
// The devices themselves run the block as if its changes came at its
// start (x_d = s + Fc_{d,b}), but the communication stream makes each at
// its reader: it is busy with the block's last change until R_b + Fa_b
// after the start, and the next block's prefetches queue behind it.
// Without R_b (cf = s + Fa_b) BERT-MoE on two RTX 4090s over 12 GB/s PCIe,
// whose combine reduce-scatter comes after the experts' compute and whose
// stream is busy most of the step, was priced 1.25% under the simulator.

// A leaf read by ops of several blocks — GPT-2's token embedding, which
// its decoder reads again at the end of forward — has its layout change
// made where Decode makes it: at the first reader whose layout needs it,
// not necessarily at the first reader. Its all-gather goes on the
// communication stream in that reader's block, and its adjoint, in
// backward, after that block's backward. (Charged at the first reader,
// GPT-2 on v100-8 with the embedding read in pieces and the decoder's copy
// gathered was priced 3.6% over the simulator: the gather ahead of every
// other at the start of forward, its reduce-scatter after all of backward.)
// Such a leaf's change and adjoint are left out of the fixed terms; the
// timeline adds them at the reader the choice makes first (spreadFirst).

// spreadLeaf is a leaf class read in more than one block.
type spreadLeaf struct {
	class int
	// readers are the (op class, input slot) pairs reading each of the
	// class's tensors, in program order (the same for every tensor);
	// blocks[j] counts, per block, the tensors whose j-th reader is in it.
	readers [][2]int
	blocks  [][]classCount // classCount.class is the block here
}

// block is a run of forward ops in program order.
type block struct {
	// first is the op class of the block's first op.
	first int
	// ops counts the block's op instances per op class; tensors the tensor
	// instances per class whose first consumer is in the block (their
	// layout changes happen there).
	ops, tensors []classCount
	// ahead lists, per activation class with an instance first read in
	// the block by an op other than its first, the op instances per class
	// the block runs before the latest such reader (R_b's candidates).
	ahead []aheadOf
	// inner counts, in a recomputed block, the tensor instances of
	// tensors that its unit makes (a leaf's copies, the activations of
	// the unit's own ops): recomputed, they are held only while the
	// unit's backward runs. The others of tensors (the unit's input)
	// are kept from forward.
	inner []classCount
}

// aheadOf is the forward compute ahead of an activation's reader in a
// block: ops counts op instances per class.
type aheadOf struct {
	class int // the activation's tensor class
	ops   []classCount
	most  float64 // the most it can take: every op at share 1 on the slowest device (s)
}

// aheadNegligible is the least compute ahead of a reader (at its most,
// seconds) that R_b counts: a nanosecond, far below anything the
// simulator resolves on a real model (a kernel takes microseconds). The
// tiny models' ops take tens of picoseconds, and their rows, with
// coefficients of 1e-4 of the MILP's 0.1 µs unit, let CBC's cuts prove a
// wrong optimum (one of the exhaustive test's 200 cases, 0.024% above
// the enumerated one); left out, those models' encodings are what they
// were.
const aheadNegligible = 1e-9

type classCount struct{ class, n int }

// buildBlocks cuts g's ops into blocks at each parameter's first consumer.
func (e *Encoding) buildBlocks() error {
	g := e.G
	first := make([]int, len(g.Tensors)) // first consuming op, −1 if none
	for i := range first {
		first[i] = -1
	}
	for i := range g.Ops {
		for _, t := range g.Ops[i].Inputs {
			if first[t] < 0 {
				first[t] = i
			}
		}
	}
	starts := map[int]bool{0: true}
	for i := range g.Tensors {
		if g.Tensors[i].Kind == ir.Param && first[i] >= 0 {
			starts[first[i]] = true
		}
	}
	blockOf := make([]int, len(g.Ops))
	b := -1
	for i := range g.Ops {
		if starts[i] {
			b++
		}
		blockOf[i] = b
	}
	ops := make([]map[int]int, b+1)
	firsts := make([]int, b+1)
	for i := len(g.Ops) - 1; i >= 0; i-- {
		firsts[blockOf[i]] = e.classOf[i]
	}
	tensors := make([]map[int]int, b+1)
	for k := range ops {
		ops[k], tensors[k] = map[int]int{}, map[int]int{}
	}
	for i := range g.Ops {
		ops[blockOf[i]][e.classOf[i]]++
	}
	for i := range g.Tensors {
		if first[i] >= 0 {
			tensors[blockOf[first[i]]][e.tclassOf[i]]++
		}
	}
	// ahead[k][t]: the ops of block k before the latest first reader of
	// an instance of activation class t (a later reader's ops include an
	// earlier one's, so the latest is the most on every device).
	ahead := make([]map[int]map[int]int, b+1)
	sofar := map[int]int{}
	for i := range g.Ops {
		k := blockOf[i]
		if starts[i] {
			sofar = map[int]int{}
		}
		for _, t := range g.Ops[i].Inputs {
			if first[t] != i || g.Tensors[t].Producer == ir.NoOp || len(sofar) == 0 {
				continue
			}
			if ahead[k] == nil {
				ahead[k] = map[int]map[int]int{}
			}
			ahead[k][e.tclassOf[t]] = maps.Clone(sofar)
		}
		sofar[e.classOf[i]]++
	}
	e.blocks = make([]block, b+1)
	if err := e.setRecompute(); err != nil {
		return err
	}
	if e.unitOfBlock != nil {
		inner := make([]map[int]int, b+1)
		for i := range g.Tensors {
			if first[i] < 0 {
				continue
			}
			k := blockOf[first[i]]
			u := e.unitOfBlock[k]
			if u < 0 {
				continue
			}
			if prod := g.Tensors[i].Producer; prod == ir.NoOp || e.unitOfBlock[blockOf[prod]] == u {
				if inner[k] == nil {
					inner[k] = map[int]int{}
				}
				inner[k][e.tclassOf[i]]++
			}
		}
		for k := range e.blocks {
			e.blocks[k].inner = counts(inner[k])
		}
	}
	for k := range e.blocks {
		e.blocks[k].first, e.blocks[k].ops, e.blocks[k].tensors = firsts[k], counts(ops[k]), counts(tensors[k])
		for _, t := range slices.Sorted(maps.Keys(ahead[k])) {
			ah := aheadOf{class: t, ops: counts(ahead[k][t])}
			for _, oc := range ah.ops {
				cl := &e.Classes[oc.class]
				ah.most += float64(oc.n) * slices.Max(cl.TimeF) / float64(len(cl.Ops))
			}
			if ah.most >= aheadNegligible {
				e.blocks[k].ahead = append(e.blocks[k].ahead, ah)
			}
		}
	}
	e.findSpread(blockOf)
	e.terms = e.listTerms()
	e.flat = e.flatTerms()
	e.memFlat = e.memoryTerms()
	return nil
}

// findSpread lists the leaf classes read in more than one block whose
// tensors all have the same readers (op class and slot, in program order);
// a class whose tied tensors differ in their readers keeps its change at
// the first reader.
func (e *Encoding) findSpread(blockOf []int) {
	g := e.G
	readers := make([][][2]int, len(g.Tensors)) // per tensor: (op, slot)
	for i := range g.Ops {
		for slot, t := range g.Ops[i].Inputs {
			readers[t] = append(readers[t], [2]int{i, slot})
		}
	}
	e.spreadOf = make([]int, len(e.Tensors))
	for ti := range e.Tensors {
		e.spreadOf[ti] = -1
		tc := &e.Tensors[ti]
		if tc.Producer >= 0 || len(tc.Tensors) == 0 {
			continue
		}
		var seq [][2]int
		spread, same := false, true
		blocks := []map[int]int{}
		for n, t := range tc.Tensors {
			rs := readers[t]
			if n == 0 {
				for _, r := range rs {
					seq = append(seq, [2]int{e.classOf[r[0]], r[1]})
					blocks = append(blocks, map[int]int{})
				}
			}
			if len(rs) != len(seq) {
				same = false
				break
			}
			for j, r := range rs {
				if seq[j] != [2]int{e.classOf[r[0]], r[1]} {
					same = false
				}
				blocks[j][blockOf[r[0]]]++
				spread = spread || blockOf[r[0]] != blockOf[rs[0][0]]
			}
		}
		if !spread || !same {
			continue
		}
		sl := spreadLeaf{class: ti, readers: seq}
		for _, m := range blocks {
			sl.blocks = append(sl.blocks, counts(m))
		}
		e.spreadOf[ti] = len(e.spread)
		e.spread = append(e.spread, sl)
	}
}

// spreadFirst is, per spread leaf, the reader (index into readers) that
// makes its layout change under ch — the first whose layout is neither
// the leaf's own nor Reduce (a free pad) — or −1 when none does. Decode
// makes the change there: an all-gather to Identity, from which every
// other layout is a free slice. first has one entry per spread leaf.
func (e *Encoding) spreadFirst(ch *Choice, first []int) {
	for s := range e.spread {
		sl := &e.spread[s]
		first[s] = -1
		h := e.have(ch, sl.class)
		if h.Kind != spmd.Gather {
			continue // Identity: every layout is a free slice
		}
		for j, r := range sl.readers {
			if q := e.Classes[r[0]].Rules[ch.Rule[r[0]]].In[r[1]]; q != h && q.Kind != spmd.Reduce {
				first[s] = j
				break
			}
		}
	}
}

// spreadTerms calls visit with the terms spread leaf si adds when reader
// j makes its change: the change (atomComm) prefetched in each block
// holding a j-th reader, its adjoint (atomAdj) among that block's
// non-blocking collectives. stepSeconds and timelineRows both place them
// through it, as blockTerms does the fixed terms.
func (e *Encoding) spreadTerms(si, j int, visit func(k int, b bucket, a atom, n float64)) {
	sl := &e.spread[si]
	for _, bc := range sl.blocks[j] {
		visit(bc.class, bucketP, atomComm, float64(bc.n))
		if e.Tensors[sl.class].ReqGrad {
			visit(bc.class, bucketN, atomAdj, float64(bc.n))
		}
	}
}

// counts lists m's entries in class order (deterministic encodings).
func counts(m map[int]int) []classCount {
	out := make([]classCount, 0, len(m))
	for c, n := range m {
		out = append(out, classCount{c, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].class < out[j].class })
	return out
}

// bucket is where a term of a block falls in the timeline formula.
type bucket int

const (
	bucketFc bucket = iota // forward compute chain (compute + blocking changes)
	bucketFa               // forward activation changes (also on the comm stream)
	bucketP                // leaves' forward changes, prefetched
	bucketB                // backward chain (compute + blocking adjoints)
	bucketA                // blocking adjoints (also on the comm stream)
	bucketN                // non-blocking: parameters' adjoints and gradient all-reduces
	bucketW                // the first op's parameter gradients, which a blocking adjoint overlaps
	numBuckets
)

// atom is a per-instance quantity the terms are multiples of.
type atom int

const (
	atomFwd  atom = iota // an op class's forward seconds
	atomBwd              // an op class's backward seconds
	atomComm             // a tensor class's forward layout change
	atomAdj              // its adjoint in backward
	atomGrad             // a parameter class's gradient all-reduce
	atomW                // an op class's parameter-gradient tail of backward (OpClass.TimeW)
	atomPadF             // a tensor class's forward pads (padTimes), on the device
	atomPadB             // its backward pads, the adjoints of its slices
	atomSum              // its gradient's sum tree beyond its readers' adds (gradsum.go): may be negative
)

// term is n instances of atom (of op or tensor class) in bucket b of
// block k.
type term struct {
	k     int
	b     bucket
	a     atom
	class int
	n     float64
}

// blockTerms calls visit with every term of the timeline. Evaluate's
// bucketSums and the MILP's timelineRows both add these up, so they
// cannot drift apart.
func (e *Encoding) blockTerms(visit func(k int, b bucket, a atom, class int, n float64)) {
	for _, t := range e.terms {
		visit(t.k, t.b, t.a, t.class, t.n)
	}
}

// listTerms lists the timeline's terms, once per encoding (Evaluate sums
// them for every choice it prices).
func (e *Encoding) listTerms() []term {
	var terms []term
	visit := func(k int, b bucket, a atom, class int, n float64) {
		terms = append(terms, term{k, b, a, class, n})
	}
	for k, bl := range e.blocks {
		if e.recomputed(k) {
			e.recomputeTerms(k, visit)
		}
		visit(k, bucketW, atomW, bl.first, 1)
		for _, oc := range bl.ops {
			visit(k, bucketFc, atomFwd, oc.class, float64(oc.n))
			visit(k, bucketB, atomBwd, oc.class, float64(oc.n))
		}
		for _, tc := range bl.tensors {
			n, t := float64(tc.n), &e.Tensors[tc.class]
			spread := e.spreadOf[tc.class] >= 0 // its change and adjoint: spreadFirst
			if t.Producer < 0 {
				if !spread {
					visit(k, bucketP, atomComm, tc.class, n)
				}
			} else {
				visit(k, bucketFc, atomComm, tc.class, n)
				visit(k, bucketFa, atomComm, tc.class, n)
			}
			// A pad runs on the device's compute stream where the change
			// or its adjoint is made.
			visit(k, bucketFc, atomPadF, tc.class, n)
			switch {
			case t.Kind == ir.Param:
				// A parameter's adjoints and gradient all-reduce block
				// nothing until the update. Its pads follow its first
				// reader's weight gradient, the block's tail (W).
				if t.ReqGrad && !spread {
					visit(k, bucketN, atomAdj, tc.class, n)
				}
				visit(k, bucketN, atomGrad, tc.class, n)
				if t.ReqGrad {
					visit(k, bucketB, atomPadB, tc.class, n)
					visit(k, bucketW, atomPadB, tc.class, n)
					visit(k, bucketB, atomSum, tc.class, n)
					visit(k, bucketW, atomSum, tc.class, n)
				}
			case t.ReqGrad:
				// An activation's adjoint blocks the backward.
				visit(k, bucketB, atomAdj, tc.class, n)
				visit(k, bucketA, atomAdj, tc.class, n)
				visit(k, bucketB, atomPadB, tc.class, n)
				visit(k, bucketB, atomSum, tc.class, n)
			}
		}
	}
	return terms
}

// timelineTerms are one device's (or group's) per-instance quantities the
// timeline adds up: forward and backward seconds per op class, forward
// layout-change, adjoint, gradient all-reduce, pad and gradient-sum seconds
// per tensor class, and the total update seconds. The nine per-class slices are
// consecutive pieces of all, in atom order, so that a flatTerm indexes
// them directly.
type timelineTerms struct {
	all             []float64
	fwd, bwd, wtail []float64 // per op class, one instance
	comm, adj, grad []float64 // per tensor class, one instance
	padF, padB, sum []float64 // per tensor class, one instance
	update          float64
}

// newTimelineTerms carves one device's timelineTerms from the arena.
func (e *Encoding) newTimelineTerms(a *floatArena) timelineTerms {
	c, t := len(e.Classes), len(e.Tensors)
	all := a.take(3*c + 6*t)
	return timelineTerms{all: all,
		fwd: all[atomOffset(atomFwd, c, t):][:c], bwd: all[atomOffset(atomBwd, c, t):][:c], wtail: all[atomOffset(atomW, c, t):][:c],
		comm: all[atomOffset(atomComm, c, t):][:t], adj: all[atomOffset(atomAdj, c, t):][:t], grad: all[atomOffset(atomGrad, c, t):][:t],
		padF: all[atomOffset(atomPadF, c, t):][:t], padB: all[atomOffset(atomPadB, c, t):][:t], sum: all[atomOffset(atomSum, c, t):][:t]}
}

// atomOffset is where atom a's per-class values start in
// timelineTerms.all, with c op classes and t tensor classes.
func atomOffset(a atom, c, t int) int {
	switch a {
	case atomFwd:
		return 0
	case atomBwd:
		return c
	case atomW:
		return 2 * c
	case atomComm:
		return 3 * c
	case atomAdj:
		return 3*c + t
	case atomGrad:
		return 3*c + 2*t
	case atomPadF:
		return 3*c + 3*t
	case atomPadB:
		return 3*c + 4*t
	case atomSum:
		return 3*c + 5*t
	}
	panic("encode: unknown timeline atom")
}

// flatTerm is a term as indices: n times timelineTerms.all[src] goes to
// the bucket sums' flat slot dst (bucket·blocks + block).
type flatTerm struct {
	dst, src int32
	n        float64
}

// flatTerms is e.terms as flatTerms, in the same order, so that each
// slot's sum adds the same values in the same order as the terms do.
func (e *Encoding) flatTerms() []flatTerm {
	c, t, nb := len(e.Classes), len(e.Tensors), len(e.blocks)
	out := make([]flatTerm, len(e.terms))
	for i, tm := range e.terms {
		out[i] = flatTerm{dst: int32(int(tm.b)*nb + tm.k), src: int32(atomOffset(tm.a, c, t) + tm.class), n: tm.n}
	}
	return out
}

// bucketSums adds one device's terms up per bucket and block. It is the
// hottest loop of Evaluate (half its time on BERT-MoE), hence the flat
// indices rather than e.terms' (bucket, block, atom, class).
func (e *Encoding) bucketSums(tt *timelineTerms, a *floatArena) [numBuckets][]float64 {
	nb := len(e.blocks)
	flat := a.take(int(numBuckets) * nb)
	vals := tt.all
	for _, t := range e.flat {
		flat[t.dst] += t.n * vals[t.src]
	}
	var terms [numBuckets][]float64
	for i := range terms {
		terms[i] = flat[i*nb : (i+1)*nb : (i+1)*nb]
	}
	return terms
}

// stepTime is the chain above for devices with the given bucketSums and
// update seconds; syncF[b] and syncB[b] say whether block b has a
// collective in forward, a blocking adjoint in backward, and ahead[b] is
// R_b. x, one zero per device, is where each device has got to.
func (e *Encoding) stepTime(sums [][numBuckets][]float64, update []float64, syncF, syncB []bool, ahead, x []float64) float64 {
	cf := 0.0 // where the communication stream has got to
	for k := range e.blocks {
		p := cf + sums[0][bucketP][k]
		if syncF[k] {
			start := p
			for d := range x {
				start = max(start, x[d])
			}
			for d := range x {
				x[d] = start + sums[d][bucketFc][k]
			}
			cf = start + ahead[k] + sums[0][bucketFa][k]
		} else {
			for d := range x {
				x[d] = max(x[d], p) + sums[d][bucketFc][k]
			}
			cf = p
		}
	}
	cb := cf
	for k := len(e.blocks) - 1; k >= 0; k-- {
		if syncB[k] {
			a := sums[0][bucketA][k]
			end := cb
			for d := range x {
				end = max(end, x[d]+sums[d][bucketB][k]-a-sums[d][bucketW][k])
			}
			end += a
			for d := range x {
				x[d] = max(end, x[d]+sums[d][bucketB][k]-a)
			}
		} else {
			for d := range x {
				x[d] += sums[d][bucketB][k]
			}
		}
		issue := cb
		for d := range x {
			issue = max(issue, x[d])
		}
		cb = issue + sums[0][bucketN][k]
	}
	T := 0.0
	for d := range x {
		T = max(T, max(x[d], cb)+update[d])
	}
	return T
}

// stepSeconds is the timeline's step under a choice, given the terms of
// the devices in reps (the others price as one of them), whether each
// tensor class's layout changes take a collective, and memory to work in.
func (e *Encoding) stepSeconds(ch *Choice, coll []bool, terms []timelineTerms, reps []int, a *floatArena, s *timelineScratch) float64 {
	s.sums, s.update = s.sums[:0], s.update[:0]
	for _, d := range reps {
		s.sums = append(s.sums, e.bucketSums(&terms[d], a))
		s.update = append(s.update, terms[d].update)
	}
	s.first = resize(s.first, len(e.spread))
	e.spreadFirst(ch, s.first)
	for si, j := range s.first {
		if j < 0 {
			continue
		}
		cls := e.spread[si].class
		for r, d := range reps {
			e.spreadTerms(si, j, func(k int, b bucket, a atom, n float64) {
				if a == atomComm {
					s.sums[r][b][k] += n * terms[d].comm[cls]
				} else {
					s.sums[r][b][k] += n * terms[d].adj[cls]
				}
			})
		}
	}
	s.sync = resize(s.sync, 2*len(e.blocks))
	clear(s.sync)
	syncF, syncB := s.sync[:len(e.blocks)], s.sync[len(e.blocks):]
	s.ahead = resize(s.ahead, len(e.blocks))
	clear(s.ahead)
	for k, bl := range e.blocks {
		for _, tc := range bl.tensors {
			t := &e.Tensors[tc.class]
			if t.Producer >= 0 && coll[tc.class] {
				syncF[k] = true
				syncB[k] = syncB[k] || t.ReqGrad
			}
		}
		for _, ah := range bl.ahead {
			if !coll[ah.class] {
				continue
			}
			for _, d := range reps {
				r := 0.0
				for _, oc := range ah.ops {
					r += float64(oc.n) * terms[d].fwd[oc.class]
				}
				s.ahead[k] = max(s.ahead[k], r)
			}
		}
	}
	s.x = resize(s.x, len(reps))
	clear(s.x)
	return e.stepTime(s.sums, s.update, syncF, syncB, s.ahead, s.x)
}

// timelineScratch is the memory stepSeconds works in.
type timelineScratch struct {
	sums   [][numBuckets][]float64
	update []float64
	sync   []bool
	ahead  []float64 // R_b
	x      []float64
	first  []int // spreadFirst's
}

// timelineRows adds to the MILP the rows that make T at least the step of
// the timeline above (syncRows). Each per-instance expression gets a column
// of its own (an equality row) so that the rows stay sparse. It returns the
// synchronisation binaries, which a MIP start and Fix must set.
func (e *Encoding) timelineRows(b *milpBuilder) []syncVar {
	T, bigM, f := b.v.T, b.bigM, b.f
	fwdC, bwdC, wC := b.fwdC, b.bwdC, b.wC
	commT, adjT, gradT, update := b.commT, b.adjT, b.gradT, b.update
	padF, padB, sumB := b.padF, b.padB, b.sumB
	spreadComm, spreadAdj, collCols := b.spreadComm, b.spreadAdj, b.collCols
	col, row := b.col, b.row
	inf := math.Inf(1)
	defineFrom := func(lo float64, name string, l lin) int {
		if len(l) == 0 {
			return -1
		}
		c := col(name, lo, inf, false)
		d := lin{c: 1}
		for k, v := range l {
			d.add(k, -v)
		}
		row(name, 0, 0, d)
		return c
	}
	define := func(name string, l lin) int { return defineFrom(0, name, l) }
	cK := make([]int, len(e.Tensors))
	cA := make([]int, len(e.Tensors))
	cG := make([]int, len(e.Tensors))
	for ti := range e.Tensors {
		cK[ti] = define(fmt.Sprintf("comm_%d", ti), commT[ti])
		cA[ti] = cK[ti]
		if !adjT[ti].equal(commT[ti]) {
			cA[ti] = define(fmt.Sprintf("adj_%d", ti), adjT[ti])
		}
		cG[ti] = define(fmt.Sprintf("grad_%d", ti), gradT[ti])
	}
	G, K := len(e.Groups), len(e.blocks)
	st := syncTerms{Fc: make([][]lin, G), B: make([][]lin, G), W: make([][]lin, G), U: make([]lin, G), Ahead: make([][][]lin, G)}
	for g := range e.Groups {
		cF := make([]int, len(e.Classes))
		cB := make([]int, len(e.Classes))
		cW := make([]int, len(e.Classes))
		for ci := range e.Classes {
			cF[ci] = define(fmt.Sprintf("fwd_%d_%d", ci, g), fwdC[ci][g])
			cB[ci] = define(fmt.Sprintf("bwd_%d_%d", ci, g), bwdC[ci][g])
			cW[ci] = define(fmt.Sprintf("wtail_%d_%d", ci, g), wC[ci][g])
		}
		st.U[g] = lin{}
		if c := define(fmt.Sprintf("update_%d", g), update[g]); c >= 0 {
			st.U[g].add(c, 1)
		}
		var terms [numBuckets][]lin
		for i := range terms {
			terms[i] = make([]lin, K)
			for k := range terms[i] {
				terms[i][k] = lin{}
			}
		}
		cPF := make([]int, len(e.Tensors))
		cPB := make([]int, len(e.Tensors))
		cS := make([]int, len(e.Tensors))
		for ti := range e.Tensors {
			cPF[ti] = define(fmt.Sprintf("padf_%d_%d", ti, g), padF[ti][g])
			cPB[ti] = define(fmt.Sprintf("padb_%d_%d", ti, g), padB[ti][g])
			// A sum tree's seconds may be negative; no less than its least
			// (sumTreeLeast), so that a stopped LP's duals prove a bound.
			cS[ti] = defineFrom(-milpTime*e.sumTreeLeast(ti, e.Groups[g][0]), fmt.Sprintf("sum_%d_%d", ti, g), sumB[ti][g])
		}
		columns := [...][]int{atomFwd: cF, atomBwd: cB, atomComm: cK, atomAdj: cA, atomGrad: cG, atomW: cW, atomPadF: cPF, atomPadB: cPB, atomSum: cS}
		e.blockTerms(func(k int, b bucket, a atom, class int, n float64) {
			if c := columns[a][class]; c >= 0 {
				terms[b][k].add(c, n)
			}
		})
		for si := range e.spread {
			for j := range spreadComm[si] {
				e.spreadTerms(si, j, func(k int, b bucket, a atom, n float64) {
					c := spreadComm[si][j]
					if a == atomAdj {
						c = spreadAdj[si][j]
					}
					terms[b][k].add(c, n)
				})
			}
		}
		st.Fc[g], st.B[g], st.W[g] = terms[bucketFc], terms[bucketB], terms[bucketW]
		st.Ahead[g] = make([][]lin, K)
		for k, bl := range e.blocks {
			for _, ah := range bl.ahead {
				l := lin{}
				for _, oc := range ah.ops {
					if c := cF[oc.class]; c >= 0 {
						l.add(c, float64(oc.n))
					}
				}
				st.Ahead[g][k] = append(st.Ahead[g][k], l)
			}
		}
		// The same for every group: communication.
		st.Fa, st.P, st.A, st.N = terms[bucketFa], terms[bucketP], terms[bucketA], terms[bucketN]
	}
	return e.syncRows(T, &st, collCols, bigM, f, col, row)
}

// spreadRows states spreadFirst for the MILP. Per spread leaf and reader
// j: g_j, 1 when reader j's layout needs the change (the leaf is fed in a
// Gather and the reader's rule reads neither it nor Reduce), exact at
// integer points from the leaf's layout and the reader's rule binaries
// (g_j ≥ y_l + x_r − 1 for the pairs that need it, g_j ≤ 2 − y_l − x_r
// for the others); and the change's seconds at reader j,
//
//	c_j ≥ comm − M(1 − g_j) − M Σ_{i<j} g_i
//
// (M bounds comm), which is comm at the first reader that needs the change
// and 0 at the others; the same for the adjoint. It returns the columns,
// per spread leaf and reader (nil for a leaf whose change costs nothing).
//
// With charged (the transport forms, milpForm.spreadRow) one more row per
// leaf, and per adjoint, holds at every integer point:
//
//	Σ_j c_j ≥ comm
//
// since a change some reader needs is charged at the first such reader,
// and where none needs one the leaf is Identity or read as it is held,
// and comm is 0. It cuts off no choice, but without it the LP relaxation
// charges the change nowhere: a leaf half in one Gather and half in
// another makes each g_j at most ½, which leaves every big-M row slack,
// and the change's comm, priced in full by the transport rows, reaches no
// stream. On GPT-2, whose decoder reads the token embedding again at the
// end of forward, that was the embedding's all-gather and reduce-scatter
// (93 ms of a 0.374 s plan on modern-24 at batch 24): the transport LP's
// bound rose from 0.2624 to 0.3547 s with this row (gap 29.9% → 5.2%),
// nearly as high as pinning every leaf's layout to the plan's (0.3557 s).
func (e *Encoding) spreadRows(v *MILPVars, commT, adjT []lin, bound []float64, charged bool,
	col func(name string, lo, hi float64, integer bool) int, row func(name string, lo, hi float64, l lin)) (comm, adj [][]int) {
	inf := math.Inf(1)
	comm, adj = make([][]int, len(e.spread)), make([][]int, len(e.spread))
	for si, sl := range e.spread {
		ti := sl.class
		t := &e.Tensors[ti]
		if len(commT[ti]) == 0 && len(adjT[ti]) == 0 {
			continue
		}
		M := bound[ti]
		g := make([]int, len(sl.readers))
		for j, r := range sl.readers {
			g[j] = col(fmt.Sprintf("spread_g_%d_%d", ti, j), 0, 1, false)
			for li, l := range t.LeafLayouts {
				for ri, rule := range e.Classes[r[0]].Rules {
					q := rule.In[r[1]]
					yc, xc := v.y[ti][li], v.x[r[0]][ri]
					if l.Kind == spmd.Gather && q != l && q.Kind != spmd.Reduce {
						row(fmt.Sprintf("spread_on_%d_%d_%d_%d", ti, j, li, ri), -1, inf, lin{g[j]: 1, yc: -1, xc: -1})
					} else {
						row(fmt.Sprintf("spread_off_%d_%d_%d_%d", ti, j, li, ri), -inf, 2, lin{g[j]: 1, yc: 1, xc: 1})
					}
				}
			}
		}
		place := func(name string, l lin) []int {
			cs := make([]int, len(sl.readers))
			for j := range sl.readers {
				cs[j] = col(fmt.Sprintf("%s_%d_%d", name, ti, j), 0, inf, false)
				r := lin{cs[j]: 1, g[j]: -M}
				for c, val := range l {
					r.add(c, -val)
				}
				for i := 0; i < j; i++ {
					r.add(g[i], M)
				}
				row(fmt.Sprintf("%s_%d_%d", name, ti, j), -M, inf, r)
			}
			if charged {
				r := lin{}
				for _, c := range cs {
					r.add(c, 1)
				}
				for c, val := range l {
					r.add(c, -val)
				}
				row(fmt.Sprintf("%s_charged_%d", name, ti), 0, inf, r)
			}
			return cs
		}
		comm[si] = place("spread_comm", commT[ti])
		adj[si] = comm[si]
		if !adjT[ti].equal(commT[ti]) {
			adj[si] = place("spread_adj", adjT[ti])
		}
	}
	return comm, adj
}

// syncVar is one synchronisation binary of the MILP: 1 when one of the
// tensor classes bounding it has a layout change by a collective.
type syncVar struct {
	col     int
	classes []int
}

// syncTerms are timelineRows' per-block expressions: per group the forward
// chain Fc, the backward chain B, its tail W and the update U; for all
// groups alike the communication Fa, P, A and N.
type syncTerms struct {
	Fc, B, W    [][]lin
	U           []lin
	Fa, P, A, N []lin
	// Ahead[g][b][i] is the compute ahead of e.blocks[b].ahead[i]'s
	// reader on group g.
	Ahead [][][]lin
}

// syncRows states stepTime for the MILP. Per block b: binaries sF_b, sB_b
// (1 when the block's forward, backward, has a collective: at least the
// collective indicator of each of its activations, from collCols); per
// group g where it has got to, x_{g,b} forward and y_{g,b} backward; where
// the communication stream has, cf_b and cb_b. The synchronisations hold
// when their binary is 1 (big-M rows), the chains always:
//
//	x_{g,b} ≥ x_{g,b−1} + Fc_{g,b}, cf_{b−1} + P_b + Fc_{g,b}     x_{g,b} ≥ x_{g',b−1} + Fc_{g,b}       if sF_b
//	cf_b    ≥ cf_{b−1} + P_b + R_b + Fa_b                        cf_b    ≥ x_{g',b−1} + R_b + Fa_b     if sF_b
//	R_b     ≥ (compute on g ahead of activation t's reader in b)  if t's changes take a collective
//	y_{g,b} ≥ y_{g,b+1} + B_{g,b} − A_b                          y_{g,b} ≥ y_{g',b+1} + B_{g',b} − W_{g',b}, cb_{b+1} + A_b  if sB_b
//	cb_b    ≥ cb_{b+1} + N_b, y_{g,b} + N_b                      T ≥ y_{g,0} + U_g, cb_0 + U_g
//
// with y_{g,K} = x_{g,K−1} and cb_K = cf_{K−1} (the backward sync holds
// for g' = g too; the chain's − A_b is − 0 wherever sB_b may be 0, since
// the block's adjoints are then no collectives). Minimising T makes a
// binary 0 wherever the block has no collective (tied layers share one
// binary: the same tensor classes bound it), so the rows price a choice
// exactly as stepTime does. (Where stepTime takes cf = p without a
// collective, the rows' cf_b ≥ cf_{b−1} + P_b + R_b + Fa_b is the same:
// Fa_b and R_b are then 0. R_b's rows hold through t's hascoll column, by
// big M.)
//
// One more row holds at every integer point, since the stream runs all of
// its collectives one after another before the update:
//
//	T ≥ Σ_b (P_b + Fa_b + A_b + N_b) + U_g
//
// It cuts off no choice, but the LP relaxation, whose fractional sB_b
// leave the big-M rows slack, drops the blocking adjoints from the
// stream's chain without it. On models whose step is mostly communication
// it is what bounds the step: with it the transport LP's bound rose from
// 0.853 to 1.039 s on bert-moe paper-8 (batch 256) and from 0.056 to
// 0.074 s on vgg19 paper-8. Only the transport LP has it (milpForm): in
// the joint MILP it lifted the root too, but sent the ten nodes to a worse
// plan on vgg19 paper-16. Under anyOrder it is always there: it is what
// charges the stream.
//
// With anyOrder the rows bound the step under any order of each stream's
// collectives, not only the list order lowering issues them in (a plan
// whose order package order searched). Only the stream's order is
// relaxed: the compute stream's order, the data dependencies and the
// synchronisation of a collective's members hold in every order. So the
// cf and cb chains go, and with them the waits on the stream (cf_{b−1} +
// P_b before block b, cb_{b+1} + A_b before a blocking adjoint): a
// prefetch may be issued at any time before its block (x_{g,b} ≥ P_b +
// Fc_{g,b}), a gradient's sum at any time after its gradient (cb_b is then
// the latest such end, cb_b ≥ cb_{b+1}, y_{g,b} + N_b), and the stream row
// above charges the stream its whole work.
func (e *Encoding) syncRows(T int, st *syncTerms, collCols [][]int, bigM float64, f milpForm,
	col func(name string, lo, hi float64, integer bool) int, row func(name string, lo, hi float64, l lin)) []syncVar {
	anyOrder := f.anyOrder
	var vars []syncVar
	inf := math.Inf(1)
	G, K := len(st.Fc), len(e.blocks)
	shared := map[string]int{} // the binaries by the has columns they are bound by
	// geq states Σ pos − Σ neg ≥ Σ terms, less M(1 − s) when s ≥ 0.
	geq := func(name string, pos, neg []int, s int, terms ...lin) {
		r := lin{}
		for _, c := range pos {
			r.add(c, 1)
		}
		for _, c := range neg {
			if c >= 0 {
				r.add(c, -1)
			}
		}
		for _, l := range terms {
			addScaled(r, l, -1)
		}
		lo := 0.0
		if s >= 0 {
			r.add(s, -bigM)
			lo = -bigM
		}
		row(name, lo, inf, r)
	}
	// has[t]: 1 when tensor class t's layout changes take a collective (at
	// least each of its collective indicators); one column per class, so
	// that a block's binary needs one row per class it holds.
	has := map[int]int{}
	classHas := func(t int) int {
		if c, ok := has[t]; ok {
			return c
		}
		c := -1
		if len(collCols[t]) > 0 {
			c = col(fmt.Sprintf("hascoll_%d", t), 0, 1, false)
			for _, cc := range collCols[t] {
				row(fmt.Sprintf("hascoll_%d_%d", t, cc), 0, inf, lin{c: 1, cc: -1})
			}
		}
		has[t] = c
		return c
	}
	// indicator is block k's binary, ≥ has[t] of its activations (those
	// with a gradient, for reqGrad); −1 when none can take a collective.
	indicator := func(name string, k int, reqGrad bool) int {
		var cols, classes []int
		for _, tc := range e.blocks[k].tensors {
			t := &e.Tensors[tc.class]
			if t.Producer >= 0 && (!reqGrad || t.ReqGrad) {
				if c := classHas(tc.class); c >= 0 && !slices.Contains(cols, c) {
					cols = append(cols, c)
					classes = append(classes, tc.class)
				}
			}
		}
		if len(cols) == 0 {
			return -1 // no collective can block here
		}
		key := fmt.Sprint(cols)
		if s, ok := shared[key]; ok {
			return s
		}
		s := col(fmt.Sprintf("%s_%d", name, k), 0, 1, true)
		for _, c := range cols {
			row(fmt.Sprintf("%s_%d_%d", name, k, c), 0, inf, lin{s: 1, c: -1})
		}
		shared[key] = s
		vars = append(vars, syncVar{col: s, classes: classes})
		return s
	}
	x := make([]int, G)
	for g := range x {
		x[g] = -1 // nothing yet: the step starts at 0
	}
	cf := -1
	for k := 0; k < K; k++ {
		s := indicator("syncf", k, false)
		nx := make([]int, G)
		for g := range nx {
			nx[g] = col(fmt.Sprintf("fwdend_%d_%d", g, k), 0, inf, false)
			geq(fmt.Sprintf("fwdchain_%d_%d", g, k), []int{nx[g]}, []int{x[g]}, -1, st.Fc[g][k])
			if cf >= 0 || len(st.P[k]) > 0 {
				geq(fmt.Sprintf("fwdwait_%d_%d", g, k), []int{nx[g]}, []int{cf}, -1, st.P[k], st.Fc[g][k])
			}
		}
		// Under anyOrder there is no stream chain: block k's prefetch may
		// be issued at any time before it (fwdwait above, from 0).
		ncf := -1
		ahead := lin{} // R_k, where the block can have a collective
		if !anyOrder {
			ncf = col(fmt.Sprintf("fwdcomm_%d", k), 0, inf, false)
			if s >= 0 {
				r := -1
				for i, ah := range e.blocks[k].ahead {
					h := classHas(ah.class)
					if h < 0 {
						continue
					}
					if r < 0 {
						r = col(fmt.Sprintf("ahead_%d", k), 0, inf, false)
						ahead.add(r, 1)
					}
					// R_k ≥ ahead − most·(1 − hascoll), with the most
					// the compute can be as the big M: far below the
					// timeline's, which keeps the joint MILP's
					// relaxation as tight as it was.
					most := milpTime * ah.most
					for g := range st.Ahead {
						l := lin{r: 1, h: -most}
						addScaled(l, st.Ahead[g][k][i], -1)
						row(fmt.Sprintf("ahead_%d_%d_%d", k, i, g), -most, inf, l)
					}
				}
			}
			geq(fmt.Sprintf("fwdcomm_%d", k), []int{ncf}, []int{cf}, -1, st.P[k], st.Fa[k], ahead)
		}
		if s >= 0 {
			for g2 := range x {
				if x[g2] < 0 {
					continue
				}
				for g := range nx {
					if g != g2 {
						geq(fmt.Sprintf("fwdsync_%d_%d_%d", g, k, g2), []int{nx[g]}, []int{x[g2]}, s, st.Fc[g][k])
					}
				}
				if ncf < 0 {
					continue
				}
				geq(fmt.Sprintf("fwdcommsync_%d_%d", k, g2), []int{ncf}, []int{x[g2]}, s, st.Fa[k], ahead)
			}
		}
		x, cf = nx, ncf
	}
	cb := cf
	for k := K - 1; k >= 0; k-- {
		s := indicator("syncb", k, true)
		ny := make([]int, G)
		for g := range ny {
			ny[g] = col(fmt.Sprintf("bwdend_%d_%d", g, k), 0, inf, false)
			chain := st.B[g][k]
			if s >= 0 && len(st.A[k]) > 0 {
				chain = lin{}
				addScaled(chain, st.B[g][k], 1)
				addScaled(chain, st.A[k], -1)
			}
			geq(fmt.Sprintf("bwdchain_%d_%d", g, k), []int{ny[g]}, []int{x[g]}, -1, chain)
		}
		if s >= 0 {
			for g := range ny {
				for g2 := range ny {
					if g2 != g || len(st.A[k]) > 0 {
						sync := st.B[g2][k]
						if len(st.W[g2][k]) > 0 {
							sync = lin{}
							addScaled(sync, st.B[g2][k], 1)
							addScaled(sync, st.W[g2][k], -1)
						}
						geq(fmt.Sprintf("bwdsync_%d_%d_%d", g, k, g2), []int{ny[g]}, []int{x[g2]}, s, sync)
					}
				}
				if !anyOrder {
					geq(fmt.Sprintf("bwdwait_%d_%d", g, k), []int{ny[g]}, []int{cb}, s, st.A[k])
				}
			}
		}
		ncb := col(fmt.Sprintf("bwdcomm_%d", k), 0, inf, false)
		for _, from := range ny {
			geq(fmt.Sprintf("bwdcomm_%d_%d", k, from), []int{ncb}, []int{from}, -1, st.N[k])
		}
		if anyOrder {
			// The latest gradient sum to end so far, in whatever order
			// they are issued: each after its gradient.
			if cb >= 0 {
				geq(fmt.Sprintf("bwdcomm_%d_%d", k, cb), []int{ncb}, []int{cb}, -1)
			}
		} else {
			geq(fmt.Sprintf("bwdcomm_%d_%d", k, cb), []int{ncb}, []int{cb}, -1, st.N[k])
		}
		x, cb = ny, ncb
	}
	stream := lin{} // all the communication of one device's stream
	for _, terms := range [][]lin{st.P, st.Fa, st.A, st.N} {
		for _, l := range terms {
			addScaled(stream, l, 1)
		}
	}
	// In list order the updates follow the stream's last collective; in
	// another, the last may be a small gradient's sum, with the other
	// parameters' updates run before it ends. The compute stream runs them
	// all after backward in any order.
	after := func(g int) lin {
		if anyOrder {
			return nil
		}
		return st.U[g]
	}
	for g := range x {
		geq(fmt.Sprintf("step_%d", g), []int{T}, []int{x[g]}, -1, st.U[g])
		geq(fmt.Sprintf("stepcomm_%d", g), []int{T}, []int{cb}, -1, after(g))
		if (f.streamRow || anyOrder) && len(stream) > 0 {
			geq(fmt.Sprintf("stepstream_%d", g), []int{T}, nil, -1, stream, after(g))
		}
	}
	return vars
}

// timeBound is more than any time the timeline can reach under any choice
// (seconds): every op's whole work on the slowest device, every layout
// change at its dearest (largest piece the whole segment, every piece a
// call) forward and backward, every pad whole, every gradient
// all-reduced, every update whole — doubled. It is the big M of the sync rows.
func (e *Encoding) timeBound() float64 {
	total := 0.0
	for _, c := range e.Classes {
		total += slices.Max(c.Time)
		if len(c.Roof) > 0 {
			total += slices.Max(c.Time) // a kernel's roofline extra is at most its time at share 1
		}
	}
	for ti := range e.Tensors {
		t := &e.Tensors[ti]
		worst := e.collCoeffs(t, spmd.I).AllReduce
		for _, l := range e.Layouts(ti) {
			if l.Kind != spmd.Gather {
				continue
			}
			c := e.collCoeffs(t, l)
			U := float64(e.Segs[l.Seg].Units)
			for k := 0; k < 2; k++ {
				worst = math.Max(worst, c.PadA[k]+c.PadB[k]*U)
				worst = math.Max(worst, c.GrpA[k]*float64(e.N)+c.GrpB[k]*U)
			}
		}
		total += float64(len(t.Tensors)) * 3 * worst * float64(len(e.Layouts(ti))+1)
		// A pad per layout it is read in, and one making Reduce, each at
		// most reading and writing the whole tensor.
		total += float64(len(t.Tensors)) * 2 * slices.Max(t.PadWhole) * float64(len(e.Layouts(ti))+1)
		if t.Kind == ir.Param {
			total += slices.Max(t.Update)
		}
	}
	return 2 * total
}
