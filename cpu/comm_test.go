package cpu

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"hap/ir"
)

// runGroup runs f on n ranks concurrently and returns their outputs.
func runGroup(t *testing.T, n int, f func(c *Comm) (*Tensor[float64], error)) []*Tensor[float64] {
	t.Helper()
	g := NewGroup(n)
	out := make([]*Tensor[float64], n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			out[r], errs[r] = f(g.Comm(r))
			if errs[r] != nil {
				g.Abort(errs[r])
			}
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return out
}

func randT(rng *rand.Rand, shape ...int) *Tensor[float64] {
	t := NewTensor[float64](ir.Shape(shape), ir.Float64)
	for i := range t.Data {
		t.Data[i] = rng.NormFloat64()
	}
	return t
}

func exec1(c *Comm, kind ir.OpKind, a ir.Attrs, x *Tensor[float64], outShape ir.Shape) (*Tensor[float64], error) {
	y := NewTensor[float64](outShape, ir.Float64)
	err := Exec(&Ctx{Comm: c}, &ir.Op{Kind: kind, Attrs: a}, []*Tensor[float64]{x}, []*Tensor[float64]{y})
	return y, err
}

func same(t *testing.T, what string, got, want *Tensor[float64]) {
	t.Helper()
	if !got.Shape.Equal(want.Shape) {
		t.Fatalf("%s: shape %v, want %v", what, got.Shape, want.Shape)
	}
	for i := range want.Data {
		if got.Data[i] != want.Data[i] {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got.Data[i], want.Data[i])
		}
	}
}

// sizesFor cuts total into n uneven pieces, the first empty.
func sizesFor(rng *rand.Rand, n, total int) []int {
	s := make([]int, n)
	for i := 0; i < total; i++ {
		s[1%n+rng.IntN(max(n-1, 1))]++
	}
	return s
}

// Every collective, on 1, 2, 3, 5 and 8 ranks, with uneven pieces including
// an empty one, gives what a single device computes directly — by both
// methods for uneven pieces, and by the even path when pieces are equal.
func TestCollectivesMatchDirectComputation(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	for _, n := range []int{1, 2, 3, 5, 8} {
		for _, even := range []bool{false, true} {
			total := 3 * n
			sizes := sizesFor(rng, n, total)
			if even {
				for i := range sizes {
					sizes[i] = 3
				}
			}
			methods := []string{"padded", "grouped"}
			if even {
				methods = append(methods, "")
			}
			// Whole tensors [4, total, 2], split along axis 1.
			wholes := make([]*Tensor[float64], n)
			for r := range wholes {
				wholes[r] = randT(rng, 4, total, 2)
			}
			piece := func(x *Tensor[float64], r int) *Tensor[float64] {
				return Slice(x, 1, sumInts(sizes[:r]), sizes[r])
			}
			for _, m := range methods {
				name := fmt.Sprintf("n=%d/sizes=%v/%q", n, sizes, m)
				// all_gather: rank r contributes piece r of wholes[0].
				got := runGroup(t, n, func(c *Comm) (*Tensor[float64], error) {
					a := ir.Attrs{Axis: 1, Sizes: sizes, Rank: c.Rank(), Method: m}
					return exec1(c, ir.OpAllGather, a, piece(wholes[0], c.Rank()), wholes[0].Shape)
				})
				for r := range got {
					same(t, name+" all_gather rank "+fmt.Sprint(r), got[r], wholes[0])
				}
				// reduce_scatter: the sum of every rank's whole, cut.
				sum := NewTensor[float64](wholes[0].Shape, ir.Float64)
				for _, w := range wholes {
					for i, v := range w.Data {
						sum.Data[i] += v
					}
				}
				got = runGroup(t, n, func(c *Comm) (*Tensor[float64], error) {
					a := ir.Attrs{Axis: 1, Sizes: sizes, Rank: c.Rank(), Method: m}
					return exec1(c, ir.OpReduceScatter, a, wholes[c.Rank()], withDim(sum.Shape, 1, sizes[c.Rank()]))
				})
				for r := range got {
					same(t, name+" reduce_scatter rank "+fmt.Sprint(r), got[r], piece(sum, r))
				}
			}
			// all_reduce.
			got := runGroup(t, n, func(c *Comm) (*Tensor[float64], error) {
				return exec1(c, ir.OpAllReduce, ir.Attrs{}, wholes[c.Rank()], wholes[0].Shape)
			})
			for r := range got {
				// Same summation order as the reference above: bit-identical.
				want := NewTensor[float64](wholes[0].Shape, ir.Float64)
				acc := make([]float64, len(want.Data))
				for _, w := range wholes {
					for i, v := range w.Data {
						acc[i] += v
					}
				}
				copy(want.Data, acc)
				same(t, fmt.Sprintf("n=%d all_reduce rank %d", n, r), got[r], want)
			}
			// all_to_all: from pieces along axis 1 (sizes) to pieces along
			// axis 0 of [4·n, total, 2] (split).
			split := sizesFor(rng, n, 4*n)
			x := randT(rng, 4*n, total, 2)
			got = runGroup(t, n, func(c *Comm) (*Tensor[float64], error) {
				a := ir.Attrs{Axes: []int{1, 0}, Sizes: sizes, Split: split, Rank: c.Rank()}
				in := Slice(x, 1, sumInts(sizes[:c.Rank()]), sizes[c.Rank()])
				return exec1(c, ir.OpAllToAll, a, in, ir.Shape{split[c.Rank()], total, 2})
			})
			for r := range got {
				same(t, fmt.Sprintf("n=%d all_to_all rank %d", n, r), got[r], Slice(x, 0, sumInts(split[:r]), split[r]))
			}
		}
	}
}

// A rank that fails aborts the group: the others return ErrAborted instead
// of waiting forever.
func TestGroupAbortWakesWaitingRanks(t *testing.T) {
	g := NewGroup(3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			_, errs[r] = g.Comm(r).Exchange(r)
		}(r)
	}
	g.Abort(fmt.Errorf("rank 2 failed"))
	wg.Wait()
	for r := 0; r < 2; r++ {
		if errs[r] == nil {
			t.Errorf("rank %d did not see the abort", r)
		}
	}
}

// Sub-group collectives on a 2×3 grid of 6 devices: all-reduce within
// each row and all-gather down each column run concurrently, each group
// seeing only its members' values, in its own rank order.
func TestSubGroupCollectives(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	const rows, cols = 2, 3
	x := make([]*Tensor[float64], rows*cols)
	for d := range x {
		x[d] = randT(rng, 2, 3)
	}
	row := func(d int) []int { r := d / cols; return []int{r * cols, r*cols + 1, r*cols + 2} }
	// Columns in reverse row order: rank order is the list's, not the device index's.
	col := func(d int) []int { k := d % cols; return []int{cols + k, k} }
	sums := runGroup(t, rows*cols, func(c *Comm) (*Tensor[float64], error) {
		d := c.Rank()
		return exec1(c, ir.OpAllReduce, ir.Attrs{Group: row(d)}, x[d], x[d].Shape)
	})
	for d, got := range sums {
		want := NewTensor[float64](x[d].Shape, ir.Float64)
		for _, m := range row(d) {
			for i, v := range x[m].Data {
				want.Data[i] += v
			}
		}
		same(t, fmt.Sprintf("row all_reduce on device %d", d), got, want)
	}
	gathered := runGroup(t, rows*cols, func(c *Comm) (*Tensor[float64], error) {
		d := c.Rank()
		rank := 1 - d/cols
		a := ir.Attrs{Axis: 0, Sizes: []int{2, 2}, Rank: rank, Group: col(d)}
		return exec1(c, ir.OpAllGather, a, x[d], ir.Shape{4, 3})
	})
	for d, got := range gathered {
		k := d % cols
		same(t, fmt.Sprintf("column all_gather on device %d", d), got, Concat(0, []*Tensor[float64]{x[cols+k], x[k]}))
	}
}

// A sub-group must include the caller, name devices of the group once, and
// agree with the op's rank; aborting the whole group wakes ranks waiting in
// a sub-group.
func TestSubGroupErrorsAndAbort(t *testing.T) {
	g := NewGroup(4)
	c := g.Comm(1)
	for _, bad := range [][]int{{0, 2}, {1, 1}, {1, 4}} {
		if _, err := c.Sub(bad); err == nil {
			t.Errorf("Sub(%v) accepted", bad)
		}
	}
	x := NewTensor[float64](ir.Shape{2}, ir.Float64)
	if _, err := exec1(c, ir.OpAllGather, ir.Attrs{Sizes: []int{2, 2}, Rank: 0, Group: []int{0, 1}}, x, ir.Shape{4}); err == nil {
		t.Error("an all_gather for rank 0 ran on the group's rank 1")
	}
	sub, err := g.Comm(2).Sub([]int{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := sub.Exchange(1)
		done <- err
	}()
	g.Abort(fmt.Errorf("device 0 failed"))
	if err := <-done; err == nil {
		t.Error("a rank waiting in a sub-group did not see the abort")
	}
	late, err := g.Comm(3).Sub([]int{0, 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := late.Exchange(1); err == nil {
		t.Error("a sub-group made after the abort works")
	}
}
