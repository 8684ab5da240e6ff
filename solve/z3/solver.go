package z3

/*
#include <z3.h>
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"time"
	"unsafe"
)

// Status is the outcome of a Check.
type Status int8

// Check outcomes.
const (
	// Unknown: Z3 gave up (timeout, interrupt, incompleteness); see ReasonUnknown.
	Unknown Status = iota
	// Sat: the assertions are satisfiable; a model is available.
	Sat
	// Unsat: the assertions are unsatisfiable; an unsat core is available if assertions were named
	// or assumptions given.
	Unsat
)

func (s Status) String() string {
	switch s {
	case Sat:
		return "sat"
	case Unsat:
		return "unsat"
	}
	return "unknown"
}

func status(l C.Z3_lbool) Status {
	switch l {
	case C.Z3_L_TRUE:
		return Sat
	case C.Z3_L_FALSE:
		return Unsat
	}
	return Unknown
}

// timeoutMillis converts d to Z3's timeout parameter (milliseconds, 0 meaning none).
func timeoutMillis(op string, d time.Duration) (uint32, error) {
	if d < 0 {
		return 0, fmt.Errorf("z3: %s: negative timeout %v", op, d)
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if ms > math.MaxUint32-1 {
		ms = math.MaxUint32 - 1 // Z3 treats UINT_MAX as "no timeout"
	}
	return uint32(ms), nil
}

// Solver is a Z3 solver for the satisfiability of the asserted Boolean terms. It belongs to one
// Context and follows its locking rules.
type Solver struct {
	c       *Context
	s       C.Z3_solver // nil once closed
	cleanup runtime.Cleanup
}

// NewSolver returns Z3's general solver (Z3_mk_solver): for a single check without push or
// assumptions it first applies the logic-specific preprocessing tactics, which is strongest on
// hard problems but costs about 10 ms even on tiny ones; in incremental use it behaves like
// NewSimpleSolver. It panics if c is closed.
func (c *Context) NewSolver() *Solver {
	return c.newSolver("NewSolver", func() C.Z3_solver { return C.Z3_mk_solver(c.z) })
}

// NewSimpleSolver returns Z3's plain incremental SMT solver (Z3_mk_simple_solver), without
// logic-specific preprocessing: the cheapest per check (well under a millisecond on small problems),
// for encoders that issue many small checks. It panics if c is closed.
func (c *Context) NewSimpleSolver() *Solver {
	return c.newSolver("NewSimpleSolver", func() C.Z3_solver { return C.Z3_mk_simple_solver(c.z) })
}

// NewSolverForLogic returns a solver specialised to an SMT-LIB logic, e.g. "QF_IDL" (integer
// difference logic, where Z3 uses its graph-based difference-logic engine instead of the simplex),
// for encoders that know their problem's fragment. It panics if c is closed.
func (c *Context) NewSolverForLogic(logic string) *Solver {
	return c.newSolver("NewSolverForLogic", func() C.Z3_solver { return C.Z3_mk_solver_for_logic(c.z, c.symbol(logic)) })
}

func (c *Context) newSolver(op string, mk func() C.Z3_solver) *Solver {
	c.mustLock()
	defer c.unlock()
	z := mk()
	c.must(op)
	C.Z3_solver_inc_ref(c.z, z)
	s := &Solver{c: c, s: z}
	s.cleanup = runtime.AddCleanup(s, c.queue, release{kindSolver, unsafe.Pointer(z)})
	return s
}

// Close releases the solver. It is idempotent.
func (s *Solver) Close() {
	if s.c.lock() != nil {
		return
	}
	defer s.c.unlock()
	if s.s != nil {
		s.cleanup.Stop()
		C.Z3_solver_dec_ref(s.c.z, s.s)
		s.s = nil
	}
}

// lock takes the context lock and checks that s is open.
func (s *Solver) lock() error {
	if err := s.c.lock(); err != nil {
		return err
	}
	if s.s == nil {
		s.c.unlock()
		return ErrClosed
	}
	return nil
}

// Assert adds Boolean terms to the solver.
func (s *Solver) Assert(ts ...Term) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.c.unlock()
	for i, t := range ts {
		a, err := s.c.boolArgErr("Solver.Assert", t, i)
		if err != nil {
			return err
		}
		C.Z3_solver_assert(s.c.z, s.s, a)
		if err := s.c.err("Solver.Assert"); err != nil {
			return err
		}
	}
	return nil
}

// AssertNamed adds t, tracked by a fresh Boolean constant called name: if the assertions turn out
// unsatisfiable, UnsatCore reports name when t is part of the conflict. Names should be unique;
// assertions sharing a name are tracked together.
func (s *Solver) AssertNamed(name string, t Term) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.c.unlock()
	a, err := s.c.boolArgErr("Solver.AssertNamed", t, 0)
	if err != nil {
		return err
	}
	p := C.Z3_mk_const(s.c.z, s.c.symbol(name), s.c.boolSort)
	if err := s.c.err("Solver.AssertNamed"); err != nil {
		return err
	}
	C.Z3_inc_ref(s.c.z, p)
	defer C.Z3_dec_ref(s.c.z, p)
	C.Z3_solver_assert_and_track(s.c.z, s.s, a, p)
	return s.c.err("Solver.AssertNamed")
}

// Push opens a backtracking scope.
func (s *Solver) Push() error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.c.unlock()
	C.Z3_solver_push(s.c.z, s.s)
	return s.c.err("Solver.Push")
}

// Pop removes the n innermost scopes and their assertions.
func (s *Solver) Pop(n int) error {
	if n < 0 || int64(n) > math.MaxUint32 {
		return fmt.Errorf("z3: Solver.Pop: invalid count %d", n)
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.c.unlock()
	C.Z3_solver_pop(s.c.z, s.s, C.uint(n))
	return s.c.err("Solver.Pop")
}

// SetTimeout bounds each later Check to d (0: no limit); a check that runs out returns Unknown with
// reason "timeout" (or "canceled").
func (s *Solver) SetTimeout(d time.Duration) error {
	ms, err := timeoutMillis("Solver.SetTimeout", d)
	if err != nil {
		return err
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.c.unlock()
	return s.c.setTimeout("Solver.SetTimeout", ms, func(p C.Z3_params) { C.Z3_solver_set_params(s.c.z, s.s, p) })
}

// SetResourceLimit bounds each later Check to about n units of Z3's internal work (its "rlimit";
// 0: no limit). Unlike a timeout it counts work, not seconds, so a check that runs out does so at
// the same point on any machine: a budget that keeps results deterministic. A check that runs out
// returns Unknown with a reason naming the limit.
func (s *Solver) SetResourceLimit(n uint32) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.c.unlock()
	return s.c.setUint("Solver.SetResourceLimit", "rlimit", n, func(p C.Z3_params) { C.Z3_solver_set_params(s.c.z, s.s, p) })
}

// Check decides the satisfiability of the assertions, assuming in addition the Boolean terms
// assumptions (which are not asserted: they hold only for this check, and the unsat core may name
// them). A Z3 error is returned as an error with status Unknown; a timeout or interrupt is not an
// error (Unknown, see ReasonUnknown).
func (s *Solver) Check(assumptions ...Term) (Status, error) {
	if err := s.lock(); err != nil {
		return Unknown, err
	}
	defer s.c.unlock()
	as, err := s.c.boolArgsErr("Solver.Check", assumptions)
	if err != nil {
		return Unknown, err
	}
	var l C.Z3_lbool
	if len(as) == 0 {
		l = C.Z3_solver_check(s.c.z, s.s)
	} else {
		l = C.Z3_solver_check_assumptions(s.c.z, s.s, C.uint(len(as)), ptr(as))
	}
	if err := s.c.err("Solver.Check"); err != nil {
		return Unknown, err
	}
	return status(l), nil
}

// ReasonUnknown explains the last Unknown result, e.g. "timeout" or "canceled".
func (s *Solver) ReasonUnknown() string {
	if s.lock() != nil {
		return ""
	}
	defer s.c.unlock()
	r := C.GoString(C.Z3_solver_get_reason_unknown(s.c.z, s.s))
	_ = s.c.err("Solver.ReasonUnknown")
	return r
}

// UnsatCore returns, after an Unsat check, the names of a subset of named assertions and assumptions
// that is already unsatisfiable: the name given to AssertNamed, the name of an assumption that is a
// Boolean constant, and the SMT-LIB text of any other assumption.
func (s *Solver) UnsatCore() ([]string, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.c.unlock()
	v := C.Z3_solver_get_unsat_core(s.c.z, s.s)
	if err := s.c.err("Solver.UnsatCore"); err != nil {
		return nil, err
	}
	return s.c.names("Solver.UnsatCore", v)
}

// names returns the names of the terms of the vector v (see UnsatCore). Called with mu held.
func (c *Context) names(op string, v C.Z3_ast_vector) ([]string, error) {
	C.Z3_ast_vector_inc_ref(c.z, v)
	defer C.Z3_ast_vector_dec_ref(c.z, v)
	n := int(C.Z3_ast_vector_size(c.z, v))
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		a := C.Z3_ast_vector_get(c.z, v, C.uint(i))
		if err := c.err(op); err != nil {
			return nil, err
		}
		out = append(out, c.name(a))
	}
	return out, c.err(op)
}

// name returns the name of a constant, or the SMT-LIB text of any other term. Called with mu held.
func (c *Context) name(a C.Z3_ast) string {
	if C.Z3_is_app(c.z, a) {
		app := C.Z3_to_app(c.z, a)
		if C.Z3_get_app_num_args(c.z, app) == 0 {
			d := C.Z3_get_app_decl(c.z, app)
			sym := C.Z3_get_decl_name(c.z, d)
			if C.Z3_get_symbol_kind(c.z, sym) == C.Z3_STRING_SYMBOL {
				return C.GoString(C.Z3_get_symbol_string(c.z, sym))
			}
		}
	}
	return C.GoString(C.Z3_ast_to_string(c.z, a))
}

// Model returns the model of the last Sat check (or, after Unknown, whatever partial model Z3 kept;
// an error if there is none).
func (s *Solver) Model() (*Model, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.c.unlock()
	m := C.Z3_solver_get_model(s.c.z, s.s)
	if err := s.c.err("Solver.Model"); err != nil {
		return nil, err
	}
	return s.c.newModel(m), nil
}
