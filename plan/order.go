package plan

import (
	"context"
	"time"

	"hap/devprog"
	"hap/lower"
	"hap/order"
	"hap/sim"
	"hap/solve/z3"
	"hap/spmd"
)

// OrderDoc is the communication streams' issue order Z3 searched for a
// plan (package order), and how that search ended.
type OrderDoc struct {
	// Swaps are the collectives issued against the order lowering lists
	// them in: [x, y] issues y before x on every device that runs both
	// (devprog.Swap; x and y are lowered collective IDs). Empty when the
	// list order was the best found.
	Swaps []devprog.Swap `json:"swaps"`
	// Collectives is the digest of the lowered collectives the swaps
	// name (devprog.Program.CollectiveDigest): a build that lowers the plan
	// otherwise refuses the order instead of misreading it.
	Collectives string `json:"collectives_sha256"`
	// Status is how the search ended: optimal (no order within the
	// window is faster; none at all when the step meets Bound), stopped
	// (Z3's budget ran out), time limit (TimeLimit ran out) or excluded
	// (faster orders did not fit in memory).
	Status order.Status `json:"status"`
	Window int          `json:"window"`
	// Budget is Z3's work budget (rlimit) per check: with it and Z3's
	// version the search gives the same order on any machine.
	Budget uint32 `json:"budget"`
	// TimeLimit is the search's wall-clock limit (order.Options), when
	// it had one (hap plan --time-limit): its answer then depends on
	// the machine's speed.
	TimeLimit string `json:"time_limit,omitempty"`
	Z3        string `json:"z3"`
	// ListSeconds is the simulated step in the list order; the plan's
	// Cost is the searched order's.
	ListSeconds float64 `json:"list_order_seconds"`
	// Bound is the order bound (order.Bound): no order of the
	// collectives makes the step shorter.
	Bound  float64 `json:"bound_seconds"`
	Pairs  int     `json:"free_pairs"`
	Checks int     `json:"checks"`
}

// SearchOrder searches, with Z3, the order in which p's communication
// streams issue their collectives (package order) for the shortest
// simulated step whose peak memory fits every device, starting from the
// order p already has (or the list order, if p's was found for other
// collectives). It records the best order found in pl (CommOrder,
// and p.CommSwaps) with pl's Cost re-simulated under it, and returns the
// search's result. pl must be p's plan document.
func SearchOrder(ctx context.Context, pl *Plan, in *Inputs, p *spmd.Program, opt order.Options) (*order.Result, error) {
	listed := *p
	listed.CommSwaps = nil
	prog, m, err := Lower(in, &listed)
	if err != nil {
		return nil, err
	}
	// The search starts from p's order, unless it was found for other
	// collectives (another build's lowering): then from the list order.
	// The list order's step is the search's Before when it starts there,
	// and simulated here before p's order is applied otherwise.
	digest := prog.CollectiveDigest()
	var list *sim.Result
	if len(p.CommSwaps) > 0 && (p.CommDigest == "" || p.CommDigest == digest) {
		if list, err = sim.Run(prog, m); err != nil {
			return nil, err
		}
		if _, err := lower.ApplyPlanOrder(prog, p); err != nil {
			return nil, err
		}
	}
	r, err := order.Search(ctx, prog, m, order.Options{Window: opt.Window, ResourceLimit: opt.ResourceLimit, TimeLimit: opt.TimeLimit,
		Accept: func(r *sim.Result) bool {
			return sim.OverMemory(r.Devices) == "" && (opt.Accept == nil || opt.Accept(r))
		}})
	if err != nil {
		return nil, err
	}
	swaps := r.Program.Swaps()
	if swaps == nil {
		swaps = []devprog.Swap{} // "swaps": [] says the search kept the list order
	}
	p.CommSwaps, p.CommDigest = swaps, digest
	pl.CommOrder = &OrderDoc{Swaps: swaps, Collectives: digest, Status: r.Status, Window: r.Window, Budget: budgetOf(opt), Z3: z3.Version(),
		ListSeconds: r.Before, Bound: r.Bound, Pairs: r.Pairs, Checks: r.Checks}
	if opt.TimeLimit > 0 {
		pl.CommOrder.TimeLimit = opt.TimeLimit.Round(time.Millisecond).String()
	}
	pl.Cost = Cost{StepSeconds: r.After, PerDevice: r.Simulated.Devices}
	if list != nil {
		pl.CommOrder.ListSeconds = list.StepSeconds
	}
	return r, nil
}

func budgetOf(opt order.Options) uint32 {
	if opt.ResourceLimit == 0 {
		return order.DefaultResourceLimit
	}
	return opt.ResourceLimit
}
