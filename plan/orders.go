package plan

import (
	"context"
	"fmt"

	"hap/encode"
	"hap/lower"
	"hap/order"
	"hap/sim"
	"hap/solve"
)

// fullWindowCollectives is the longest communication stream whose order is
// searched whole when a choice is priced in its best order: up to it the
// window is widened to the stream, so that Z3's "optimal" holds over every
// order, not only over those within the window. Small programs settle at
// once; longer streams keep the caller's window and their price is an
// upper bound, with the order bound below it.
const fullWindowCollectives = 16

// OrderPricer prices a choice of e by its step under the best issue order
// Z3 finds for its collectives (package order), as solve.OverOrders asks.
// The order found must fit every device's memory in simulation, as
// SearchOrder's must. The price is proven the best over every order when
// the search ends at the order bound, or optimal with a window that covers
// the whole stream (fullWindowCollectives); otherwise the lower bound
// returned is the order bound.
func OrderPricer(in *Inputs, e *encode.Encoding, opt order.Options) solve.PriceInOrder {
	return func(ctx context.Context, ch *encode.Choice) (float64, float64, error) {
		p, err := e.Decode(ch)
		if err != nil {
			return 0, 0, fmt.Errorf("pricing a choice in its best order: %w", err)
		}
		prog, m, err := Lower(in, p)
		if err != nil {
			return 0, 0, fmt.Errorf("pricing a choice in its best order: %w", err)
		}
		o := opt
		longest := longestCommStream(prog)
		if longest <= fullWindowCollectives && o.Window < longest {
			o.Window = longest
		}
		o.Accept = func(r *sim.Result) bool {
			return sim.OverMemory(r.Devices) == "" && (opt.Accept == nil || opt.Accept(r))
		}
		r, err := order.Search(ctx, prog, m, o)
		if err != nil {
			return 0, 0, fmt.Errorf("pricing a choice in its best order: %w", err)
		}
		if r.AtBound() || (r.Status == order.Optimal && r.Window >= longest) {
			return r.After, r.After, nil
		}
		return r.After, r.Bound, nil
	}
}

// longestCommStream is the most collectives one device of prog issues.
func longestCommStream(prog *lower.Program) int {
	most := 0
	for _, d := range prog.Devices {
		n := 0
		for _, in := range d.Instrs {
			if in.Comm != nil {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}
