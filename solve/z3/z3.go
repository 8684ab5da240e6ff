// Package z3 is hap's thin cgo binding to the Z3 SMT solver (Debian's libz3-dev, Z3 4.8.12). It owns
// the Z3 context and its lifetime, Boolean, integer and real terms with linear arithmetic and
// pseudo-Boolean constraints, a Solver (assertions, named assertions, push/pop, check under
// assumptions, unsat cores, models) and an Optimizer (minimise/maximise, weighted soft constraints,
// time limits, objective bounds).
//
// It imports nothing of hap: the encoders build terms through it, never the other way round.
//
// # Lifetime and memory
//
// A Context is created with NewContext and must be released with Close, which frees everything Z3
// allocated for it at once. Contexts use Z3's reference-counting mode (Z3_mk_context_rc): every AST,
// solver, optimizer and model the binding hands to Go holds one Z3 reference. Terms release theirs
// when the garbage collector finds them unreachable (through runtime.AddCleanup); solvers,
// optimizers and models release theirs on Close, or on collection if Close was forgotten. Releases
// found by the collector are queued and performed the next time the owning context is used, never
// from the collector's goroutine, so they never race with a running call.
//
// # Errors
//
// Z3's default error handler calls exit(1). Every context instead gets a C error handler (written in
// the cgo preamble) that simply returns; Z3 records the error code and message in the context before
// calling it, and the binding reads them back after each fallible call and returns them as an *Error.
// Operations that can fail on valid input (Assert, Check, model evaluation, pseudo-Boolean
// coefficient ranges, ...) return errors. Term constructors panic on programmer errors: a zero Term,
// a Term from another Context, a sort mismatch (a Bool where a number is needed), or a closed
// Context.
//
// # Concurrency
//
// A Z3 context is not thread-safe. Each Context therefore owns a mutex that guards every call into Z3
// on it, so several goroutines may share one Context (and its solvers, terms and models) safely; their
// calls are serialised. Separate Contexts share nothing and run in parallel. Interrupt is the one
// exception: it does not take the context lock (a running Check holds it) and may be called from any
// goroutine at any time to make a running Check return Unknown.
package z3

/*
#cgo pkg-config: z3
#include <stdlib.h>
#include <z3.h>

// hap_z3_on_error replaces Z3's default error handler, which would call exit(1). Before invoking it,
// Z3 stores the error code (and, for Z3_EXCEPTION, the message) in the context's own error state,
// i.e. per-context C-side state; the failing call then returns a null or default value and Go reads
// the state back with Z3_get_error_code / Z3_get_error_msg and clears it with Z3_set_error(c, Z3_OK).
static void hap_z3_on_error(Z3_context c, Z3_error_code e) {
	(void)c;
	(void)e;
}

static void hap_z3_install_handler(Z3_context c) {
	Z3_set_error_handler(c, hap_z3_on_error);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Version returns the full version of the linked Z3 library, for example "4.8.12.0".
func Version() string {
	return C.GoString(C.Z3_get_full_version())
}

// ErrClosed is returned by operations on a closed Context (or on a closed Solver, Optimizer or
// Model).
var ErrClosed = errors.New("z3: use of closed context or object")

// Error is an error reported by Z3 through its error handler.
type Error struct {
	Op   string // the binding operation that failed, e.g. "Solver.Check"
	Code int    // Z3_error_code
	Msg  string // Z3's message
}

func (e *Error) Error() string {
	return fmt.Sprintf("z3: %s: %s (code %d)", e.Op, e.Msg, e.Code)
}

// Context owns one Z3 context. See the package documentation for its lifetime and concurrency rules.
type Context struct {
	// mu guards every Z3 call on z, and z itself (nil once closed).
	mu sync.Mutex
	// life guards z against Close for Interrupt, which must not take mu.
	life sync.RWMutex
	z    C.Z3_context

	boolSort, intSort, realSort C.Z3_sort

	// rel queues references dropped by garbage-collection cleanups; they are released under mu.
	relMu   sync.Mutex
	relDead bool // the context is closed: drop queued references instead of releasing them
	rel     []release
}

type refKind uint8

const (
	kindAST refKind = iota
	kindSolver
	kindOptimize
	kindModel
)

type release struct {
	kind refKind
	p    unsafe.Pointer
}

// NewContext creates a Z3 context in reference-counting mode with model generation enabled and the
// binding's error handler installed.
func NewContext() (*Context, error) {
	cfg := C.Z3_mk_config()
	if cfg == nil {
		return nil, errors.New("z3: Z3_mk_config failed")
	}
	k, v := C.CString("model"), C.CString("true")
	C.Z3_set_param_value(cfg, k, v)
	C.free(unsafe.Pointer(k))
	C.free(unsafe.Pointer(v))
	z := C.Z3_mk_context_rc(cfg)
	C.Z3_del_config(cfg)
	if z == nil {
		return nil, errors.New("z3: Z3_mk_context_rc failed")
	}
	C.hap_z3_install_handler(z)
	c := &Context{z: z}
	c.boolSort = C.Z3_mk_bool_sort(z)
	C.Z3_inc_ref(z, C.Z3_sort_to_ast(z, c.boolSort))
	c.intSort = C.Z3_mk_int_sort(z)
	C.Z3_inc_ref(z, C.Z3_sort_to_ast(z, c.intSort))
	c.realSort = C.Z3_mk_real_sort(z)
	C.Z3_inc_ref(z, C.Z3_sort_to_ast(z, c.realSort))
	if err := c.err("NewContext"); err != nil {
		C.Z3_del_context(z)
		return nil, err
	}
	return c, nil
}

// Close interrupts any running Check on c, waits for calls in progress to return, and deletes the
// Z3 context with everything allocated in it. Terms, solvers, optimizers and models of c must not
// be used afterwards. Close is idempotent.
func (c *Context) Close() error {
	c.Interrupt()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.z == nil {
		return nil
	}
	c.relMu.Lock()
	c.relDead = true
	c.rel = nil
	c.relMu.Unlock()
	c.life.Lock()
	C.Z3_del_context(c.z)
	c.z = nil
	c.life.Unlock()
	return nil
}

// Interrupt asks Z3 to stop the Check (of a Solver or Optimizer) running on c, which then returns
// Unknown with reason "canceled". It is safe to call from any goroutine, concurrently with other
// calls, and does not take the context lock. It has no effect on a closed context.
//
// An interrupt that arrives while no check is running is not remembered (Z3 4.8.12; see
// TestInterrupt), so one racing with the start of a Check can be lost: pair it with a timeout, or
// call it again while the Check has not returned.
func (c *Context) Interrupt() {
	c.life.RLock()
	if c.z != nil {
		C.Z3_interrupt(c.z)
	}
	c.life.RUnlock()
}

// lock takes the context lock and performs queued releases. It returns ErrClosed (without the lock
// held) if c is closed.
func (c *Context) lock() error {
	c.mu.Lock()
	if c.z == nil {
		c.mu.Unlock()
		return ErrClosed
	}
	c.drain()
	return nil
}

// mustLock is lock for operations whose only failure is a programmer error.
func (c *Context) mustLock() {
	if c == nil {
		panic("z3: nil Context")
	}
	if err := c.lock(); err != nil {
		panic(err)
	}
}

func (c *Context) unlock() { c.mu.Unlock() }

// drain releases references queued by cleanups. Called with mu held.
func (c *Context) drain() {
	c.relMu.Lock()
	q := c.rel
	c.rel = nil
	c.relMu.Unlock()
	for _, r := range q {
		switch r.kind {
		case kindAST:
			C.Z3_dec_ref(c.z, C.Z3_ast(r.p))
		case kindSolver:
			C.Z3_solver_dec_ref(c.z, C.Z3_solver(r.p))
		case kindOptimize:
			C.Z3_optimize_dec_ref(c.z, C.Z3_optimize(r.p))
		case kindModel:
			C.Z3_model_dec_ref(c.z, C.Z3_model(r.p))
		}
	}
}

// queue is the cleanup function of every wrapper: it runs on the runtime's cleanup goroutine, so it
// only queues the reference for release under the context lock.
func (c *Context) queue(r release) {
	c.relMu.Lock()
	if !c.relDead {
		c.rel = append(c.rel, r)
	}
	c.relMu.Unlock()
}

// err returns the error recorded by Z3 for the last call, if any, and clears it. Called with mu held.
func (c *Context) err(op string) error {
	code := C.Z3_get_error_code(c.z)
	if code == C.Z3_OK {
		return nil
	}
	msg := C.GoString(C.Z3_get_error_msg(c.z, code))
	C.Z3_set_error(c.z, C.Z3_OK)
	return &Error{Op: op, Code: int(code), Msg: msg}
}

// must panics with the error recorded by Z3, if any. For constructors whose arguments were already
// validated, so that a Z3 error means a bug. Called with mu held (callers unlock with defer).
func (c *Context) must(op string) {
	if err := c.err(op); err != nil {
		panic(err)
	}
}

// symbol makes a Z3 string symbol. Symbols are interned for the life of the context. Called with mu
// held.
func (c *Context) symbol(name string) C.Z3_symbol {
	s := C.CString(name)
	defer C.free(unsafe.Pointer(s))
	return C.Z3_mk_string_symbol(c.z, s)
}

// setTimeout builds a parameter set {timeout: ms} and applies it with set. Called with mu held.
func (c *Context) setTimeout(op string, ms uint32, set func(p C.Z3_params)) error {
	return c.setUint(op, "timeout", ms, set)
}

// setUint builds a parameter set {name: v} and applies it with set. Called with mu held.
func (c *Context) setUint(op, name string, v uint32, set func(p C.Z3_params)) error {
	p := C.Z3_mk_params(c.z)
	if err := c.err(op); err != nil {
		return err
	}
	C.Z3_params_inc_ref(c.z, p)
	defer C.Z3_params_dec_ref(c.z, p)
	C.Z3_params_set_uint(c.z, p, c.symbol(name), C.uint(v))
	if err := c.err(op); err != nil {
		return err
	}
	set(p)
	return c.err(op)
}
