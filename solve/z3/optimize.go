package z3

/*
#include <stdlib.h>
#include <z3.h>
*/
import "C"

import (
	"fmt"
	"math"
	"math/big"
	"runtime"
	"strconv"
	"time"
	"unsafe"
)

// Optimizer is a Z3 optimisation context (νZ): hard assertions, objectives to minimise or maximise
// and weighted soft constraints. Several objectives are optimised lexicographically in the order they
// were added (Z3's default). It belongs to one Context and follows its locking rules.
//
// With a timeout (SetTimeout) or an Interrupt, Check returns Unknown (Z3 4.8.12 gives the reason as
// a cancellation, e.g. "sat.canceled", for timeouts too). It then still reports the best model it
// found (Model) and the interval it established for each objective (Bounds); see
// TestOptimizerTimeout for what it reports on a hard instance.
type Optimizer struct {
	c       *Context
	o       C.Z3_optimize // nil once closed
	cleanup runtime.Cleanup
}

// Objective identifies an objective of an Optimizer: one Minimize or Maximize call, or one group of
// soft constraints.
type Objective struct {
	o   *Optimizer
	idx uint32
}

// NewOptimizer returns a new optimizer in c. It panics if c is closed.
func (c *Context) NewOptimizer() *Optimizer {
	c.mustLock()
	defer c.unlock()
	z := C.Z3_mk_optimize(c.z)
	c.must("NewOptimizer")
	C.Z3_optimize_inc_ref(c.z, z)
	o := &Optimizer{c: c, o: z}
	o.cleanup = runtime.AddCleanup(o, c.queue, release{kindOptimize, unsafe.Pointer(z)})
	return o
}

// Close releases the optimizer. It is idempotent.
func (o *Optimizer) Close() {
	if o.c.lock() != nil {
		return
	}
	defer o.c.unlock()
	if o.o != nil {
		o.cleanup.Stop()
		C.Z3_optimize_dec_ref(o.c.z, o.o)
		o.o = nil
	}
}

func (o *Optimizer) lock() error {
	if err := o.c.lock(); err != nil {
		return err
	}
	if o.o == nil {
		o.c.unlock()
		return ErrClosed
	}
	return nil
}

// Assert adds hard Boolean constraints.
func (o *Optimizer) Assert(ts ...Term) error {
	if err := o.lock(); err != nil {
		return err
	}
	defer o.c.unlock()
	for i, t := range ts {
		a, err := o.c.boolArgErr("Optimizer.Assert", t, i)
		if err != nil {
			return err
		}
		C.Z3_optimize_assert(o.c.z, o.o, a)
		if err := o.c.err("Optimizer.Assert"); err != nil {
			return err
		}
	}
	return nil
}

// AssertSoft adds the soft constraint t with a positive, finite weight to the group called group
// ("" is a group too). Each group is one objective: the total weight of its violated constraints,
// minimised. The returned Objective is the group's (the same for every constraint in it).
func (o *Optimizer) AssertSoft(t Term, weight float64, group string) (Objective, error) {
	if !(weight > 0) || math.IsInf(weight, 0) {
		return Objective{}, fmt.Errorf("z3: Optimizer.AssertSoft: weight %v is not positive and finite", weight)
	}
	if err := o.lock(); err != nil {
		return Objective{}, err
	}
	defer o.c.unlock()
	a, err := o.c.boolArgErr("Optimizer.AssertSoft", t, 0)
	if err != nil {
		return Objective{}, err
	}
	w := C.CString(strconv.FormatFloat(weight, 'f', -1, 64))
	defer C.free(unsafe.Pointer(w))
	idx := C.Z3_optimize_assert_soft(o.c.z, o.o, a, w, o.c.symbol(group))
	if err := o.c.err("Optimizer.AssertSoft"); err != nil {
		return Objective{}, err
	}
	return Objective{o, uint32(idx)}, nil
}

// Minimize adds the objective "minimise t" for a numeric term t.
func (o *Optimizer) Minimize(t Term) (Objective, error) {
	return o.objective("Optimizer.Minimize", t, func(a C.Z3_ast) C.uint { return C.Z3_optimize_minimize(o.c.z, o.o, a) })
}

// Maximize adds the objective "maximise t" for a numeric term t.
func (o *Optimizer) Maximize(t Term) (Objective, error) {
	return o.objective("Optimizer.Maximize", t, func(a C.Z3_ast) C.uint { return C.Z3_optimize_maximize(o.c.z, o.o, a) })
}

func (o *Optimizer) objective(op string, t Term, add func(C.Z3_ast) C.uint) (Objective, error) {
	if err := o.lock(); err != nil {
		return Objective{}, err
	}
	defer o.c.unlock()
	a := o.c.ast(op, t)
	if t.r.s == BoolSort {
		return Objective{}, fmt.Errorf("z3: %s: objective must be Int or Real, not Bool", op)
	}
	idx := add(a)
	if err := o.c.err(op); err != nil {
		return Objective{}, err
	}
	return Objective{o, uint32(idx)}, nil
}

// Push opens a backtracking scope.
func (o *Optimizer) Push() error {
	if err := o.lock(); err != nil {
		return err
	}
	defer o.c.unlock()
	C.Z3_optimize_push(o.c.z, o.o)
	return o.c.err("Optimizer.Push")
}

// Pop removes the innermost scope.
func (o *Optimizer) Pop() error {
	if err := o.lock(); err != nil {
		return err
	}
	defer o.c.unlock()
	C.Z3_optimize_pop(o.c.z, o.o)
	return o.c.err("Optimizer.Pop")
}

// SetTimeout bounds each later Check to d (0: no limit).
func (o *Optimizer) SetTimeout(d time.Duration) error {
	ms, err := timeoutMillis("Optimizer.SetTimeout", d)
	if err != nil {
		return err
	}
	if err := o.lock(); err != nil {
		return err
	}
	defer o.c.unlock()
	return o.c.setTimeout("Optimizer.SetTimeout", ms, func(p C.Z3_params) { C.Z3_optimize_set_params(o.c.z, o.o, p) })
}

// Check optimises the objectives subject to the hard assertions and the Boolean assumptions. Sat
// means the objectives are optimal; Unknown means Z3 stopped early (timeout, interrupt), see
// ReasonUnknown, Model and the bounds.
func (o *Optimizer) Check(assumptions ...Term) (Status, error) {
	if err := o.lock(); err != nil {
		return Unknown, err
	}
	defer o.c.unlock()
	as, err := o.c.boolArgsErr("Optimizer.Check", assumptions)
	if err != nil {
		return Unknown, err
	}
	l := C.Z3_optimize_check(o.c.z, o.o, C.uint(len(as)), ptr(as))
	if err := o.c.err("Optimizer.Check"); err != nil {
		return Unknown, err
	}
	return status(l), nil
}

// ReasonUnknown explains the last Unknown result.
func (o *Optimizer) ReasonUnknown() string {
	if o.lock() != nil {
		return ""
	}
	defer o.c.unlock()
	r := C.GoString(C.Z3_optimize_get_reason_unknown(o.c.z, o.o))
	_ = o.c.err("Optimizer.ReasonUnknown")
	return r
}

// Model returns the best model of the last Check.
func (o *Optimizer) Model() (*Model, error) {
	if err := o.lock(); err != nil {
		return nil, err
	}
	defer o.c.unlock()
	m := C.Z3_optimize_get_model(o.c.z, o.o)
	if err := o.c.err("Optimizer.Model"); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("z3: Optimizer.Model: no model")
	}
	return o.c.newModel(m), nil
}

// Bound is a bound on an objective value, of the form Inf·∞ + Value + Eps·ε where ε is a positive
// infinitesimal (a strict bound on a real objective).
type Bound struct {
	Inf   int      // -1: −∞, +1: +∞, 0: finite
	Value *big.Rat // the finite part
	Eps   int      // sign of the infinitesimal part
}

// Float64 returns b as a float64: ±Inf when infinite, else Value (the infinitesimal is dropped).
func (b Bound) Float64() float64 {
	if b.Inf != 0 {
		return math.Inf(b.Inf)
	}
	f, _ := b.Value.Float64()
	return f
}

func (b Bound) String() string {
	switch {
	case b.Inf < 0:
		return "-oo"
	case b.Inf > 0:
		return "+oo"
	case b.Eps < 0:
		return b.Value.RatString() + "-eps"
	case b.Eps > 0:
		return b.Value.RatString() + "+eps"
	}
	return b.Value.RatString()
}

// Cmp compares b and x: -1 if b < x, 0 if equal, +1 if b > x.
func (b Bound) Cmp(x Bound) int {
	if b.Inf != x.Inf {
		return cmpInt(b.Inf, x.Inf)
	}
	if b.Inf != 0 {
		return 0
	}
	if c := b.Value.Cmp(x.Value); c != 0 {
		return c
	}
	return cmpInt(b.Eps, x.Eps)
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Bounds returns the interval [lo, hi] that Z3 has established for obj's value after Check: at
// optimum lo = hi = the optimum. After an early stop (Unknown), the end on the side of the
// optimisation direction is Z3's proven bound and the other end is the value of the best model found
// (for a minimised objective, lo is the proven bound and hi the incumbent; for a maximised one, the
// reverse); an end Z3 knows nothing about is infinite.
//
// Z3 4.8.12 reports the two ends swapped for a maximised objective that it internally turned into a
// MaxSMT problem (a sum of 0/1 if-then-else terms is): Z3_optimize_get_lower then returns the upper
// end. Bounds therefore orders the pair itself.
func (o *Optimizer) Bounds(obj Objective) (lo, hi Bound, err error) {
	lo, err = o.bound("Optimizer.Bounds", obj, func(i C.uint) C.Z3_ast_vector { return C.Z3_optimize_get_lower_as_vector(o.c.z, o.o, i) })
	if err != nil {
		return Bound{}, Bound{}, err
	}
	hi, err = o.bound("Optimizer.Bounds", obj, func(i C.uint) C.Z3_ast_vector { return C.Z3_optimize_get_upper_as_vector(o.c.z, o.o, i) })
	if err != nil {
		return Bound{}, Bound{}, err
	}
	if lo.Cmp(hi) > 0 {
		lo, hi = hi, lo
	}
	return lo, hi, nil
}

func (o *Optimizer) bound(op string, obj Objective, get func(C.uint) C.Z3_ast_vector) (Bound, error) {
	if obj.o != o {
		return Bound{}, fmt.Errorf("z3: %s: objective of another optimizer", op)
	}
	if err := o.lock(); err != nil {
		return Bound{}, err
	}
	defer o.c.unlock()
	v := get(C.uint(obj.idx))
	if err := o.c.err(op); err != nil {
		return Bound{}, err
	}
	C.Z3_ast_vector_inc_ref(o.c.z, v)
	defer C.Z3_ast_vector_dec_ref(o.c.z, v)
	if n := C.Z3_ast_vector_size(o.c.z, v); n != 3 {
		return Bound{}, fmt.Errorf("z3: %s: bound vector of size %d, want 3", op, n)
	}
	var rs [3]*big.Rat
	for i := range rs {
		a := C.Z3_ast_vector_get(o.c.z, v, C.uint(i))
		if err := o.c.err(op); err != nil {
			return Bound{}, err
		}
		r, err := o.c.rat(op, a)
		if err != nil {
			return Bound{}, err
		}
		rs[i] = r
	}
	return Bound{Inf: rs[0].Sign(), Value: rs[1], Eps: rs[2].Sign()}, nil
}
