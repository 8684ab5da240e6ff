package encode

import (
	"fmt"
	"math"
	"slices"

	"hap/ir"
	"hap/spmd"
)

// The memory model: each device's peak, as the simulator measures it for
// the lowered program. Four kinds of tensor make it:
//
//	resident   parameters' values and optimizer state, and inputs, all
//	           step long, at their layout's share;
//	held       every tensor a backward op reads, in each layout it is read
//	           in: the producer's output when the producer's own backward
//	           reads it (relu, softmax), and the copy a consumer reads when
//	           that consumer's backward reads its input (matmul) — the
//	           result of an all-gather, slice, pad or all-reduce, or the
//	           replicate op's copy of an Identity parameter. Held from
//	           forward until backward reaches it;
//	gradients  a parameter's gradient, from its backward until the update,
//	           at the parameter's share;
//	transient  a tensor that passes whole through every device without
//	           being held (wholeTransient): the largest of each block's.
//
// Tensors that backward never reads are freed during forward and count
// only as transients. Backward sweeps the timeline's blocks (timeline.go) last to
// first, freeing each block's held tensors and making its gradients, so
// the peak is at some block k:
//
//	peak_d = resident_d + max_k ( Σ_{b≤k} held_{d,b} + Σ_{b≥k} grad_{d,b} + heldGrad_{d,k} + whole_k )
//
// where heldGrad_{d,k} counts again those of block k's held tensors that
// have a gradient: while block k's backward runs, their gradients (as
// large as they are) are live beside them — at the start of backward, the
// logits and their gradient; whole_k is block k's largest whole
// transient, which lives only while the block runs, as those gradients
// do. The two are rarely alive together, so adding them overestimates
// (random tiny programs up to +17%, where the larger of the two is within
// +6.6%), but the larger of the two is a second row per group and block,
// which nearly doubled the joint MILP's time on ViT-48 (36–60 s → 80–87 s,
// the same plan); added, it is 31–37 s. A tensor held in Identity or Reduce is whole
// on every device; in Gather(s), device d holds Lengths[s][d]/Units of it.
// (Measured against the simulator: docs/planner.md, one cost.) Every
// term is linear in the choice (one indicator per tensor class and layout
// held) and in the lengths, so the MILP states the peak exactly (milp.go,
// the held_* columns and memory_* rows); plan's tests measure how close it
// comes to the simulator.

// paramFactor is the bytes a device keeps per byte of its share of a
// parameter: the value and its gradient, and Adam's two moments.
func (e *Encoding) paramFactor() float64 {
	if e.opt.Optimizer.Kind == "adam" {
		return 4
	}
	return 2
}

// residentFactor is the bytes a leaf of class t keeps all step per byte
// of its share: a parameter its value and optimizer state (its gradient
// is swept separately), an input itself; a computed tensor none.
func (e *Encoding) residentFactor(t *TensorClass) float64 {
	switch {
	case t.Kind == ir.Param:
		return e.paramFactor() - 1
	case t.Producer < 0:
		return 1
	}
	return 0
}

// heldCopy reports whether a consumer reading tensor class t in layout q,
// when t is held in layout have, holds a tensor of its own beyond the
// resident leaf: always for a computed tensor (the held tensor is the
// output or a copy of it); for a leaf, when q is not the leaf's layout —
// or when it is Identity on a parameter, which lowering passes through a
// replicate op (whose adjoint all-reduces the gradient) into a copy.
func heldCopy(t *TensorClass, q, have spmd.Layout) bool {
	return t.Producer >= 0 || q != have || (t.Kind == ir.Param && q == spmd.I)
}

// appendHeldLayouts appends to dst the layouts in which tensor class ti is
// held from forward into backward under ch, beyond its resident leaf, each
// once.
func (e *Encoding) appendHeldLayouts(dst []spmd.Layout, ch *Choice, ti int) []spmd.Layout {
	t := &e.Tensors[ti]
	h := e.have(ch, ti)
	start := len(dst)
	if t.ProducerSaves {
		dst = append(dst, h)
	}
	for k, cs := range t.Consumers {
		if !t.ConsumerSaves[k] {
			continue
		}
		if q := e.Classes[cs[0]].Rules[ch.Rule[cs[0]]].In[cs[1]]; heldCopy(t, q, h) && !slices.Contains(dst[start:], q) {
			dst = append(dst, q)
		}
	}
	return dst
}

// memoryLayouts are, per tensor class under a choice, the layout it is
// produced in and those it is held in (appendHeldLayouts): what peakMemory needs
// of the program, the same for every device.
type memoryLayouts struct {
	have []spmd.Layout
	held [][]spmd.Layout
	buf  []spmd.Layout // held's backing array
	// transient is, per block, its largest whole transient
	// (wholeTransient), the same on every device.
	transient []float64
	// scratch for fillMemoryLayouts and peakMemory (once per device): per tensor
	// class (2 rows), and per block (4 rows of len(e.blocks)+1).
	perClass, perBlock []float64
}

// fillMemoryLayouts sets ml to ch's layouts, reusing ml's memory, given
// whether each tensor class is read in Identity under ch (Needs).
func (e *Encoding) fillMemoryLayouts(ml *memoryLayouts, ch *Choice, needI []bool) {
	ml.have = resize(ml.have, len(e.Tensors))
	ml.held = resize(ml.held, len(e.Tensors))
	ml.transient = resize(ml.transient, len(e.blocks))
	ml.perClass = resize(ml.perClass, 2*len(e.Tensors))
	ml.perBlock = resize(ml.perBlock, 5*(len(e.blocks)+1))
	// One backing array for every class's held layouts: at most its
	// producer's layout and one per reader, so appending never moves it.
	n := 0
	for ti := range e.Tensors {
		n += 1 + len(e.Tensors[ti].Consumers)
	}
	buf := resize(ml.buf, n)[:0]
	for ti := range e.Tensors {
		ml.have[ti] = e.have(ch, ti)
		start := len(buf)
		buf = e.appendHeldLayouts(buf, ch, ti)
		ml.held[ti] = buf[start:len(buf):len(buf)]
	}
	ml.buf = buf
	whole := ml.perClass // scratch: per class, its bytes when a whole transient
	for ti := range e.Tensors {
		whole[ti] = 0
		if e.wholeTransient(ti, ml.have[ti], ml.held[ti], needI[ti]) {
			whole[ti] = e.Tensors[ti].Bytes
		}
	}
	for k, bl := range e.blocks {
		largest := 0.0 // the block's largest whole transient
		for _, tc := range bl.tensors {
			largest = max(largest, whole[tc.class])
		}
		ml.transient[k] = largest
	}
}

// wholeTransient reports whether a tensor of class ti, made in layout
// have, held in the layouts held and read in Identity when needI (which
// Needs sets, too, for a Gather made from another through Identity),
// exists whole on every device for a while beyond what the model holds:
//
//	made       a computed tensor made in Identity or Reduce (a partial sum
//	           is whole-sized) and not held so;
//	gathered   read in Identity, made in another layout, and not held in
//	           Identity: the gathered copy in forward and, for a sharded
//	           parameter, its whole gradient in backward before its
//	           reduce-scatter. A copy held in Identity counts in the sweep,
//	           and covers that gradient too: the backward that reads the
//	           copy (a matmul's input gradient) frees it before the one
//	           that makes the gradient (the weight gradient) runs.
//
// These transients are what random programs are made of — a parameter
// gathered whole only to be sliced into another layout, and padded whole
// again in backward — and as large as everything else a tiny model
// holds; the peak counts the largest of its block's (transientTerms).
func (e *Encoding) wholeTransient(ti int, have spmd.Layout, held []spmd.Layout, needI bool) bool {
	if e.Tensors[ti].Producer >= 0 && have.Kind != spmd.Gather && !slices.Contains(held, have) {
		return true
	}
	return needI && have != spmd.I && !slices.Contains(held, spmd.I)
}

// peakMemory is device d's peak bytes under ch, whose layouts are ml (the
// model above).
func (e *Encoding) peakMemory(ch *Choice, ml *memoryLayouts, d int) float64 {
	resident := 0.0
	clear(ml.perClass)
	clear(ml.perBlock)
	// Per instance, as a fraction of its bytes: what is held of each tensor
	// class, and the share of its layout, which a parameter's gradient takes.
	heldShare, haveShare := ml.perClass[:len(e.Tensors)], ml.perClass[len(e.Tensors):]
	for ti := range e.Tensors {
		t := &e.Tensors[ti]
		haveShare[ti] = share(ch.Lengths, e.Segs, layoutSeg(ml.have[ti]), d)
		resident += t.Bytes * float64(len(t.Tensors)) * e.residentFactor(t) * haveShare[ti]
		for _, q := range ml.held[ti] {
			heldShare[ti] += share(ch.Lengths, e.Segs, layoutSeg(q), d)
		}
	}
	nb := len(e.blocks)
	held := ml.perBlock[:nb]
	heldGrad := ml.perBlock[nb : 2*nb] // the part with a gradient
	grad := ml.perBlock[2*nb : 3*nb]
	inflight := ml.perBlock[3*nb : 4*nb] // a recomputed block's own activations
	for _, t := range e.memFlat {
		ml.perBlock[t.dst] += t.n * ml.perClass[t.src]
	}
	gradFrom := ml.perBlock[4*nb:] // Σ_{b≥k} grad_b, nb+1 of them
	for k := len(e.blocks) - 1; k >= 0; k-- {
		gradFrom[k] = gradFrom[k+1] + grad[k]
	}
	peak, heldTo, unitTo := 0.0, 0.0, 0.0
	for k := range e.blocks {
		heldTo += held[k]
		// A recomputed unit's activations are alive only while its
		// backward runs: at block k's, those of the unit's blocks up to k.
		if e.unitStart(k) || !e.recomputed(k) {
			unitTo = 0
		}
		unitTo += inflight[k]
		peak = max(peak, heldTo+unitTo+gradFrom[k]+heldGrad[k]+ml.transient[k])
	}
	return resident + peak
}

// memoryTerms lists, in flatTerm form, what peakMemory adds up per block
// from the per-class shares it computes (heldShare, then haveShare, in
// ml.perClass): each tensor class's held bytes, the part of them with a
// gradient, and a parameter's gradient bytes, into the rows held,
// heldGrad and grad of ml.perBlock. Listed once per encoding, block by
// block (TestFlatTermsAddUpAsTheTerms).
func (e *Encoding) memoryTerms() []flatTerm {
	var out []flatTerm
	nb, nt := len(e.blocks), len(e.Tensors)
	add := func(row, k, src int, n float64) {
		out = append(out, flatTerm{dst: int32(row*nb + k), src: int32(src), n: n})
	}
	for k, bl := range e.blocks {
		for _, tc := range bl.tensors {
			t := &e.Tensors[tc.class]
			w := float64(tc.n) * t.Bytes
			if in := innerCount(bl.inner, tc.class); in > 0 {
				// Recomputed: held only during the unit's backward.
				add(3, k, tc.class, float64(in)*t.Bytes)
				if in < tc.n {
					add(0, k, tc.class, float64(tc.n-in)*t.Bytes)
				}
			} else {
				add(0, k, tc.class, w)
			}
			if t.ReqGrad && t.Kind != ir.Param {
				add(1, k, tc.class, w)
			}
			if t.Kind == ir.Param {
				add(2, k, nt+tc.class, w)
			}
		}
	}
	return out
}

// layoutSeg is the segment splitting a tensor in layout l; −1 when every
// device holds all of it.
func layoutSeg(l spmd.Layout) int {
	if l.Kind == spmd.Gather {
		return l.Seg
	}
	return -1
}

// MinimumTotalMemory is a lower bound of the devices' peaks added up,
// whatever the plan: every resident tensor, and either every held tensor
// (where backward starts) or every gradient (where it ends), each held
// once on some device.
func (e *Encoding) MinimumTotalMemory() float64 {
	resident, held, grad := e.wholeMemory()
	return resident + math.Max(held, grad)
}

// wholeMemory is the model's resident bytes, its held tensors (one copy
// each) and its parameters' gradients, whole.
func (e *Encoding) wholeMemory() (resident, held, grad float64) {
	for i := range e.Tensors {
		t := &e.Tensors[i]
		all := t.Bytes * float64(len(t.Tensors))
		resident += all * e.residentFactor(t)
		if t.Kind == ir.Param {
			grad += all
		}
		if t.Producer >= 0 && (t.ProducerSaves || slices.Contains(t.ConsumerSaves, true)) {
			held += all
		}
	}
	return resident, held, grad
}

// MemoryMayBind reports whether some choice could exceed some device's
// capacity; if none can, the memory rows are left out of the MILP. The most any device
// can hold: every leaf whole with its gradient, every tensor whole in
// each layout it can be held in — twice, for those with a gradient — and
// the largest tensor, as a whole transient.
func (e *Encoding) MemoryMayBind() bool {
	resident, _, grad := e.wholeMemory()
	most := resident + grad
	noHave := func(int, spmd.Layout) lin { return lin{} }
	largest := 0.0
	for i := range e.Tensors {
		t := &e.Tensors[i]
		largest = max(largest, t.Bytes)
		held := float64(len(e.heldBounds(i, noHave, nil))) // the layouts it can be held in
		if t.ReqGrad && t.Kind != ir.Param {
			held *= 2
		}
		most += t.Bytes * float64(len(t.Tensors)) * held
	}
	most += largest // a block's largest whole transient, at most
	for _, c := range e.Capacity {
		if most > c {
			return true
		}
	}
	return false
}

// heldBound: the tensor is held in layout q whenever one of the lower
// expressions is 1.
type heldBound struct {
	q     spmd.Layout
	lower []lin
}

// heldBounds states appendHeldLayouts for the MILP, given have(ti, l) (1 when
// the tensor is produced in l) and the rule columns x: held in its
// produced layout if its producer saves it; held in q if a consumer that
// saves its input reads it in q (minus have(q) when that is the resident
// leaf itself). Layouts come in a fixed order: produced, then consumers'.
func (e *Encoding) heldBounds(ti int, have func(int, spmd.Layout) lin, x [][]int) []heldBound {
	t := &e.Tensors[ti]
	var out []heldBound
	at := map[spmd.Layout]int{}
	add := func(q spmd.Layout, lb lin) {
		k, ok := at[q]
		if !ok {
			k = len(out)
			at[q] = k
			out = append(out, heldBound{q: q})
		}
		out[k].lower = append(out[k].lower, lb)
	}
	if t.ProducerSaves {
		for _, r := range e.Classes[t.Producer].Rules {
			q := r.Out[t.OutIdx]
			if _, ok := at[q]; !ok {
				add(q, have(ti, q))
			}
		}
	}
	for k, cs := range t.Consumers {
		if !t.ConsumerSaves[k] {
			continue
		}
		reads := map[spmd.Layout]lin{} // q → Σ x over the consumer's rules reading q
		var order []spmd.Layout
		for ri, r := range e.Classes[cs[0]].Rules {
			q := r.In[cs[1]]
			if reads[q] == nil {
				reads[q] = lin{}
				order = append(order, q)
			}
			if x != nil { // nil: only which layouts (MemoryMayBind)
				reads[q].add(x[cs[0]][ri], 1)
			}
		}
		for _, q := range order {
			lb := reads[q]
			if t.Producer < 0 && !(t.Kind == ir.Param && q == spmd.I) {
				// Reading the leaf in its own layout holds nothing new.
				for c, val := range have(ti, q) {
					lb.add(c, -val)
				}
			}
			add(q, lb)
		}
	}
	return out
}

// memoryRows states peak ≤ capacity for every group and block of the
// sweep (the model above), given each group's resident bytes, its
// share expressions of every leaf and held tensor, and each block's
// whole transient (transientTerms). Running columns keep
// the rows sparse: heldTo_k ≥ heldTo_{k−1} + held_k and gradFrom_k ≥
// gradFrom_{k+1} + grad_k (at least is enough: the rows only bound them
// from above).
//
// capped gives its columns their device's capacity as upper bound, which
// cuts off no plan: at a plan's point each is a byte count within the
// peak its memory row holds to that capacity. TransportLP wants every
// column bounded.
func (e *Encoding) memoryRows(resident []lin, leafShare, heldShare [][]lin, transient []lin, capped bool,
	col func(name string, lo, hi float64, integer bool) int, row func(name string, lo, hi float64, l lin)) {
	inf := math.Inf(1)
	K := len(e.blocks)
	for g := range resident {
		held := make([]lin, K)
		heldGrad := make([]lin, K)
		grad := make([]lin, K)
		inflight := make([]lin, K)
		for k, bl := range e.blocks {
			held[k], heldGrad[k], grad[k], inflight[k] = lin{}, lin{}, lin{}, lin{}
			for _, tc := range bl.tensors {
				t := &e.Tensors[tc.class]
				bytes := milpMemory * float64(tc.n) * t.Bytes
				if in := innerCount(bl.inner, tc.class); in > 0 {
					addScaled(inflight[k], heldShare[tc.class][g], milpMemory*float64(in)*t.Bytes)
					if in < tc.n {
						addScaled(held[k], heldShare[tc.class][g], milpMemory*float64(tc.n-in)*t.Bytes)
					}
				} else {
					addScaled(held[k], heldShare[tc.class][g], bytes)
				}
				if t.ReqGrad && t.Kind != ir.Param {
					addScaled(heldGrad[k], heldShare[tc.class][g], bytes)
				}
				if t.Kind == ir.Param {
					addScaled(grad[k], leafShare[tc.class][g], bytes)
				}
			}
		}
		capacity := milpMemory * e.Capacity[e.Groups[g][0]] * (1 - memoryRowSlack)
		hi := inf
		if capped {
			hi = capacity
		}
		running := func(name string, k, prev int, term lin) int {
			c := col(fmt.Sprintf("%s_%d_%d", name, g, k), 0, hi, false)
			l := lin{c: 1}
			if prev >= 0 {
				l.add(prev, -1)
			}
			addScaled(l, term, -1)
			row(fmt.Sprintf("%s_%d_%d", name, g, k), 0, inf, l)
			return c
		}
		gradFrom := make([]int, K)
		next := -1
		for k := K - 1; k >= 0; k-- {
			gradFrom[k] = running("gradfrom", k, next, grad[k])
			next = gradFrom[k]
		}
		// The resident bytes, a column of their own: every row of the
		// sweep reads them.
		res := col(fmt.Sprintf("resident_%d", g), 0, hi, false)
		l := lin{res: 1}
		addScaled(l, resident[g], -1)
		row(fmt.Sprintf("resident_%d", g), 0, 0, l)
		heldTo, unitTo := -1, -1
		for k := 0; k < K; k++ {
			heldTo = running("heldto", k, heldTo, held[k])
			l := lin{heldTo: 1, gradFrom[k]: 1, res: 1}
			if e.recomputed(k) {
				// The recomputed unit's activations up to block k, alive
				// while its backward runs (peakMemory).
				if e.unitStart(k) {
					unitTo = -1
				}
				unitTo = running("unitto", k, unitTo, inflight[k])
				l.add(unitTo, 1)
			}
			addScaled(l, heldGrad[k], 1)
			addScaled(l, transient[k], 1)
			row(fmt.Sprintf("memory_%d_%d", g, k), -inf, capacity, l)
		}
	}
}

// transientTerms states, per block, its largest whole transient
// (wholeTransient) in MILP memory units, given have(ti, l), the held_*
// columns per tensor class and layout, and the need columns. w_t ≥ each of
// wholeTransient's cases, as rows:
//
//	w_t ≥ have(t, l) − held(t, l)            l ∈ {Identity, Reduce}, t computed
//	w_t ≥ need(t, I) − have(t, I) − held(t, I)
//
// (held may exceed what the choice holds, but then the sweep counts it:
// the rows stay an upper bound), and a block's term is a column at least
// B_t·w_t for each of its classes. Blocks of tied layers hold the same
// classes and share one column; a block with no candidate gets an empty
// term.
//
// Why the largest and not the sum of the two largest, which is closer to
// the simulator on random programs (−14.6%..+22.0% against −27.6%..+17.1%):
// its LP form (2τ + Σ max(0, B_t·w_t − τ)) doubled the joint MILP's time
// on bert-moe paper-32 (15.5 → 31 s, the same plan), where this one costs
// nothing measurable.
func (e *Encoding) transientTerms(have func(int, spmd.Layout) lin, heldCol []map[spmd.Layout]int, need []map[spmd.Layout]int, capped bool,
	col func(name string, lo, hi float64, integer bool) int, row func(name string, lo, hi float64, l lin)) []lin {
	inf := math.Inf(1)
	w := make([]int, len(e.Tensors)) // the indicator column, −1: never whole
	largest := 0.0
	for ti := range e.Tensors {
		t := &e.Tensors[ti]
		w[ti] = -1
		var lower []lin
		minusHeld := func(l lin, q spmd.Layout) lin {
			if c, ok := heldCol[ti][q]; ok {
				l.add(c, -1)
			}
			return l
		}
		if t.Producer >= 0 {
			for _, q := range []spmd.Layout{spmd.I, spmd.R} {
				if h := have(ti, q); len(h) > 0 {
					lower = append(lower, minusHeld(h, q))
				}
			}
		}
		if c, ok := need[ti][spmd.I]; ok {
			l := lin{c: 1}
			addScaled(l, have(ti, spmd.I), -1)
			lower = append(lower, minusHeld(l, spmd.I))
		}
		if len(lower) == 0 {
			continue
		}
		w[ti] = col(fmt.Sprintf("whole_%d", ti), 0, 1, false)
		for i, lb := range lower {
			l := lin{w[ti]: 1}
			addScaled(l, lb, -1)
			row(fmt.Sprintf("whole_%d_%d", ti, i), 0, inf, l)
		}
		largest = max(largest, t.Bytes)
	}
	hi := inf
	if capped {
		hi = milpMemory * largest
	}
	terms := make([]lin, len(e.blocks))
	shared := map[string]lin{}
	for k, bl := range e.blocks {
		var key []byte
		for _, tc := range bl.tensors {
			if w[tc.class] >= 0 {
				key = fmt.Appendf(key, "%d,", tc.class)
			}
		}
		if term, ok := shared[string(key)]; ok {
			terms[k] = term
			continue
		}
		terms[k] = lin{}
		shared[string(key)] = terms[k]
		if len(key) == 0 {
			continue
		}
		m := col(fmt.Sprintf("transient_%d", k), 0, hi, false)
		terms[k].add(m, 1)
		for _, tc := range bl.tensors {
			if w[tc.class] >= 0 {
				b := milpMemory * e.Tensors[tc.class].Bytes
				row(fmt.Sprintf("transient_%d_%d", k, tc.class), 0, inf, lin{m: 1, w[tc.class]: -b}) // m ≥ B·w
			}
		}
	}
	return terms
}

// memoryRowSlack is taken off each capacity in the MILP's memory rows,
// relative, so that a plan the solver puts on the boundary still fits
// under Evaluate's exact check: CBC holds rows to its feasibility
// tolerance after scaling them, and a 2-device plan of 2.6 M samples
// came back 820 bytes over a 23.19 GB capacity (3.5e-8 of it). A
// millionth is 23 KB there, and far below anything the model resolves.
const memoryRowSlack = 1e-6

// addScaled adds f·src to dst.
func addScaled(dst, src lin, f float64) {
	for c, v := range src {
		dst.add(c, f*v)
	}
}

// innerCount is the count of class in a block's inner tensors (sorted by
// class), 0 when it has none.
func innerCount(inner []classCount, class int) int {
	i, ok := slices.BinarySearchFunc(inner, class, func(c classCount, t int) int { return c.class - t })
	if !ok {
		return 0
	}
	return inner[i].n
}
