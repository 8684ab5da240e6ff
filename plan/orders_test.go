package plan

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"hap/cluster"
	"hap/cluster/clustertest"
	"hap/cost"
	"hap/devprog"
	"hap/encode"
	"hap/ir"
	"hap/order"
	"hap/sim"
	"hap/solve"
	"hap/spmd"
)

// orderExactTolerance is how far (relative) the joint search over orders
// may be from the enumerated optimum: the order search's own resolution
// (it keeps a faster order only when it gains 1e-4).
const orderExactTolerance = 1e-4

// maxEnumerated caps the choices a case of the exhaustive test over
// orders may have: each is lowered and simulated, and the cheapest
// searched.
const maxEnumerated = 3000

// twoLayerGraph is a random two-layer perceptron on a batch of 2 to 4:
// two matmuls, so that a gradient's all-reduce can be issued before or
// after the next layer's collectives.
func twoLayerGraph(rng *rand.Rand) *ir.Graph {
	b := ir.NewBuilder("two-layer", ir.Float32)
	batch := 2 + rng.IntN(3)
	in, hidden := 32+32*rng.IntN(2), 32+32*rng.IntN(2)
	x := b.Input("x", ir.Float32, batch, in)
	h := b.MatMul(x, b.Param("w1", in, hidden))
	if rng.IntN(2) == 0 {
		h = b.ReLU(h)
	}
	h = b.Bias(b.MatMul(h, b.Param("w2", hidden, 8)), b.Param("b2", 8))
	g, err := b.Finish(b.CrossEntropy(h, b.Label("y", batch)))
	if err != nil {
		panic(err)
	}
	return g
}

// smallMixedCluster is n devices of random types on one or two nodes
// (clustertest.Small).
func smallMixedCluster(t *testing.T, rng *rand.Rand, n int) *cluster.Cluster {
	t.Helper()
	c, err := clustertest.Small(rng, n)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bestInAnyOrder is the exhaustive oracle over orders: the least simulated
// step of any choice of e under any issue order of its collectives. Every
// choice is lowered and simulated in list order; one whose order bound
// (order.Bound, below every order's step) is under the best so far is
// searched with a window covering its whole stream, where Z3's optimum is
// over every order.
func bestInAnyOrder(t *testing.T, in *Inputs, e *encode.Encoding) (best float64, searched []orderPriced) {
	t.Helper()
	type priced struct {
		ch   *encode.Choice
		prog *lowered
	}
	best = math.Inf(1)
	var all []priced
	e.Enumerate(func(ch *encode.Choice) bool {
		if _, err := e.Evaluate(ch); err != nil {
			return true // not a program (a Reduce read from Identity), or over memory
		}
		p, err := e.Decode(ch)
		if err != nil {
			t.Fatal(err)
		}
		prog, m, err := Lower(in, p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := sim.Run(prog, m)
		if err != nil {
			t.Fatal(err)
		}
		lb, err := order.Bound(prog, m)
		if err != nil {
			t.Fatal(err)
		}
		best = math.Min(best, r.StepSeconds)
		all = append(all, priced{ch.Clone(), &lowered{prog, m, lb}})
		return true
	})
	for _, c := range all {
		if c.prog.bound >= best {
			continue
		}
		r, err := order.Search(context.Background(), c.prog.prog, c.prog.m, order.Options{Window: max(1, longestCommStream(c.prog.prog))})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != order.Optimal {
			t.Fatalf("the oracle's order search ended %s", r.Status)
		}
		searched = append(searched, orderPriced{c.ch, r.After})
		best = math.Min(best, r.After)
	}
	return best, searched
}

// orderCaseSeeds seed the exhaustive test over orders (rand.NewPCG(seed,
// orderCaseStream) draws the graph and the cluster). They are the draws
// among the first 40 whose space has at most maxEnumerated choices. Until
// kernels were priced at their roofline at their own shapes (encode's
// roofline.go), on seed 11 the best pair in any order was not the
// list-order optimum reordered (0.0225% faster), the case the joint
// search exists for; since, none of the 70 such draws among seeds 0–199
// on this stream and 0–39 on two others has one, nor any of 485 draws
// from wider families (a third matmul, batch units of 16–256 samples,
// FP32 overridden to 0.01–1 TFLOP/s), and the test checks exactness on the
// cases it has; the search for another plan is tested with drawn prices
// (TestOverOrdersFindsTheCheapestPlanWhereverThePricesPutIt).
var orderCaseSeeds = []uint64{11, 5, 9, 12, 29, 39, 23}

const orderCaseStream = 99

// The joint search over programs, lengths and issue orders is exact: on
// random two-layer perceptrons over two or three mixed devices, the plan
// it returns, in the order it found, is as fast as the fastest plan of the
// space in the fastest order of its collectives, found by enumerating
// every choice and searching the order of each that could beat the best,
// and it says so (Optimal). It logs the cases where the best pair is not
// the list-order optimum reordered (none now: orderCaseSeeds).
func TestOverOrdersMatchesExhaustiveEnumeration(t *testing.T) {
	seeds := orderCaseSeeds
	if testing.Short() {
		seeds = seeds[:1]
	}
	moved := 0 // cases where the order-aware optimum is another choice
	for _, seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, orderCaseStream))
		g := twoLayerGraph(rng)
		c := smallMixedCluster(t, rng, 2+rng.IntN(2))
		in := &Inputs{Graph: g, Cluster: c, Optimizer: ir.SGD(0.1)}
		m, err := cost.New(c, cost.Options{})
		if err != nil {
			t.Fatal(err)
		}
		segs := []spmd.Segment{{Name: "batch", Units: g.Tensors[0].Shape[0]}}
		e, err := encode.Encode(g, segs, m, encode.EncodeOptions{Optimizer: in.Optimizer, NoGroup: true, NoAllToAll: true})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		e.Enumerate(func(*encode.Choice) bool { n++; return n <= maxEnumerated })
		if n > maxEnumerated {
			t.Fatalf("seed %d: more than %d choices: the draws changed", seed, maxEnumerated)
		}
		want, searched := bestInAnyOrder(t, in, e)
		// What the loop rests on: the master prices no choice above its
		// simulated step in its best order. Checked on the choices that
		// compete, those the oracle searched.
		for _, c := range searched {
			if a := fixedValue(t, e, c.ch, encode.BoundOptions{Memory: true, AnyOrder: true}); a > c.seconds*(1+orderExactTolerance) {
				t.Errorf("seed %d: the any-order MILP prices a choice at %.9g s, above its best order's simulated step %.9g s", seed, a, c.seconds)
			}
		}

		res, err := solve.Synthesize(context.Background(), g, m, solve.Options{Optimizer: in.Optimizer, Segments: segs, NoGroup: true, NoAllToAll: true})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		price := OrderPricer(in, res.Encoding, order.Options{})
		startSec, startLB, err := price(context.Background(), res.Choice)
		if err != nil {
			t.Fatal(err)
		}
		got, err := solve.OverOrders(context.Background(), res.Encoding, res.Choice, startSec, startLB, price, solve.OrderOptions{Rounds: 1000})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		t.Logf("seed %d: %d devices, %d choices (%d searched, each priced by the master below its step): optimum %.9g; list-order optimum reordered %.9g; joint %.9g (optimal %v, bound %.9g, %d rounds)",
			seed, e.N, n, len(searched), want, startSec, got.Seconds, got.Optimal, got.Bound, got.Rounds)
		if math.Abs(got.Seconds-want) > orderExactTolerance*want {
			t.Errorf("seed %d: the joint search over orders gives %.9g s, the enumerated optimum is %.9g s", seed, got.Seconds, want)
		}
		if !got.Optimal || got.Bound > got.Seconds*(1+orderExactTolerance) {
			t.Errorf("seed %d: not proven optimal (bound %.9g, step %.9g, %d rounds)", seed, got.Bound, got.Seconds, got.Rounds)
		}
		if startSec > want*(1+orderExactTolerance) {
			moved++
		}
	}
	t.Logf("%d of %d cases: the best pair in any order is not the list-order optimum reordered", moved, len(seeds))
}

// The loop's exactness does not rest on the prices the order search gives:
// for any prices at or above the master's value of each plan (the
// any-order MILP pinned to it), it returns the cheapest plan and proves it.
// Real prices give no case where the cheapest is not the list-order
// optimum (orderCaseSeeds), so the loop's search
// for another plan is tested here with drawn prices: each plan is priced
// L·(1 + orderPriceSpread·u), with L its list-order step (Evaluate, no less
// than the master's value, which is checked on every plan the loop prices)
// and u a hash of what it decides, in [0, 1). The cheapest plan is then
// another than the list-order optimum, and the loop must find it from that
// start, against the least price over every plan the enumeration makes.
func TestOverOrdersFindsTheCheapestPlanWhereverThePricesPutIt(t *testing.T) {
	seeds := drawnPriceSeeds
	if testing.Short() {
		seeds = seeds[:1]
	}
	moved := 0
	for _, seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, orderCaseStream))
		g := twoLayerGraph(rng)
		c := smallMixedCluster(t, rng, 2+rng.IntN(2))
		m, err := cost.New(c, cost.Options{})
		if err != nil {
			t.Fatal(err)
		}
		segs := []spmd.Segment{{Name: "batch", Units: g.Tensors[0].Shape[0]}}
		e, err := encode.Encode(g, segs, m, encode.EncodeOptions{Optimizer: ir.SGD(0.1), NoGroup: true, NoAllToAll: true})
		if err != nil {
			t.Fatal(err)
		}
		plans := drawPrices(e)
		// The start, the list-order optimum (the joint MILP's answer), and
		// the oracle, the least price over every plan.
		var start *drawnPlan
		want := math.Inf(1)
		for _, k := range slices.Sorted(maps.Keys(plans)) {
			d := plans[k]
			if start == nil || d.list < start.list {
				start = d
			}
			want = math.Min(want, d.price)
		}
		price := func(_ context.Context, ch *encode.Choice) (float64, float64, error) {
			d, ok := plans[planKey(e, ch)]
			if !ok {
				return math.Inf(1), math.Inf(1), nil // no choice Evaluate accepts makes it: it cannot run
			}
			// What the loop rests on, on every plan it prices: the
			// master's value of the plan is no more than its price.
			if a := fixedValue(t, e, ch, encode.BoundOptions{Memory: true, AnyOrder: true}); a > d.list*(1+anyOrderTolerance) {
				t.Errorf("seed %d: the any-order MILP prices a plan at %.9g s, above its list-order step %.9g s", seed, a, d.list)
			}
			return d.price, d.price, nil
		}
		got, err := solve.OverOrders(context.Background(), e, start.ch, start.price, start.price, price, solve.OrderOptions{Rounds: 1000})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		t.Logf("seed %d: %d devices, %d plans: least price %.9g; the list-order optimum's %.9g; the loop %.9g (optimal %v, %d rounds)",
			seed, e.N, len(plans), want, start.price, got.Seconds, got.Optimal, got.Rounds)
		if math.Abs(got.Seconds-want) > orderExactTolerance*want {
			t.Errorf("seed %d: the loop gives %.9g s, the least price over every plan is %.9g s", seed, got.Seconds, want)
		}
		if !got.Optimal || got.Bound > got.Seconds*(1+orderExactTolerance) {
			t.Errorf("seed %d: not proven optimal (bound %.9g, step %.9g)", seed, got.Bound, got.Seconds)
		}
		if start.price > want*(1+orderExactTolerance) {
			moved++
		}
	}
	if moved == 0 {
		t.Error("on no seed is the cheapest plan another than the list-order optimum: the test no longer tests the search for it")
	}
}

// orderPriceSpread is how far above its list-order step a drawn price may
// put a plan: 5%, past the 0–3.5% an order search moves a step on the zoo,
// so that the cheapest plan is not the list-order optimum on either seed.
const orderPriceSpread = 0.05

// drawnPriceSeeds are the draws (of orderCaseSeeds) the test over drawn
// prices runs: the two of two devices and 368 plans, 40 rounds each.
var drawnPriceSeeds = []uint64{12, 29}

// drawnPlan is one plan of the master: a choice that makes it, its least
// list-order step over the choices that do, and its drawn price.
type drawnPlan struct {
	ch          *encode.Choice
	list, price float64
}

// drawPrices enumerates e's choices and prices each plan they make (by
// planKey): its list-order step L, the least over its choices, times
// 1 + orderPriceSpread·u, u drawn from the plan's key.
func drawPrices(e *encode.Encoding) map[string]*drawnPlan {
	plans := map[string]*drawnPlan{}
	e.Enumerate(func(ch *encode.Choice) bool {
		br, err := e.Evaluate(ch)
		if err != nil {
			return true // not a program, or over memory
		}
		k := planKey(e, ch)
		if d := plans[k]; d == nil || br.Seconds < d.list {
			plans[k] = &drawnPlan{ch: ch.Clone(), list: br.Seconds}
		}
		return true
	})
	for k, d := range plans {
		h := fnv.New64a()
		h.Write([]byte(k))
		u := float64(h.Sum64()>>11) / (1 << 53) // 53 bits: [0, 1)
		d.price = d.list * (1 + orderPriceSpread*u)
	}
	return plans
}

// planKey names what ch decides, as ExcludeChoice cuts it: its rules and
// leaf layouts, the all-to-all flags and methods that apply under it, and
// the device groups' units of the segments it uses. Two choices with one
// key are one point of the master.
func planKey(e *encode.Encoding, ch *encode.Choice) string {
	var b strings.Builder
	fmt.Fprint(&b, ch.Rule, ch.Leaf)
	for ti := range e.Tensors {
		if e.AllToAllApplies(ch, ti) {
			fmt.Fprintf(&b, " a%d=%v", ti, ch.AllToAll[ti])
		}
		for qi := range e.Layouts(ti) {
			if e.MethodApplies(ch, ti, qi) {
				fmt.Fprintf(&b, " m%d.%d=%v", ti, qi, ch.Grouped != nil && ch.Grouped[ti] != nil && ch.Grouped[ti][qi])
			}
		}
	}
	for s, used := range e.SegmentsUsed(ch) {
		if used {
			for g := range e.Groups {
				fmt.Fprintf(&b, " L%d.%d=%d", s, g, e.GroupTotal(ch.Lengths[s], g))
			}
		}
	}
	return b.String()
}

// orderPriced is a choice and its step in its best order.
type orderPriced struct {
	ch      *encode.Choice
	seconds float64
}

// lowered is a choice's lowered program, its cost model and order bound.
type lowered struct {
	prog  *devprog.Program
	m     *cost.Model
	bound float64
}
