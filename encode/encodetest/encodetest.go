// Package encodetest holds what the tests of several packages (encode,
// solve, plan) do with an Encoding: draw a random choice, and price one
// with the joint MILP pinned to it. It owns no state and imports encode,
// milp and milp/cbc only; no non-test code may import it.
package encodetest

import (
	"context"
	"math/rand/v2"
	"testing"

	"hap/encode"
	"hap/milp"
	"hap/milp/cbc"
)

// RandomChoice draws every op class's rule, every leaf's layout, every
// layout's method and every segment's lengths (uneven, some zero) at
// random. The draws from rng are part of the contract: seeded tests
// depend on them.
func RandomChoice(rng *rand.Rand, e *encode.Encoding) *encode.Choice {
	ch := &encode.Choice{Rule: make([]int, len(e.Classes)), Leaf: make([]int, len(e.Tensors)), Grouped: make([][]bool, len(e.Tensors))}
	for ci := range e.Classes {
		ch.Rule[ci] = rng.IntN(len(e.Classes[ci].Rules))
	}
	for ti := range e.Tensors {
		if n := len(e.Tensors[ti].LeafLayouts); n > 0 {
			ch.Leaf[ti] = rng.IntN(n)
		}
		ch.Grouped[ti] = make([]bool, len(e.Layouts(ti)))
		for q := range ch.Grouped[ti] {
			ch.Grouped[ti][q] = rng.IntN(2) == 0
		}
	}
	for _, seg := range e.Segs {
		ls := make([]int, e.N)
		for u := 0; u < seg.Units; u++ {
			ls[rng.IntN(e.N)]++
		}
		ch.Lengths = append(ch.Lengths, ls)
	}
	return ch
}

// SolvePinned solves e's joint MILP with every decision pinned to ch (one
// thread, no heuristics): its objective, in seconds, is the MILP's price
// of ch, which tests hold against Evaluate's.
func SolvePinned(t testing.TB, e *encode.Encoding, ch *encode.Choice) (*milp.Result, float64) {
	t.Helper()
	model, vars := e.MILP()
	e.Fix(model, vars, ch)
	res, err := cbc.Solver{}.Solve(context.Background(), model, milp.Options{Threads: 1, NoHeuristics: true})
	if err != nil {
		t.Fatalf("the pinned MILP: %v", err)
	}
	return res, res.Objective / encode.MILPTimeUnit
}
