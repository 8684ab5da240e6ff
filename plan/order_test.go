package plan

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"hap/order"
)

// orderedPlan is dp-ev's plan of mlp on paper-8 with its order searched in a window of 2: a case
// where Z3 proves a faster order than the list's in a few checks.
func orderedPlan(t *testing.T) (*Plan, *order.Result) {
	t.Helper()
	in, p, pl := strategyPlan(t, "mlp", "paper-8", "dp-ev")
	r, err := SearchOrder(context.Background(), pl, in, p, order.Options{Window: 2})
	if err != nil {
		t.Fatal(err)
	}
	return pl, r
}

// TestPlanCarriesTheSearchedOrder: the order SearchOrder finds is in the plan document, and
// reading the document back gives the program that simulates to the plan's cost, byte for byte
// the same plan on a second search.
func TestPlanCarriesTheSearchedOrder(t *testing.T) {
	pl, r := orderedPlan(t)
	o := pl.CommOrder
	if o == nil || len(o.Swaps) == 0 || o.Status != order.Optimal {
		t.Fatalf("comm_order %+v: want a proven order with swaps", o)
	}
	if !(pl.Cost.StepSeconds < o.ListSeconds) || pl.Cost.StepSeconds != r.After || o.ListSeconds != r.Before || o.Bound != r.Bound || !(o.Bound > 0 && o.Bound <= r.After) {
		t.Fatalf("plan step %g, list order %g, bound %g; search %g → %g (bound %g)", pl.Cost.StepSeconds, o.ListSeconds, o.Bound, r.Before, r.After, r.Bound)
	}
	back := reread(t, pl)
	in, p, err := back.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Simulate(in, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.StepSeconds != pl.Cost.StepSeconds {
		t.Errorf("the plan read back simulates to %g s; the plan says %g s", res.StepSeconds, pl.Cost.StepSeconds)
	}
	// Searching again starts from the recorded order: never slower, and (the window now sitting
	// around the new order) here faster still.
	if _, err := SearchOrder(context.Background(), back, in, p, order.Options{Window: 2}); err != nil {
		t.Fatal(err)
	}
	if back.Cost.StepSeconds > pl.Cost.StepSeconds || back.CommOrder.ListSeconds != o.ListSeconds {
		t.Errorf("searched again: %g s (list order %g s); first %g s (list order %g s)", back.Cost.StepSeconds, back.CommOrder.ListSeconds, pl.Cost.StepSeconds, o.ListSeconds)
	}
	data, err := pl.Encode()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := orderedPlan(t)
	data2, err := again.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, data2) {
		t.Error("the same inputs gave different plan bytes with a searched order")
	}
}

// TestPlanOrderErrors: a comm_order that is not an order of the plan's collectives is one error
// naming the field and the swap.
func TestPlanOrderErrors(t *testing.T) {
	pl, _ := orderedPlan(t)
	first := pl.CommOrder.Swaps[0]
	for _, tc := range []struct {
		name   string
		mutate func(*OrderDoc)
		want   string
	}{
		{"unknown collective", func(o *OrderDoc) { o.Swaps[0][1] = 1 << 20 }, "plan comm_order: swaps[0]"},
		{"reversed", func(o *OrderDoc) { o.Swaps[0] = [2]int{first[1], first[0]} }, "already issues"},
		// As if another build had lowered the program, numbering its collectives otherwise.
		{"other collectives", func(o *OrderDoc) { o.Collectives = strings.Repeat("0", 64) }, "comm_order was searched for other collectives"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := reread(t, pl)
			tc.mutate(bad.CommOrder)
			in, p, err := bad.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Simulate(in, p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			// The way out the error names: searching again, which starts from the list order
			// when the order was found for other collectives.
			if tc.name == "other collectives" {
				if _, err := SearchOrder(context.Background(), bad, in, p, order.Options{Window: 2}); err != nil {
					t.Fatalf("searching a stale order again: %v", err)
				}
				if _, err := Simulate(in, p); err != nil {
					t.Fatalf("after searching again: %v", err)
				}
			}
		})
	}
}
