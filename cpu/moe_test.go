package cpu

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"hap/ir"
)

// ---- top-2 gating ----

func ktSigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// ktTop2Ref is top-2 gating written from the rule's statement: experts
// ranked by a stable sort, slots from explicit per-expert queues.
func ktTop2Ref(logits *Tensor[float64], capacity int) (combine, dispatch []float64) {
	T, E := logits.Shape[0], logits.Shape[1]
	combine, dispatch = make([]float64, T*E*capacity), make([]float64, T*E*capacity)
	type choice struct {
		t, e int
		g    float64
	}
	var first, second []choice
	for t := 0; t < T; t++ {
		row := logits.Data[t*E : (t+1)*E]
		m := math.Inf(-1)
		for _, x := range row {
			m = max(m, x)
		}
		p := make([]float64, E)
		var z float64
		for e, x := range row {
			p[e] = math.Exp(x - m)
			z += p[e]
		}
		order := make([]int, E)
		for e := range order {
			order[e] = e
			p[e] /= z
		}
		sort.SliceStable(order, func(i, j int) bool { return p[order[i]] > p[order[j]] })
		e1, e2 := order[0], order[1]
		s := p[e1] + p[e2]
		first = append(first, choice{t, e1, p[e1] / s})
		second = append(second, choice{t, e2, p[e2] / s})
	}
	queue := make([][]choice, E) // kept assignments per expert, in slot order
	for _, c := range first {
		if len(queue[c.e]) < capacity {
			queue[c.e] = append(queue[c.e], c)
		}
	}
	for _, c := range second {
		if len(queue[c.e]) < capacity {
			queue[c.e] = append(queue[c.e], c)
		}
	}
	for e, q := range queue {
		for slot, c := range q {
			i := (c.t*E+e)*capacity + slot
			combine[i], dispatch[i] = c.g, 1
		}
	}
	return combine, dispatch
}

func ktTop2Run[F Float](t *testing.T, logits64 *Tensor[float64], capacity int) (combine, dispatch *Tensor[F]) {
	t.Helper()
	s := ir.Shape{logits64.Shape[0], logits64.Shape[1], capacity}
	combine, dispatch = ktZeros[F](s), ktZeros[F](s)
	if err := top2Gate(&ir.Attrs{Capacity: capacity}, ktConv[F](logits64), combine, dispatch); err != nil {
		t.Fatal(err)
	}
	return combine, dispatch
}

// ktTop2Entry is one nonzero (t, e, c) of a hand-checked combine tensor.
type ktTop2Entry struct {
	t, e, c int
	g       float64
}

func TestTop2GateHandChecked(t *testing.T) {
	four := []float64{
		2, 0, // e1 = 0 (p = σ(2)), e2 = 1
		0, 1, // e1 = 1 (p = σ(1)), e2 = 0
		1, 0, // e1 = 0 (p = σ(1)), e2 = 1
		0, 0, // tie: e1 = 0, e2 = 1, both 1/2
	}
	for _, tc := range []struct {
		name     string
		shape    ir.Shape
		logits   []float64
		capacity int
		want     []ktTop2Entry
	}{
		{
			// First choices: t0→e0 slot 0, t1→e1 slot 0, t2→e0 and t3→e0
			// overflow. Both experts are then full, so every second choice
			// is dropped.
			name: "T4_E2_C1", shape: ir.Shape{4, 2}, logits: four, capacity: 1,
			want: []ktTop2Entry{{0, 0, 0, ktSigmoid(2)}, {1, 1, 0, ktSigmoid(1)}},
		},
		{
			// First choices: t0→e0/0, t1→e1/0, t2→e0/1, t3→e0 dropped.
			// Kept firsts: e0 2, e1 1. Second choices: t0→e1 slot 1 kept;
			// t1→e0 slot 2 dropped; t2→e1 slot 2 dropped; t3→e1 dropped.
			name: "T4_E2_C2", shape: ir.Shape{4, 2}, logits: four, capacity: 2,
			want: []ktTop2Entry{
				{0, 0, 0, ktSigmoid(2)}, {0, 1, 1, 1 - ktSigmoid(2)},
				{1, 1, 0, ktSigmoid(1)}, {2, 0, 1, ktSigmoid(1)},
			},
		},
		{
			// p ∝ 1, 2, 4: e1 = 2, e2 = 1, gates renormalised to 4/6, 2/6.
			name: "T1_E3_C1", shape: ir.Shape{1, 3}, logits: []float64{0, math.Log(2), math.Log(4)}, capacity: 1,
			want: []ktTop2Entry{{0, 2, 0, 4.0 / 6}, {0, 1, 0, 2.0 / 6}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logits := FromFloat64[float64](tc.shape, tc.logits)
			E, C := tc.shape[1], tc.capacity
			wantC, wantD := make([]float64, tc.shape[0]*E*C), make([]float64, tc.shape[0]*E*C)
			for _, w := range tc.want {
				i := (w.t*E+w.e)*C + w.c
				wantC[i], wantD[i] = w.g, 1
			}
			combine, dispatch := ktTop2Run[float64](t, logits, C)
			ktExpectClose(t, "combine", combine.Data, wantC, 1e-15)
			ktExpectClose(t, "dispatch", dispatch.Data, wantD, 0)
			refC, refD := ktTop2Ref(logits, C)
			ktExpectClose(t, "reference combine", refC, wantC, 1e-15)
			ktExpectClose(t, "reference dispatch", refD, wantD, 0)
		})
	}
}

func TestTop2GateRandom(t *testing.T) {
	for i, tc := range []struct{ tokens, experts, capacity int }{
		{7, 4, 2},  // overflow: 14 assignments, 8 slots
		{16, 3, 8}, // some overflow
		{5, 6, 4},  // ample capacity
		{9, 2, 3},  // two experts: second choice is the other one
	} {
		t.Run(fmt.Sprintf("T%d_E%d_C%d", tc.tokens, tc.experts, tc.capacity), func(t *testing.T) {
			rng := ktRNG(uint64(400 + i))
			logits := ktRand(rng, tc.tokens, tc.experts)
			for j := range logits.Data {
				logits.Data[j] *= 2
			}
			combine, dispatch := ktTop2Run[float64](t, logits, tc.capacity)
			refC, refD := ktTop2Ref(logits, tc.capacity)
			ktExpectClose(t, "combine vs reference", combine.Data, refC, ktTolRef)
			ktExpectClose(t, "dispatch vs reference", dispatch.Data, refD, 0)

			r := ktRand(rng, combine.Shape...)
			dl := ktZeros[float64](logits.Shape)
			a := &ir.Attrs{Capacity: tc.capacity}
			if err := top2GateGrad(a, logits, r, dl); err != nil {
				t.Fatal(err)
			}
			ktGradCheck(t, "top2_gate", []*Tensor[float64]{logits}, r.Data, []*Tensor[float64]{dl},
				func(in []*Tensor[float64]) (*Tensor[float64], error) {
					c, d := ktZeros[float64](combine.Shape), ktZeros[float64](combine.Shape)
					return c, top2Gate(a, in[0], c, d)
				})

			c32, d32 := ktTop2Run[float32](t, logits, tc.capacity)
			ktExpectClose(t, "combine float32", c32.Float64s(), combine.Data, ktTol32)
			ktExpectClose(t, "dispatch float32", d32.Float64s(), dispatch.Data, 0)
			dl32 := ktZeros[float32](logits.Shape)
			if err := top2GateGrad(a, ktConv[float32](logits), ktConv[float32](r), dl32); err != nil {
				t.Fatal(err)
			}
			ktExpectClose(t, "top2_gate_grad float32", dl32.Float64s(), dl.Data, ktTol32)
		})
	}
}

// Grouped logits[G1, G2, T, E] gate every group on its own: each group's
// slice of combine and dispatch equals rank-2 gating of that group's
// logits, and the gradient matches finite differences of the grouped op.
func TestTop2GateGrouped(t *testing.T) {
	const g1, g2, T, E, C = 2, 3, 7, 4, 2 // C small enough that groups overflow
	rng := ktRNG(450)
	logits := ktRand(rng, g1, g2, T, E)
	for j := range logits.Data {
		logits.Data[j] *= 2
	}
	a := &ir.Attrs{Capacity: C}
	out := ir.Shape{g1, g2, T, E, C}
	combine, dispatch := ktZeros[float64](out), ktZeros[float64](out)
	if err := top2Gate(a, logits, combine, dispatch); err != nil {
		t.Fatal(err)
	}
	for g := 0; g < g1*g2; g++ {
		one := &Tensor[float64]{Shape: ir.Shape{T, E}, Data: logits.Data[g*T*E : (g+1)*T*E]}
		refC, refD := ktTop2Ref(one, C)
		ktExpectClose(t, fmt.Sprintf("group %d combine", g), combine.Data[g*T*E*C:(g+1)*T*E*C], refC, ktTolRef)
		ktExpectClose(t, fmt.Sprintf("group %d dispatch", g), dispatch.Data[g*T*E*C:(g+1)*T*E*C], refD, 0)
	}
	r := ktRand(rng, out...)
	dl := ktZeros[float64](logits.Shape)
	if err := top2GateGrad(a, logits, r, dl); err != nil {
		t.Fatal(err)
	}
	ktGradCheck(t, "top2_gate grouped", []*Tensor[float64]{logits}, r.Data, []*Tensor[float64]{dl},
		func(in []*Tensor[float64]) (*Tensor[float64], error) {
			c, d := ktZeros[float64](out), ktZeros[float64](out)
			return c, top2Gate(a, in[0], c, d)
		})
	if err := top2Gate(a, logits, ktZeros[float64](ir.Shape{g1 * g2, T, E, C}), dispatch); err == nil {
		t.Error("top2_gate accepted a combine tensor whose group dims differ from the logits'")
	}
}

// The random overflow case above really drops assignments and keeps
// second choices, so both paths of the slot rule are exercised.
func TestTop2GateOverflowCovered(t *testing.T) {
	logits := ktRand(ktRNG(400), 7, 4)
	for j := range logits.Data {
		logits.Data[j] *= 2
	}
	routes, _ := top2Routing(logits.Data, 7, 4, 2)
	var dropped, keptSecond int
	for _, r := range routes {
		if r.c1 < 0 {
			dropped++
		}
		if r.c2 < 0 {
			dropped++
		} else {
			keptSecond++
		}
	}
	if dropped == 0 || keptSecond == 0 {
		t.Errorf("routing %+v: %d dropped, %d second choices kept; want both > 0", routes, dropped, keptSecond)
	}
}

// ---- einsum ----

var ktEinsumSizes = map[rune]int{'t': 5, 'e': 3, 'c': 2, 'd': 4, 'a': 3, 'b': 4, 'i': 2, 'j': 3, 'k': 4, 'l': 2, 'h': 2}

func ktEinsumShape(idx string) ir.Shape {
	s := ir.Shape{}
	for _, r := range idx {
		s = append(s, ktEinsumSizes[r])
	}
	return s
}

// ktEinsumRef evaluates an equation by looping over every index assignment.
func ktEinsumRef(eq string, x, y *Tensor[float64]) *Tensor[float64] {
	e, err := ir.ParseEinsum(eq)
	if err != nil {
		panic(err)
	}
	var letters []rune
	for _, r := range e.A + e.B {
		if !strings.ContainsRune(string(letters), r) {
			letters = append(letters, r)
		}
	}
	out := ktZeros[float64](ktEinsumShape(e.Out))
	flat := func(sub string, val map[rune]int) int {
		f := 0
		for _, r := range sub {
			f = f*ktEinsumSizes[r] + val[r]
		}
		return f
	}
	val := map[rune]int{}
	var rec func(i int)
	rec = func(i int) {
		if i == len(letters) {
			out.Data[flat(e.Out, val)] += x.Data[flat(e.A, val)] * y.Data[flat(e.B, val)]
			return
		}
		for v := 0; v < ktEinsumSizes[letters[i]]; v++ {
			val[letters[i]] = v
			rec(i + 1)
		}
	}
	rec(0)
	return out
}

func ktEinsumRun[F Float](t *testing.T, eq string, x64, y64 *Tensor[float64], direct int) *Tensor[F] {
	t.Helper()
	e, err := ir.ParseEinsum(eq)
	if err != nil {
		t.Fatal(err)
	}
	out := ktZeros[F](ktEinsumShape(e.Out))
	if err := einsumWith(&ir.Attrs{Equation: eq}, ktConv[F](x64), ktConv[F](y64), out, direct); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEinsum(t *testing.T) {
	for _, direct := range []int{0, 1 << 30} { // all BLAS, all direct loops
		t.Run(fmt.Sprintf("directMax%d", direct), func(t *testing.T) { ktTestEinsum(t, direct) })
	}
}

func ktTestEinsum(t *testing.T, direct int) {
	for i, eq := range []string{
		// The MoE equations and their gradients.
		"tec,td->ecd", "tec,ecd->td", "ecd,td->tec", "ecd,tec->td", "td,ecd->tec", "td,tec->ecd",
		"ab,bc->ac",    // plain matmul
		"hij,hjk->hik", // batched matmul
		"hij,hkj->hki", // transposed operands and output
		"ibj,jb->bi",   // batch index in the middle, output permuted
		"ij,kl->ljki",  // outer product: nothing summed
		"abc,cb->a",    // two summed indices, in different orders
		"ab,ab->ab",    // elementwise: batch indices only
		"ab,ab->",      // full contraction to a scalar
	} {
		t.Run(eq, func(t *testing.T) {
			e, err := ir.ParseEinsum(eq)
			if err != nil {
				t.Fatal(err)
			}
			rng := ktRNG(uint64(500 + i))
			x, y := ktRand(rng, ktEinsumShape(e.A)...), ktRand(rng, ktEinsumShape(e.B)...)
			out := ktEinsumRun[float64](t, eq, x, y, direct)
			ktExpectClose(t, "einsum vs direct loops", out.Data, ktEinsumRef(eq, x, y).Data, ktTolRef)

			// Gradients are einsums too (ir's autodiff rule).
			r := ktRand(rng, ktEinsumShape(e.Out)...)
			dx := ktEinsumRun[float64](t, e.Out+","+e.B+"->"+e.A, r, y, direct)
			dy := ktEinsumRun[float64](t, e.Out+","+e.A+"->"+e.B, r, x, direct)
			ktGradCheck(t, "einsum", []*Tensor[float64]{x, y}, r.Data, []*Tensor[float64]{dx, dy},
				func(in []*Tensor[float64]) (*Tensor[float64], error) {
					o := ktZeros[float64](ktEinsumShape(e.Out))
					return o, einsumWith(&ir.Attrs{Equation: eq}, in[0], in[1], o, direct)
				})

			ktExpectClose(t, "einsum float32", ktEinsumRun[float32](t, eq, x, y, direct).Float64s(), out.Data, ktTol32)
		})
	}
}

func TestEinsumErrors(t *testing.T) {
	x, y := ktZeros[float64](ir.Shape{2, 3}), ktZeros[float64](ir.Shape{3, 4})
	for _, tc := range []struct {
		eq  string
		out ir.Shape
	}{
		{"ab,bc->ac", ir.Shape{2, 5}},  // wrong output shape
		{"ab,cb->ac", ir.Shape{2, 3}},  // b is 3 in x and 4 in y
		{"ab,bc", ir.Shape{2, 4}},      // malformed
		{"ab,bcd->ac", ir.Shape{2, 4}}, // rank mismatch
	} {
		if err := einsum(&ir.Attrs{Equation: tc.eq}, x, y, ktZeros[float64](tc.out)); err == nil {
			t.Errorf("einsum %q accepted bad operands", tc.eq)
		}
	}
}
