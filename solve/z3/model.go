package z3

/*
#include <z3.h>
*/
import "C"

import (
	"fmt"
	"math/big"
	"runtime"
	"unsafe"
)

// Model is a satisfying assignment returned by Solver.Model or Optimizer.Model. Evaluation uses model
// completion: a constant the model leaves unconstrained gets a default value.
type Model struct {
	c       *Context
	m       C.Z3_model // nil once closed
	cleanup runtime.Cleanup
}

// newModel takes a reference to m. Called with mu held.
func (c *Context) newModel(m C.Z3_model) *Model {
	C.Z3_model_inc_ref(c.z, m)
	md := &Model{c: c, m: m}
	md.cleanup = runtime.AddCleanup(md, c.queue, release{kindModel, unsafe.Pointer(m)})
	return md
}

// Close releases the model. It is idempotent.
func (m *Model) Close() {
	if m.c.lock() != nil {
		return
	}
	defer m.c.unlock()
	if m.m != nil {
		m.cleanup.Stop()
		C.Z3_model_dec_ref(m.c.z, m.m)
		m.m = nil
	}
}

// eval evaluates t in m and calls f with the result while the lock is held.
func (m *Model) eval(op string, t Term, want Sort, f func(v C.Z3_ast) error) error {
	if err := m.c.lock(); err != nil {
		return err
	}
	defer m.c.unlock()
	if m.m == nil {
		return ErrClosed
	}
	a := m.c.ast(op, t)
	if want == BoolSort && t.r.s != BoolSort || want != BoolSort && t.r.s == BoolSort {
		return fmt.Errorf("z3: %s: term %s is %v", op, C.GoString(C.Z3_ast_to_string(m.c.z, a)), t.r.s)
	}
	var v C.Z3_ast
	ok := C.Z3_model_eval(m.c.z, m.m, a, true, &v)
	if err := m.c.err(op); err != nil {
		return err
	}
	if !ok || v == nil {
		return fmt.Errorf("z3: %s: cannot evaluate %s", op, C.GoString(C.Z3_ast_to_string(m.c.z, a)))
	}
	C.Z3_inc_ref(m.c.z, v)
	defer C.Z3_dec_ref(m.c.z, v)
	return f(v)
}

// Bool returns the value of the Boolean term t in m.
func (m *Model) Bool(t Term) (bool, error) {
	var out bool
	err := m.eval("Model.Bool", t, BoolSort, func(v C.Z3_ast) error {
		switch C.Z3_get_bool_value(m.c.z, v) {
		case C.Z3_L_TRUE:
			out = true
		case C.Z3_L_FALSE:
		default:
			return fmt.Errorf("z3: Model.Bool: value %s is not a Boolean literal", C.GoString(C.Z3_ast_to_string(m.c.z, v)))
		}
		return nil
	})
	return out, err
}

// Rat returns the exact value of the numeric term t in m. Irrational values (possible only with
// non-linear real arithmetic) are an error.
func (m *Model) Rat(t Term) (*big.Rat, error) {
	var out *big.Rat
	err := m.eval("Model.Rat", t, RealSort, func(v C.Z3_ast) error {
		r, err := m.c.rat("Model.Rat", v)
		out = r
		return err
	})
	return out, err
}

// rat converts a numeral AST to a big.Rat. Called with mu held.
func (c *Context) rat(op string, v C.Z3_ast) (*big.Rat, error) {
	if !C.Z3_is_numeral_ast(c.z, v) {
		return nil, fmt.Errorf("z3: %s: value %s is not a rational numeral", op, C.GoString(C.Z3_ast_to_string(c.z, v)))
	}
	s := C.GoString(C.Z3_get_numeral_string(c.z, v))
	if err := c.err(op); err != nil {
		return nil, err
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("z3: %s: cannot parse numeral %q", op, s)
	}
	return r, nil
}

// Int returns the value of the numeric term t in m; an error if it is not an integer or does not
// fit in an int64.
func (m *Model) Int(t Term) (int64, error) {
	r, err := m.Rat(t)
	if err != nil {
		return 0, fmt.Errorf("z3: Model.Int: %w", err)
	}
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, fmt.Errorf("z3: Model.Int: value %s is not an int64", r.RatString())
	}
	return r.Num().Int64(), nil
}

// Float returns the value of the numeric term t in m, rounded to the nearest float64.
func (m *Model) Float(t Term) (float64, error) {
	r, err := m.Rat(t)
	if err != nil {
		return 0, fmt.Errorf("z3: Model.Float: %w", err)
	}
	f, _ := r.Float64()
	return f, nil
}
