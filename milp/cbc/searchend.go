package cbc

/*
#include <stdint.h>
void hap_watch_search(void *model, uintptr_t handle);
*/
import "C"

import (
	"math"
	"runtime/cgo"
	"time"
	"unsafe"

	"hap/milp"
)

// A search that ends at its node or time limit with the MIP start still
// its incumbent has nothing left to tell but its bound, which CBC prints
// as it stops (Cbc0005). CBC then re-solves the LP with the incumbent's
// integer columns fixed, from the root's basis (CbcModel's check of its
// solution), to polish continuous columns that the start, completed here
// at that LP's optimum (completeStart), already has: on the planner's
// joint MILP of bert-moe over paper-32 the ten nodes took 15 s and that
// re-solve 20 s more, for the start it was given. CBC's switch for it
// (CbcModel's special option 4) is not among the parameters its C
// interface passes on, so an isolated solve's worker watches CBC's
// messages instead and, at that one, answers with the start and the bound
// and exits, leaving CBC behind. In process a solve cannot stop CBC, and
// runs to its end.

// searchEnd is what a worker's message callback needs to answer for CBC.
type searchEnd struct {
	m        *milp.Model
	opt      milp.Options
	start    []float64 // the whole MIP start CBC was given
	startObj float64   // its objective as CBC sums it (no constant)
	began    time.Time
	answer   func(*milp.Result) // writes the reply and exits; never returns
}

// startObjectiveNoise is how far, relative to the objective, the best
// objective CBC reports may be from the start's for the start to be its
// incumbent still: the same sum in another order. A solution CBC finds
// replaces the incumbent only when better by its cutoff increment, far
// more than this.
const startObjectiveNoise = 1e-9

// watchSearchEnd arms model's message handler to call s.answer when a
// partial search ends with the start its incumbent. It returns what the
// caller releases once the solve is over (if CBC finishes first).
func watchSearchEnd(model unsafe.Pointer, s *searchEnd) (release func()) {
	h := cgo.NewHandle(s)
	C.hap_watch_search(model, C.uintptr_t(h))
	return h.Delete
}

//export hapCBCPartialSearch
func hapCBCPartialSearch(handle C.uintptr_t, best, possible C.double, nodes C.int) {
	s := cgo.Handle(handle).Value().(*searchEnd)
	if math.Abs(float64(best)-s.startObj) > startObjectiveNoise*math.Max(1, math.Abs(s.startObj)) {
		return // CBC found better: it reads its solution back as it ends
	}
	res := &milp.Result{Status: milp.Feasible, Nodes: int(nodes), StoppedBy: milp.LimitTime}
	if s.opt.NodeLimit > 0 && int(nodes) >= s.opt.NodeLimit {
		res.StoppedBy = milp.LimitNodes
	}
	res.Values = roundIntegers(s.m, append([]float64(nil), s.start...))
	res.Objective = s.m.Objective(res.Values)
	res.Bound = math.Inf(-1)
	if b := float64(possible); math.Abs(b) < cbcHuge {
		res.Bound = math.Min(b+s.m.ObjConst, res.Objective) // past the incumbent: rounding noise
	}
	res.Gap = milp.Gap(res.Objective, res.Bound)
	res.Runtime = time.Since(s.began)
	s.answer(res)
}
