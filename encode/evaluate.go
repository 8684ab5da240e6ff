package encode

import (
	"fmt"

	"hap/cost"
	"hap/ir"
	"hap/spmd"
)

// Evaluate prices a choice under the encoding's cost model, or returns
// ErrInfeasibleChoice (a layout no instruction can make, a loss that is
// not Reduce, a device out of memory). It is safe for concurrent use: an
// Encoding is read-only once built.
func (e *Encoding) Evaluate(ch *Choice) (*Breakdown, error) {
	br := &Breakdown{}
	if err := e.evaluate(ch, &evalScratch{}, br, true); err != nil {
		return nil, err
	}
	return br, nil
}

// PeakMemory is each device's peak memory under ch in bytes, as Evaluate
// computes it, whether or not it fits the device's capacity.
func (e *Encoding) PeakMemory(ch *Choice) ([]float64, error) {
	br := &Breakdown{}
	if err := e.evaluate(ch, &evalScratch{}, br, false); err != nil {
		return nil, err
	}
	return append([]float64(nil), br.Memory...), nil
}

// Evaluator prices choices of one encoding as Evaluate does, reusing its
// memory from one call to the next: for the loops that price thousands of
// choices (local search, the exhaustive oracle), where allocation and the
// garbage collector took a third of Evaluate's time. One per goroutine.
type Evaluator struct {
	e  *Encoding
	s  evalScratch
	br Breakdown
}

// NewEvaluator returns an Evaluator of e's choices.
func (e *Encoding) NewEvaluator() *Evaluator { return &Evaluator{e: e} }

// Seconds is Evaluate(ch).Seconds, or Evaluate's error.
func (v *Evaluator) Seconds(ch *Choice) (float64, error) {
	if err := v.e.evaluate(ch, &v.s, &v.br, true); err != nil {
		return 0, err
	}
	return v.br.Seconds, nil
}

// Comm is Breakdown.Comm of the choice Seconds last priced without error.
func (v *Evaluator) Comm() float64 { return v.br.Comm }

// Overflow prices ch as Seconds does but without the devices' capacities:
// its step time and over, the bytes by which the devices' peaks exceed
// their capacities, summed (0 when it fits). It errs only for a choice
// that is not a valid program. For repairing choices that do not fit.
func (v *Evaluator) Overflow(ch *Choice) (seconds, over float64, err error) {
	if err := v.e.evaluate(ch, &v.s, &v.br, false); err != nil {
		return 0, 0, err
	}
	for d, m := range v.br.Memory {
		over += max(0, m-v.e.Capacity[d])
	}
	return v.br.Seconds, over, nil
}

// evalScratch is the memory one evaluation works in; every field is
// overwritten (or cleared) before it is read.
type evalScratch struct {
	floats    floatArena
	rep, reps []int
	terms     []timelineTerms
	coll      []bool
	need      spmd.LayoutSet
	needI     []bool // per tensor class, whether it is read in Identity (Needs)
	ml        memoryLayouts
	timeline  timelineScratch
}

// evaluate is Evaluate, working in s and writing br (whose slices come
// from s); without checkCapacity a device over its capacity is no error.
func (e *Encoding) evaluate(ch *Choice, s *evalScratch, br *Breakdown, checkCapacity bool) error {
	for si := range e.Segs {
		sum := 0
		for _, l := range ch.Lengths[si] {
			if l < 0 {
				return fmt.Errorf("%w: negative length", ErrInfeasibleChoice)
			}
			sum += l
		}
		if sum != e.Segs[si].Units {
			return fmt.Errorf("%w: segment %s lengths sum to %d, want %d", ErrInfeasibleChoice, e.Segs[si].Name, sum, e.Segs[si].Units)
		}
	}
	lc := e.LossClass()
	if e.Classes[lc].Rules[ch.Rule[lc]].Out[0] != spmd.R {
		return fmt.Errorf("%w: the loss is not Reduce", ErrInfeasibleChoice)
	}
	// Devices of one type holding the same lengths of every segment are
	// priced once: rep[d] is the first such device.
	rep := resize(s.rep, e.N)
	reps := s.reps[:0]
	for d := range rep {
		rep[d] = d
		for _, r := range reps {
			if e.pricedAlike(ch, r, d) {
				rep[d] = r
				break
			}
		}
		if rep[d] == d {
			reps = append(reps, d)
		}
	}
	s.rep, s.reps = rep, reps
	arena := &s.floats
	arena.reset(2*e.N + len(reps)*(3*len(e.Classes)+6*len(e.Tensors)+int(numBuckets)*len(e.blocks)))
	*br = Breakdown{Compute: arena.take(e.N), Memory: arena.take(e.N)}
	terms := resize(s.terms, e.N)
	s.terms = terms
	for _, d := range reps {
		terms[d] = e.newTimelineTerms(arena)
	}
	for ci := range e.Classes {
		c := &e.Classes[ci]
		r := ch.Rule[ci]
		inst := float64(len(c.Ops))
		for _, d := range reps {
			sh := share(ch.Lengths, e.Segs, c.WorkSeg[r], d)
			// The share scales the work; the fixed seconds are paid whole.
			time := (c.Time[d]-c.Fixed[d])*sh + c.Fixed[d]
			f := (c.TimeF[d]-c.FixedF[d])*sh + c.FixedF[d]
			b := (c.TimeB[d]-c.FixedB[d])*sh + c.FixedB[d]
			w := (c.TimeW[d]-c.FixedW[d])*sh + c.FixedW[d]
			for ai := range c.Acc {
				a := &c.Acc[ai]
				ash := share(ch.Lengths, e.Segs, c.accSeg(r, a), d)
				ab := (a.TimeB[d]-a.FixedB[d]+a.TimeS[d])*ash + a.FixedB[d]
				time += ab
				b += ab
				w += (a.TimeW[d]-a.FixedW[d])*ash + a.FixedW[d]
			}
			units := 0 // of the work segment, for the kernels' rooflines
			if s := c.WorkSeg[r]; s >= 0 {
				units = ch.Lengths[s][d]
			}
			for ki := range c.Roof {
				k := &c.Roof[ki]
				ex := inst * k.extra(r, d, units, sh)
				time += ex
				switch k.part {
				case kernelForward:
					f += ex
				case kernelTail:
					w += ex
					b += ex
				default:
					b += ex
				}
			}
			br.Compute[d] += time
			terms[d].fwd[ci] = f / inst
			terms[d].bwd[ci] = b / inst
			terms[d].wtail[ci] = w / inst
		}
	}
	coll := resize(s.coll, len(e.Tensors)) // whether each class's layout changes take a collective
	s.coll = coll
	s.needI = resize(s.needI, len(e.Tensors))
	for ti := range e.Tensors {
		t := &e.Tensors[ti]
		h := e.have(ch, ti)
		count := float64(len(t.Tensors))
		if t.Kind == ir.Param {
			for _, d := range reps {
				sh := share(ch.Lengths, e.Segs, layoutSeg(h), d)
				u := (t.Update[d]-t.UpdateFixed[d])*sh + t.UpdateFixed[d]
				br.Compute[d] += u
				terms[d].update += u
			}
			if h.Kind == spmd.Identity {
				// The replicated parameter's gradient is all-reduced.
				ar := e.collCoeffs(t, spmd.I).AllReduce
				br.Comm += count * ar
				for _, d := range reps {
					terms[d].grad[ti] = ar
				}
			}
		}
		s.need = e.appendNeeds(s.need, ch, ti)
		s.needI[ti] = s.need.Has(spmd.I)
		coll[ti] = e.collectiveBetween(ch, ti, h, s.need)
		sec, via, err := e.tensorCommFor(ch, ti, h, s.need)
		if err != nil {
			return err
		}
		br.Comm += count * sec.Forward
		if t.ReqGrad {
			br.Comm += count * sec.Adjoint // the adjoint collectives in backward
		}
		for _, d := range reps {
			terms[d].comm[ti] = sec.Forward
			terms[d].adj[ti] = sec.Adjoint
			fwd, bwd := e.padTimes(ch, ti, d, h, s.need, via)
			terms[d].padF[ti], terms[d].padB[ti] = fwd, bwd
			sum := e.sumTreeSeconds(ch, ti, d, h, s.need)
			terms[d].sum[ti] = sum
			br.Compute[d] += count * (fwd + bwd + sum)
		}
	}
	ml := &s.ml
	e.fillMemoryLayouts(ml, ch, s.needI)
	for d := 0; d < e.N; d++ {
		if r := rep[d]; r != d {
			br.Compute[d], br.Memory[d] = br.Compute[r], br.Memory[r]
			continue
		}
		br.Memory[d] = e.peakMemory(ch, ml, d)
		if checkCapacity && br.Memory[d] > e.Capacity[d] {
			unit, per := cost.ByteUnit(max(br.Memory[d], e.Capacity[d]))
			return fmt.Errorf("%w: device %d needs %.4g %s, has %.4g %s", ErrInfeasibleChoice, d, br.Memory[d]*per, unit, e.Capacity[d]*per, unit)
		}
	}
	br.Seconds = e.stepSeconds(ch, coll, terms, reps, arena, &s.timeline)
	return nil
}

// resize returns buf with length n, reusing its memory when it can; the
// contents are not cleared.
func resize[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// floatArena hands out zeroed float64 slices carved from one allocation.
// Evaluate needs a dozen small slices per choice.
type floatArena []float64

// reset empties the arena and makes room for n floats.
func (a *floatArena) reset(n int) {
	if cap(*a) < n {
		*a = make(floatArena, 0, n)
	}
	*a = (*a)[:0]
}

// take returns n zeroed floats, from the arena while its capacity lasts.
func (a *floatArena) take(n int) []float64 {
	if len(*a)+n > cap(*a) {
		return make([]float64, n)
	}
	l := len(*a)
	*a = (*a)[:l+n]
	out := (*a)[l : l+n : l+n]
	clear(out)
	return out
}
