package devprog

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomStreams is a program of three devices whose collectives (some over all three, some over
// two, some on one) are listed in ID order, each device issuing its own in the order rank gives:
// collective c goes rank[c]-th. Every device's CommOrder is thus the restriction of one global
// order, as any order members agree on is.
func randomStreams(rng *rand.Rand, n int) (*Program, []int) {
	groups := [][]int{{0, 1, 2}, {0, 1}, {1, 2}, {0, 2}, {1}}
	p := &Program{Devices: make([]DeviceProgram, 3)}
	for c := range n {
		g := groups[rng.IntN(len(groups))]
		for _, d := range g {
			p.Devices[d].Append(kernel("k", 1))
			p.Devices[d].Append(allReduce(c, g))
		}
	}
	rank := rng.Perm(n)
	for d := range p.Devices {
		dp := &p.Devices[d]
		q := slices.Clone(dp.CommStream())
		slices.SortFunc(q, func(a, b int) int { return rank[dp.Instrs[a].Comm.ID] - rank[dp.Instrs[b].Comm.ID] })
		if !slices.Equal(q, dp.CommStream()) {
			dp.CommOrder = q
		}
	}
	return p, rank
}

// TestSwapsRoundTrip: an order written as swaps and applied to the list order is the order again.
func TestSwapsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		p, _ := randomStreams(rng, 1+rng.IntN(9))
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		swaps := p.Swaps()
		q := &Program{Devices: slices.Clone(p.Devices)}
		if err := q.ApplySwaps(swaps); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		for d := range p.Devices {
			if !slices.Equal(q.Devices[d].CommOrder, p.Devices[d].CommOrder) {
				t.Fatalf("trial %d, device %d: swaps %v give %v, want %v", trial, d, swaps, q.Devices[d].CommOrder, p.Devices[d].CommOrder)
			}
		}
		if again := q.Swaps(); !slices.Equal(again, swaps) {
			t.Fatalf("trial %d: swaps %v, then %v", trial, swaps, again)
		}
	}
}

// TestApplySwapsErrors: each way a swap list fails to be an order is one error naming it.
func TestApplySwapsErrors(t *testing.T) {
	// One device, collectives 0, 1, 2 in list order; a second device with 0 and 3.
	build := func() *Program {
		p := &Program{Devices: make([]DeviceProgram, 2)}
		for c := range 3 {
			p.Devices[0].Append(allReduce(c, []int{0}))
		}
		p.Devices[1].Append(allReduce(3, []int{1}))
		return p
	}
	for _, tc := range []struct {
		name  string
		swaps []Swap
		want  string
	}{
		{"unknown collective", []Swap{{0, 9}}, "swaps[0] = [0, 9]: the program has no collective 9"},
		{"one collective", []Swap{{1, 1}}, "names one collective twice"},
		{"listed the other way", []Swap{{2, 0}}, "device 0 already issues 0 before 2"},
		{"repeated", []Swap{{0, 1}, {0, 1}}, "swaps[1] = [0, 1] repeats swaps[0]"},
		{"no shared device", []Swap{{0, 3}}, "no device runs both"},
		// 1 before 0 and 2 before 1, but 0 before 2: a cycle.
		{"not an order", []Swap{{0, 1}, {1, 2}}, "inconsistently"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := build().ApplySwaps(tc.swaps)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// The consistent versions of the last case: 2 before 1 before 0, and 1 before 0 alone.
	p := build()
	if err := p.ApplySwaps([]Swap{{0, 1}, {1, 2}, {0, 2}}); err != nil {
		t.Fatal(err)
	}
	if got := p.Devices[0].CommOrder; !slices.Equal(got, []int{2, 1, 0}) {
		t.Fatalf("reversed order %v, want [2 1 0]", got)
	}
	if err := p.ApplySwaps(nil); err != nil || p.Devices[0].CommOrder != nil {
		t.Fatalf("no swaps: %v, order %v; want the list order", err, p.Devices[0].CommOrder)
	}
}
