package order

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"hap/cost"
	"hap/devprog"
	"hap/sim"
	"hap/solve/z3"
)

// DefaultWindow is how many places a collective may move past others on a communication stream
// when Options.Window is 0. Eight reaches past the collectives of about one transformer block
// (forward all-gathers, backward reduce-scatters and all-to-alls), which is where prefetching a
// parameter's gather or deferring a gradient's reduction can hide it behind compute; widening it
// grows the encoding linearly and Z3's search much faster.
const DefaultWindow = 8

// DefaultResourceLimit is Z3's work budget (its rlimit) per check when Options.ResourceLimit is 0.
// On the zoo's plans a check that spends it all took 25–45 s on the development machine (see
// docs/planner.md); small programs settle long before it. A budget in work, not seconds, keeps the
// search's answer the same on any machine.
const DefaultResourceLimit = 20_000_000

// minGain is the relative improvement a new order must bring to count: below it a reordering
// changes the step by less than the cost model's own rounding across devices, and each check that
// asks for it costs a solve.
const minGain = 1e-4

// Options steer Search.
type Options struct {
	// Window is how many places (in a device's communication stream) a collective may pass others;
	// two collectives further apart keep their order. 0 means DefaultWindow.
	Window int
	// ResourceLimit is Z3's work budget per check; 0 means DefaultResourceLimit.
	ResourceLimit uint32
	// TimeLimit bounds the search's wall time (0: none): each check gets what is left of it as
	// Z3's timeout, beside the work budget. A search it stops ends TimeLimit, and its answer
	// depends on the machine's speed, where the budget's does not.
	TimeLimit time.Duration
	// Accept, when set, vets each faster order's simulation (say, its peak memory against the
	// devices' capacity); a rejected order is excluded and the search goes on.
	Accept func(*sim.Result) bool
}

// Status says how a search ended.
type Status string

// Statuses.
const (
	// Optimal: no order within the window is faster by minGain than the one returned (and, when
	// Result.After is within minGain of Result.Bound, no order at all).
	Optimal Status = "optimal"
	// Stopped: Z3's work budget ran out before it settled whether a faster order exists.
	Stopped Status = "stopped"
	// TimeLimit: Options.TimeLimit ran out before Z3 settled whether a faster order exists.
	TimeLimit Status = "time limit"
	// Excluded: every faster order Z3 found was rejected by Options.Accept, and the rejection
	// excluded more orders than the one rejected, so optimality is not proven.
	Excluded Status = "excluded"
)

// Result is a search's outcome.
type Result struct {
	// Program is the input program with the best order found in CommOrder (nil everywhere when no
	// faster order was found). It shares instructions with the input.
	Program *devprog.Program
	// Before and After are the simulated step seconds under the program's own order and the one
	// returned.
	Before, After float64
	// Simulated is the simulation of Program.
	Simulated *sim.Result
	// Bound is a lower bound on the simulated step over every order, whatever the window
	// (bound.go): an order within minGain of it is optimal without a solver call.
	Bound  float64
	Status Status
	// Window is the window searched; Devices the devices whose timing was encoded (others are
	// dominated); Pairs the collective pairs whose order was free; Checks the Z3 checks made.
	Window, Devices, Pairs, Checks int
}

// Search finds the communication-stream order of p that makes its simulated step shortest under
// m, among the orders that keep every dependency and move no collective more than the window
// past another, and says whether it proved no order in that set is faster. p's compute streams
// keep their order. ctx cancels the search (returning ctx's error).
func Search(ctx context.Context, p *devprog.Program, m *cost.Model, opt Options) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("order: invalid program: %w", err)
	}
	began := time.Now()
	if opt.Window == 0 {
		opt.Window = DefaultWindow
	}
	if opt.Window < 0 {
		return nil, fmt.Errorf("order: window %d must be positive", opt.Window)
	}
	if opt.TimeLimit < 0 {
		return nil, fmt.Errorf("order: time limit %v must be positive", opt.TimeLimit)
	}
	if opt.ResourceLimit == 0 {
		opt.ResourceLimit = DefaultResourceLimit
	}
	pr, err := newProblem(p, m)
	if err != nil {
		return nil, err
	}
	start, err := sim.Run(p, m)
	if err != nil {
		return nil, fmt.Errorf("order: simulating the program's own order: %w", err)
	}
	lb, err := pr.bound()
	if err != nil {
		return nil, err
	}
	res := &Result{Program: p, Before: start.StepSeconds, After: start.StepSeconds, Simulated: start,
		Window: opt.Window, Devices: len(pr.devices), Bound: lb}
	if res.AtBound() {
		res.Status = Optimal
		return res, nil
	}

	c, err := z3.NewContext()
	if err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, c.Interrupt)
	defer stop()
	enc := encodeTimeline(c, pr, opt.Window)
	res.Pairs = len(enc.pairs)
	s := c.NewSolverForLogic("QF_IDL")
	defer s.Close()
	if err := s.Assert(enc.rows...); err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	if err := s.SetResourceLimit(opt.ResourceLimit); err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	// done tidies a found order (tidy.go) before returning it. An order at the bound is optimal
	// however the search ended.
	done := func() (*Result, error) {
		if res.Program != p {
			res.Program, res.Simulated = tidy(ctx, res.Program, m, res.Simulated, opt.Accept)
			res.After = res.Simulated.StepSeconds
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if res.AtBound() {
			res.Status = Optimal
		}
		return res, nil
	}
	var deadline time.Time
	if opt.TimeLimit > 0 {
		deadline = began.Add(opt.TimeLimit)
	}
	excluded := false
	for {
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left < time.Millisecond { // Z3's timeout is in milliseconds, and 0 means none
				res.Status = TimeLimit
				return done()
			}
			if err := s.SetTimeout(left); err != nil {
				return nil, fmt.Errorf("order: %w", err)
			}
		}
		st, err := s.Check(c.Le(enc.makespan, c.Int(ticks(res.After*(1-minGain)))))
		res.Checks++
		if err != nil {
			return nil, fmt.Errorf("order: %w", err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch st {
		case z3.Unsat:
			res.Status = Optimal
			if excluded {
				res.Status = Excluded
			}
			return done()
		case z3.Unknown:
			res.Status = Stopped
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				res.Status = TimeLimit
			}
			return done()
		}
		model, err := s.Model()
		if err != nil {
			return nil, fmt.Errorf("order: %w", err)
		}
		q, swaps, err := enc.order(model, pr)
		model.Close()
		if err != nil {
			return nil, err
		}
		r, err := sim.Run(q, m)
		if err != nil {
			return nil, fmt.Errorf("order: simulating a searched order: %w", err)
		}
		if r.StepSeconds > res.After*(1-minGain/2) {
			// The timeline is the simulator's, so an order Z3 times under the bound simulates under
			// it too; anything else is a bug in the encoding.
			return nil, fmt.Errorf("order: internal error: Z3's order takes %.6g s in the simulator, above its bound %.6g s", r.StepSeconds, res.After*(1-minGain))
		}
		if opt.Accept != nil && !opt.Accept(r) {
			// Exclude every order that makes all of this one's swaps: more reordering than a
			// rejected order does tends to hold more memory longer.
			if len(swaps) == 0 {
				res.Status = Excluded
				return done()
			}
			// (swaps are the pairs' keep variables the model made false; one must be true again.)
			if err := s.Assert(c.Or(swaps...)); err != nil {
				return nil, fmt.Errorf("order: %w", err)
			}
			excluded = true
			continue
		}
		res.Program, res.After, res.Simulated = q, r.StepSeconds, r
		if res.AtBound() {
			res.Status = Optimal
			return done()
		}
	}
}

// AtBound reports whether the order found meets the bound (MeetsBound).
func (r *Result) AtBound() bool { return MeetsBound(r.After, r.Bound) }

// MeetsBound reports whether a step of the given seconds is within minGain of the order bound: no
// order is faster by more than the search chases, so the order is optimal.
func MeetsBound(step, bound float64) bool { return step <= bound*(1+minGain) }

// tick is the timeline's unit of time in seconds. Z3 reasons over integers in it: integer
// difference constraints are what its scheduling engine is fastest on, where the float64 seconds
// taken as exact rationals (denominators up to 2⁶⁰ and more) made every check crawl. Rounding each
// instruction to a picosecond moves a step of thousands of instructions by nanoseconds, far below
// minGain of any step.
const tick = 1e-12

// boundSlack is taken off the heads and tails stated to Z3: they are sums of float64 seconds,
// where the timeline adds each instruction rounded to a tick, so the two can differ by a tick per
// instruction on a path; a nanosecond covers a thousand.
const boundSlack = 1e-9

// ticks is seconds in ticks, rounded.
func ticks(seconds float64) int64 { return int64(math.Round(seconds / tick)) }

// timeline is the simulator's timeline of a problem as Z3 terms (see encodeTimeline).
type timeline struct {
	// coll[k] is collective ids[k]'s start, the same on every member.
	coll []z3.Term
	// pairs are the free pairs' order variables: true keeps the pair's order in the program.
	pairs    []pair
	rows     []z3.Term
	makespan z3.Term
}

// pair is two collectives whose order on some communication stream is free.
type pair struct {
	keep z3.Term // true: the order the program has
}

// encodeTimeline writes the simulator's timeline as difference constraints: each compute run
// (the compute instructions from one that waits on a collective to the next such) starts when the
// run before it ends and when the collectives it waits on end; each collective starts, on all its
// members at once, when its dependencies end there; two collectives on one communication stream
// do not overlap, in an order that is free (a Boolean) for pairs within the window whose order no
// dependency fixes, and the program's for pairs up to twice as far apart (which, chained, keeps
// every pair further apart in order). The makespan is at least every end. The simulator runs each
// instruction as early as these allow, so the least makespan over the order variables is the
// shortest simulated step over the orders.
func encodeTimeline(c *z3.Context, pr *problem, window int) *timeline {
	tl := &timeline{coll: make([]z3.Term, len(pr.ids)), makespan: c.IntConst("makespan")}
	secs := func(x float64) z3.Term { return c.Int(ticks(x)) }
	collEnd := func(k int) z3.Term { return c.Add(tl.coll[k], secs(pr.colls[pr.ids[k]].seconds)) }
	for k, id := range pr.ids {
		tl.coll[k] = c.IntConst(fmt.Sprintf("c%d", id))
		tl.rows = append(tl.rows, c.Ge(tl.coll[k], c.Int(0)), c.Ge(tl.makespan, collEnd(k)))
		if pr.head != nil {
			// Implied by the rows below for every order (bound.go), stated so that Z3 need not
			// rediscover them: the collective's head and tail, less boundSlack.
			tl.rows = append(tl.rows, c.Ge(tl.coll[k], c.Int(max(0, ticks(pr.head[k]-boundSlack)))),
				c.Ge(tl.makespan, c.Add(collEnd(k), c.Int(max(0, ticks(pr.tail[k]-boundSlack))))))
		}
	}
	for _, d := range pr.devices {
		dp := &pr.p.Devices[d]
		runOf := make([]int, len(dp.Instrs))
		offset := make([]float64, len(dp.Instrs)) // seconds from its run's start to the instruction's end
		var starts []z3.Term
		var runLen []float64
		for i := range dp.Instrs {
			in := &dp.Instrs[i]
			if in.Comm != nil {
				k := pr.colls[in.Comm.ID].index
				for _, dep := range in.Deps {
					var end z3.Term
					if cm := dp.Instrs[dep].Comm; cm != nil {
						end = collEnd(pr.colls[cm.ID].index)
					} else {
						end = c.Add(starts[runOf[dep]], secs(offset[dep])) // its run's start plus its offset
					}
					tl.rows = append(tl.rows, c.Ge(tl.coll[k], end))
				}
				continue
			}
			waitsOnComm := false
			for _, dep := range in.Deps {
				waitsOnComm = waitsOnComm || dp.Instrs[dep].Comm != nil
			}
			if len(starts) == 0 || waitsOnComm {
				r := len(starts)
				s := c.IntConst(fmt.Sprintf("d%d.r%d", d, r))
				tl.rows = append(tl.rows, c.Ge(s, c.Int(0)))
				if r > 0 {
					tl.rows = append(tl.rows, c.Ge(s, c.Add(starts[r-1], secs(runLen[r-1]))))
				}
				for _, dep := range in.Deps {
					if cm := dp.Instrs[dep].Comm; cm != nil {
						tl.rows = append(tl.rows, c.Ge(s, collEnd(pr.colls[cm.ID].index)))
					}
				}
				starts = append(starts, s)
				runLen = append(runLen, 0)
			}
			r := len(starts) - 1
			runLen[r] += pr.dur[d][i]
			runOf[i], offset[i] = r, runLen[r]
		}
		if n := len(starts); n > 0 {
			tl.rows = append(tl.rows, c.Ge(tl.makespan, c.Add(starts[n-1], secs(runLen[n-1]))))
		}
	}
	seen := map[[2]int]bool{}
	for _, d := range pr.devices {
		q := pr.streams[d]
		for i := range q {
			a := pr.colls[pr.p.Devices[d].Instrs[q[i]].Comm.ID].index
			for j := i + 1; j < len(q) && j <= i+2*window+1; j++ {
				b := pr.colls[pr.p.Devices[d].Instrs[q[j]].Comm.ID].index
				if pr.after[b].has(a) || seen[[2]int{a, b}] {
					continue // a dependency orders them already, or another device's stream did
				}
				seen[[2]int{a, b}] = true
				if j > i+window {
					tl.rows = append(tl.rows, c.Ge(tl.coll[b], collEnd(a)))
					continue
				}
				keep := c.BoolConst(fmt.Sprintf("keep.c%d.c%d", pr.ids[a], pr.ids[b]))
				tl.pairs = append(tl.pairs, pair{keep: keep})
				tl.rows = append(tl.rows,
					c.Implies(keep, c.Ge(tl.coll[b], collEnd(a))),
					c.Implies(c.Not(keep), c.Ge(tl.coll[a], collEnd(b))))
			}
		}
	}
	return tl
}

// order reads a model's collective starts as every device's communication-stream order (ties
// keep the program's order), and returns the program with it and the order variables the model
// turned against the program's order.
func (tl *timeline) order(model *z3.Model, pr *problem) (*devprog.Program, []z3.Term, error) {
	at := make([]float64, len(pr.ids))
	for k, t := range tl.coll {
		v, err := model.Float(t)
		if err != nil {
			return nil, nil, fmt.Errorf("order: reading collective %d's start: %w", pr.ids[k], err)
		}
		at[k] = v
	}
	var swaps []z3.Term
	for _, pa := range tl.pairs {
		keep, err := model.Bool(pa.keep)
		if err != nil {
			return nil, nil, fmt.Errorf("order: %w", err)
		}
		if !keep {
			swaps = append(swaps, pa.keep)
		}
	}
	q := &devprog.Program{Devices: slices.Clone(pr.p.Devices)}
	for d := range q.Devices {
		dev := &q.Devices[d]
		next := slices.Clone(pr.streams[d])
		sort.SliceStable(next, func(x, y int) bool {
			return at[pr.colls[dev.Instrs[next[x]].Comm.ID].index] < at[pr.colls[dev.Instrs[next[y]].Comm.ID].index]
		})
		listOrder := (&devprog.DeviceProgram{Instrs: dev.Instrs}).CommStream()
		dev.CommOrder = next
		if slices.Equal(next, listOrder) {
			dev.CommOrder = nil
		}
	}
	return q, swaps, nil
}
