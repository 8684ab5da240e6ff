// Package encodetest holds helpers for tests of encodings: random points of
// an Encoding's search space. It imports encode only, and only tests may
// import it.
package encodetest

import (
	"math/rand/v2"

	"hap/encode"
)

// RandomChoice draws every op class's rule, every leaf's layout, every
// collective's method and every segment's lengths (uneven, some zero) at
// random. Many such choices are not valid programs (Evaluate says which).
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
