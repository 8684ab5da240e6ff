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
	"unsafe"
)

// Sort is the sort (type) of a Term.
type Sort uint8

// The sorts the binding supports.
const (
	BoolSort Sort = iota + 1
	IntSort
	RealSort
)

func (s Sort) String() string {
	switch s {
	case BoolSort:
		return "Bool"
	case IntSort:
		return "Int"
	case RealSort:
		return "Real"
	}
	return fmt.Sprintf("Sort(%d)", uint8(s))
}

// Term is a Z3 expression (an AST) of sort Bool, Int or Real, owned by one Context. The zero Term is
// invalid. Terms are values: copy them freely; the underlying Z3 reference is released when the last
// copy becomes unreachable.
type Term struct{ r *termRef }

type termRef struct {
	c *Context
	a C.Z3_ast
	s Sort
}

// Sort returns t's sort.
func (t Term) Sort() Sort {
	if t.r == nil {
		return 0
	}
	return t.r.s
}

// IsValid reports whether t is a term (not the zero Term).
func (t Term) IsValid() bool { return t.r != nil }

// String returns t in SMT-LIB 2 syntax.
func (t Term) String() string {
	if t.r == nil {
		return "<invalid term>"
	}
	c := t.r.c
	if err := c.lock(); err != nil {
		return "<closed>"
	}
	defer c.unlock()
	return C.GoString(C.Z3_ast_to_string(c.z, t.r.a))
}

// wrap takes a Z3 reference to a and returns it as a Term. Called with mu held, right after the call
// that produced a (a Z3 result with reference count 0 survives only until the next API call).
func (c *Context) wrap(a C.Z3_ast, s Sort) Term {
	C.Z3_inc_ref(c.z, a)
	r := &termRef{c: c, a: a, s: s}
	runtime.AddCleanup(r, c.queue, release{kindAST, unsafe.Pointer(a)})
	return Term{r}
}

// ast returns t's AST after checking that it belongs to c. Called with mu held.
func (c *Context) ast(op string, t Term) C.Z3_ast {
	if t.r == nil {
		panic("z3: " + op + ": zero Term")
	}
	if t.r.c != c {
		panic("z3: " + op + ": Term from another Context")
	}
	return t.r.a
}

// build runs f with the context lock held, checks for a Z3 error, wraps the result and then
// releases the intermediate results f kept in its scratch.
func (c *Context) build(op string, f func(sc *scratch) (C.Z3_ast, Sort)) Term {
	c.mustLock()
	defer c.unlock()
	sc := &scratch{c: c}
	a, s := f(sc)
	c.must(op)
	if a == nil {
		panic("z3: " + op + ": Z3 returned no term")
	}
	t := c.wrap(a, s)
	sc.free()
	return t
}

// scratch holds Z3 references to intermediate results for the duration of one operation.
type scratch struct {
	c  *Context
	as []C.Z3_ast
}

func (s *scratch) keep(a C.Z3_ast) C.Z3_ast {
	C.Z3_inc_ref(s.c.z, a)
	s.as = append(s.as, a)
	return a
}

func (s *scratch) free() {
	for _, a := range s.as {
		C.Z3_dec_ref(s.c.z, a)
	}
	s.as = s.as[:0]
}

// ptr returns a pointer to the first element of as for passing to C (nil if empty).
func ptr(as []C.Z3_ast) *C.Z3_ast {
	if len(as) == 0 {
		return nil
	}
	return &as[0]
}

// Bool constants and literals.

// BoolConst returns the Boolean constant (free variable) called name. The same name always denotes
// the same constant.
func (c *Context) BoolConst(name string) Term { return c.mkConst("BoolConst", name, BoolSort) }

// IntConst returns the integer constant (free variable) called name.
func (c *Context) IntConst(name string) Term { return c.mkConst("IntConst", name, IntSort) }

// RealConst returns the real constant (free variable) called name.
func (c *Context) RealConst(name string) Term { return c.mkConst("RealConst", name, RealSort) }

func (c *Context) sortOf(s Sort) C.Z3_sort {
	switch s {
	case BoolSort:
		return c.boolSort
	case IntSort:
		return c.intSort
	case RealSort:
		return c.realSort
	}
	panic("z3: unknown sort")
}

func (c *Context) mkConst(op, name string, s Sort) Term {
	return c.build(op, func(sc *scratch) (C.Z3_ast, Sort) {
		return C.Z3_mk_const(c.z, c.symbol(name), c.sortOf(s)), s
	})
}

// Bool returns the literal true or false.
func (c *Context) Bool(v bool) Term {
	return c.build("Bool", func(sc *scratch) (C.Z3_ast, Sort) {
		if v {
			return C.Z3_mk_true(c.z), BoolSort
		}
		return C.Z3_mk_false(c.z), BoolSort
	})
}

// Int returns the integer literal v.
func (c *Context) Int(v int64) Term {
	return c.build("Int", func(sc *scratch) (C.Z3_ast, Sort) {
		return C.Z3_mk_int64(c.z, C.int64_t(v), c.intSort), IntSort
	})
}

// Rat returns the real literal r (exact).
func (c *Context) Rat(r *big.Rat) Term {
	s := r.RatString()
	return c.build("Rat", func(sc *scratch) (C.Z3_ast, Sort) {
		cs := C.CString(s)
		defer C.free(unsafe.Pointer(cs))
		return C.Z3_mk_numeral(c.z, cs, c.realSort), RealSort
	})
}

// Real returns the real literal with exactly the value of f. It panics if f is NaN or infinite.
func (c *Context) Real(f float64) Term {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		panic(fmt.Sprintf("z3: Real(%v): not a finite number", f))
	}
	return c.Rat(new(big.Rat).SetFloat64(f))
}

// Arithmetic.

// numeric returns the ASTs of ts converted to their common arithmetic sort (Real if any is Real,
// else Int), keeping conversions in sc. Called with mu held.
func (c *Context) numeric(op string, sc *scratch, ts []Term) ([]C.Z3_ast, Sort) {
	s := IntSort
	as := make([]C.Z3_ast, len(ts))
	for i, t := range ts {
		as[i] = c.ast(op, t)
		switch t.r.s {
		case RealSort:
			s = RealSort
		case IntSort:
		default:
			panic(fmt.Sprintf("z3: %s: argument %d is %v, want Int or Real", op, i, t.r.s))
		}
	}
	if s == RealSort {
		for i, t := range ts {
			if t.r.s == IntSort {
				as[i] = sc.keep(C.Z3_mk_int2real(c.z, as[i]))
			}
		}
	}
	return as, s
}

// arith builds an n-ary arithmetic term with mk.
func (c *Context) arith(op string, ts []Term, mk func(n C.uint, as *C.Z3_ast) C.Z3_ast) Term {
	if len(ts) == 0 {
		panic("z3: " + op + ": no arguments")
	}
	return c.build(op, func(sc *scratch) (C.Z3_ast, Sort) {
		as, s := c.numeric(op, sc, ts)
		a := mk(C.uint(len(as)), ptr(as))
		return a, s
	})
}

// Add returns the sum of ts (at least one). Int arguments are converted to Real if any is Real.
func (c *Context) Add(ts ...Term) Term {
	return c.arith("Add", ts, func(n C.uint, as *C.Z3_ast) C.Z3_ast { return C.Z3_mk_add(c.z, n, as) })
}

// Sub returns a - ts[0] - ts[1] - ...
func (c *Context) Sub(a Term, ts ...Term) Term {
	all := append([]Term{a}, ts...)
	if len(all) == 1 {
		return c.Neg(a)
	}
	return c.arith("Sub", all, func(n C.uint, as *C.Z3_ast) C.Z3_ast { return C.Z3_mk_sub(c.z, n, as) })
}

// Mul returns the product of ts (at least one): multiplication by a constant (c.Int(3), c.Real(0.5))
// keeps terms linear; a product of two variables is non-linear arithmetic.
func (c *Context) Mul(ts ...Term) Term {
	return c.arith("Mul", ts, func(n C.uint, as *C.Z3_ast) C.Z3_ast { return C.Z3_mk_mul(c.z, n, as) })
}

// Neg returns -t.
func (c *Context) Neg(t Term) Term {
	return c.arith("Neg", []Term{t}, func(_ C.uint, as *C.Z3_ast) C.Z3_ast { return C.Z3_mk_unary_minus(c.z, *as) })
}

// ToReal converts an Int term to Real (a Real term is returned as is).
func (c *Context) ToReal(t Term) Term {
	if t.Sort() == RealSort {
		return t
	}
	return c.build("ToReal", func(sc *scratch) (C.Z3_ast, Sort) {
		a := c.ast("ToReal", t)
		if t.r.s != IntSort {
			panic("z3: ToReal: argument is " + t.r.s.String())
		}
		return C.Z3_mk_int2real(c.z, a), RealSort
	})
}

func (c *Context) cmp(op string, a, b Term, mk func(x, y C.Z3_ast) C.Z3_ast) Term {
	return c.build(op, func(sc *scratch) (C.Z3_ast, Sort) {
		as, _ := c.numeric(op, sc, []Term{a, b})
		r := mk(as[0], as[1])
		return r, BoolSort
	})
}

// Lt returns a < b.
func (c *Context) Lt(a, b Term) Term {
	return c.cmp("Lt", a, b, func(x, y C.Z3_ast) C.Z3_ast { return C.Z3_mk_lt(c.z, x, y) })
}

// Le returns a <= b.
func (c *Context) Le(a, b Term) Term {
	return c.cmp("Le", a, b, func(x, y C.Z3_ast) C.Z3_ast { return C.Z3_mk_le(c.z, x, y) })
}

// Gt returns a > b.
func (c *Context) Gt(a, b Term) Term {
	return c.cmp("Gt", a, b, func(x, y C.Z3_ast) C.Z3_ast { return C.Z3_mk_gt(c.z, x, y) })
}

// Ge returns a >= b.
func (c *Context) Ge(a, b Term) Term {
	return c.cmp("Ge", a, b, func(x, y C.Z3_ast) C.Z3_ast { return C.Z3_mk_ge(c.z, x, y) })
}

// Eq returns a = b: both Bool, or both numeric (Int is converted to Real if the other is Real).
func (c *Context) Eq(a, b Term) Term {
	if a.Sort() == BoolSort || b.Sort() == BoolSort {
		return c.build("Eq", func(sc *scratch) (C.Z3_ast, Sort) {
			x, y := c.boolArg("Eq", a, 0), c.boolArg("Eq", b, 1)
			return C.Z3_mk_eq(c.z, x, y), BoolSort
		})
	}
	return c.cmp("Eq", a, b, func(x, y C.Z3_ast) C.Z3_ast { return C.Z3_mk_eq(c.z, x, y) })
}

// Ite returns if cond then a else b. a and b are both Bool or both numeric.
func (c *Context) Ite(cond, a, b Term) Term {
	return c.build("Ite", func(sc *scratch) (C.Z3_ast, Sort) {
		x := c.boolArg("Ite", cond, 0)
		var as []C.Z3_ast
		var s Sort
		if a.Sort() == BoolSort || b.Sort() == BoolSort {
			as, s = []C.Z3_ast{c.boolArg("Ite", a, 1), c.boolArg("Ite", b, 2)}, BoolSort
		} else {
			as, s = c.numeric("Ite", sc, []Term{a, b})
		}
		r := C.Z3_mk_ite(c.z, x, as[0], as[1])
		return r, s
	})
}

// Boolean connectives.

// boolArg returns the AST of the Boolean term t; it panics if t is not Bool. Called with mu held.
func (c *Context) boolArg(op string, t Term, i int) C.Z3_ast {
	a, err := c.boolArgErr(op, t, i)
	if err != nil {
		panic(err)
	}
	return a
}

// boolArgErr is boolArg for operations that return errors: a non-Bool term is an error (a zero or
// foreign Term still panics). Called with mu held.
func (c *Context) boolArgErr(op string, t Term, i int) (C.Z3_ast, error) {
	a := c.ast(op, t)
	if t.r.s != BoolSort {
		return nil, fmt.Errorf("z3: %s: argument %d is %v, want Bool", op, i, t.r.s)
	}
	return a, nil
}

// boolArgsErr is boolArgErr for several terms.
func (c *Context) boolArgsErr(op string, ts []Term) ([]C.Z3_ast, error) {
	as := make([]C.Z3_ast, len(ts))
	for i, t := range ts {
		a, err := c.boolArgErr(op, t, i)
		if err != nil {
			return nil, err
		}
		as[i] = a
	}
	return as, nil
}

func (c *Context) boolArgs(op string, ts []Term) []C.Z3_ast {
	as := make([]C.Z3_ast, len(ts))
	for i, t := range ts {
		as[i] = c.boolArg(op, t, i)
	}
	return as
}

// And returns the conjunction of ts (true if none).
func (c *Context) And(ts ...Term) Term {
	return c.build("And", func(sc *scratch) (C.Z3_ast, Sort) {
		as := c.boolArgs("And", ts)
		if len(as) == 0 {
			return C.Z3_mk_true(c.z), BoolSort
		}
		return C.Z3_mk_and(c.z, C.uint(len(as)), ptr(as)), BoolSort
	})
}

// Or returns the disjunction of ts (false if none).
func (c *Context) Or(ts ...Term) Term {
	return c.build("Or", func(sc *scratch) (C.Z3_ast, Sort) {
		as := c.boolArgs("Or", ts)
		if len(as) == 0 {
			return C.Z3_mk_false(c.z), BoolSort
		}
		return C.Z3_mk_or(c.z, C.uint(len(as)), ptr(as)), BoolSort
	})
}

// Not returns ¬t.
func (c *Context) Not(t Term) Term {
	return c.build("Not", func(sc *scratch) (C.Z3_ast, Sort) {
		return C.Z3_mk_not(c.z, c.boolArg("Not", t, 0)), BoolSort
	})
}

// Implies returns a ⇒ b.
func (c *Context) Implies(a, b Term) Term {
	return c.build("Implies", func(sc *scratch) (C.Z3_ast, Sort) {
		return C.Z3_mk_implies(c.z, c.boolArg("Implies", a, 0), c.boolArg("Implies", b, 1)), BoolSort
	})
}

// Pseudo-Boolean constraints. Z3 takes their coefficients and bounds as 32-bit integers; values out
// of range are reported as errors rather than truncated.

// AtMost returns "at most k of ts are true".
func (c *Context) AtMost(k int, ts ...Term) (Term, error) {
	return c.card("AtMost", k, ts, func(n C.uint, as *C.Z3_ast, k C.uint) C.Z3_ast { return C.Z3_mk_atmost(c.z, n, as, k) })
}

// AtLeast returns "at least k of ts are true".
func (c *Context) AtLeast(k int, ts ...Term) (Term, error) {
	return c.card("AtLeast", k, ts, func(n C.uint, as *C.Z3_ast, k C.uint) C.Z3_ast { return C.Z3_mk_atleast(c.z, n, as, k) })
}

func (c *Context) card(op string, k int, ts []Term, mk func(C.uint, *C.Z3_ast, C.uint) C.Z3_ast) (Term, error) {
	if k < 0 || int64(k) > math.MaxUint32 {
		return Term{}, fmt.Errorf("z3: %s: bound %d out of the range of Z3's unsigned 32-bit bound", op, k)
	}
	return c.build(op, func(sc *scratch) (C.Z3_ast, Sort) {
		as := c.boolArgs(op, ts)
		return mk(C.uint(len(as)), ptr(as), C.uint(k)), BoolSort
	}), nil
}

// PbLe returns Σ coeffs[i]·ts[i] <= k over Boolean ts (true counts 1).
func (c *Context) PbLe(ts []Term, coeffs []int64, k int64) (Term, error) {
	return c.pb("PbLe", ts, coeffs, k, func(n C.uint, as *C.Z3_ast, cs *C.int, k C.int) C.Z3_ast {
		return C.Z3_mk_pble(c.z, n, as, cs, k)
	})
}

// PbGe returns Σ coeffs[i]·ts[i] >= k over Boolean ts.
func (c *Context) PbGe(ts []Term, coeffs []int64, k int64) (Term, error) {
	return c.pb("PbGe", ts, coeffs, k, func(n C.uint, as *C.Z3_ast, cs *C.int, k C.int) C.Z3_ast {
		return C.Z3_mk_pbge(c.z, n, as, cs, k)
	})
}

// PbEq returns Σ coeffs[i]·ts[i] = k over Boolean ts.
func (c *Context) PbEq(ts []Term, coeffs []int64, k int64) (Term, error) {
	return c.pb("PbEq", ts, coeffs, k, func(n C.uint, as *C.Z3_ast, cs *C.int, k C.int) C.Z3_ast {
		return C.Z3_mk_pbeq(c.z, n, as, cs, k)
	})
}

func in32(v int64) bool { return v >= math.MinInt32 && v <= math.MaxInt32 }

func (c *Context) pb(op string, ts []Term, coeffs []int64, k int64, mk func(C.uint, *C.Z3_ast, *C.int, C.int) C.Z3_ast) (Term, error) {
	if len(ts) != len(coeffs) {
		return Term{}, fmt.Errorf("z3: %s: %d terms but %d coefficients", op, len(ts), len(coeffs))
	}
	cs := make([]C.int, len(coeffs))
	for i, v := range coeffs {
		if !in32(v) {
			return Term{}, fmt.Errorf("z3: %s: coefficient %d (%d) out of Z3's 32-bit range", op, i, v)
		}
		cs[i] = C.int(v)
	}
	if !in32(k) {
		return Term{}, fmt.Errorf("z3: %s: bound %d out of Z3's 32-bit range", op, k)
	}
	return c.build(op, func(sc *scratch) (C.Z3_ast, Sort) {
		as := c.boolArgs(op, ts)
		var cp *C.int
		if len(cs) > 0 {
			cp = &cs[0]
		}
		return mk(C.uint(len(as)), ptr(as), cp, C.int(k)), BoolSort
	}), nil
}
