package devprog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Swap names two collectives by their IDs (Comm.ID): Swap{x, y} says y is issued before x on the
// communication stream of every device that runs both, although x comes first in those devices'
// instruction lists. A set of swaps is a device-independent way to write an order: a collective
// pair's order is one fact for all its members (they must agree, or they deadlock), so the set is
// what a plan document records, where per-device CommOrder lists would repeat it per device.
type Swap = [2]int

// Swaps is p's communication-stream order (CommOrder) as the collective pairs it issues against
// their list order, each pair once, sorted: the inverse of ApplySwaps.
func (p *Program) Swaps() []Swap {
	var out []Swap
	for d := range p.Devices {
		dp := &p.Devices[d]
		q := dp.CommOrder
		for a := range q {
			for b := a + 1; b < len(q); b++ {
				if q[b] < q[a] {
					out = append(out, Swap{dp.Instrs[q[b]].Comm.ID, dp.Instrs[q[a]].Comm.ID})
				}
			}
		}
	}
	slices.SortFunc(out, func(x, y Swap) int { return slices.Compare(x[:], y[:]) })
	return slices.Compact(out) // members of a collective report its pairs alike
}

// ApplySwaps sets every device's CommOrder to its list order with the given pairs reversed, and
// returns an error naming the first swap that is not an order: one naming a collective p lacks, a
// collective twice, two collectives no device runs both of, a pair some device lists the other way
// round, a pair listed twice, or swaps that together reverse a device's list inconsistently (x
// before y before z before x). p's existing CommOrder is replaced (and left cleared on error).
// Dependencies are not checked here: an order that issues a collective before one it depends on
// deadlocks, and the simulator reports it.
func (p *Program) ApplySwaps(swaps []Swap) error {
	where := make([]map[int]int, len(p.Devices)) // device → collective ID → list-order stream position
	known := map[int]bool{}
	for d := range p.Devices {
		dp := &p.Devices[d]
		dp.CommOrder = nil
		where[d] = map[int]int{}
		for k, i := range dp.CommStream() {
			where[d][dp.Instrs[i].Comm.ID] = k
			known[dp.Instrs[i].Comm.ID] = true
		}
	}
	shift := make([]map[int]int, len(p.Devices)) // device → collective ID → places moved later
	for d := range shift {
		shift[d] = map[int]int{}
	}
	first := map[Swap]int{}
	for k, s := range swaps {
		x, y := s[0], s[1]
		if j, dup := first[s]; dup {
			return fmt.Errorf("swaps[%d] = [%d, %d] repeats swaps[%d]", k, x, y, j)
		}
		first[s] = k
		switch {
		case !known[x] || !known[y]:
			missing := x
			if known[x] {
				missing = y
			}
			return fmt.Errorf("swaps[%d] = [%d, %d]: the program has no collective %d", k, x, y, missing)
		case x == y:
			return fmt.Errorf("swaps[%d] = [%d, %d]: names one collective twice", k, x, y)
		}
		shared := false
		for d := range p.Devices {
			px, okx := where[d][x]
			py, oky := where[d][y]
			if !okx || !oky {
				continue
			}
			if px > py {
				return fmt.Errorf("swaps[%d] = [%d, %d]: device %d already issues %d before %d", k, x, y, d, y, x)
			}
			shared = true
			shift[d][x]++
			shift[d][y]--
		}
		if !shared {
			return fmt.Errorf("swaps[%d] = [%d, %d]: no device runs both collectives", k, x, y)
		}
	}
	// A collective's place in the new order is the number of collectives before it: its list place,
	// plus those it now follows, minus those it now precedes. The pairwise order is transitive (a
	// total order) exactly when these places are all different, i.e. a permutation.
	for d := range p.Devices {
		if len(shift[d]) == 0 {
			continue
		}
		dp := &p.Devices[d]
		stream := dp.CommStream()
		order := make([]int, len(stream))
		filled := make([]bool, len(stream))
		for k, i := range stream {
			at := k + shift[d][dp.Instrs[i].Comm.ID]
			if at < 0 || at >= len(stream) || filled[at] {
				return fmt.Errorf("swaps reorder device %d's collectives inconsistently (collective %d has no single place): a swap list must reverse pairs of one order", d, dp.Instrs[i].Comm.ID)
			}
			order[at], filled[at] = i, true
		}
		if !slices.Equal(order, stream) {
			dp.CommOrder = order
		}
	}
	return nil
}

// hangingSwaps returns the swaps that make p's order hang on their own,
// each applied alone to the list order. It leaves p in list order.
func (p *Program) hangingSwaps(swaps []Swap) []Swap {
	var out []Swap
	for _, s := range swaps {
		if p.ApplySwaps([]Swap{s}) != nil {
			continue
		}
		if _, err := p.IssueOrders(); err != nil {
			out = append(out, s)
		}
	}
	for d := range p.Devices {
		p.Devices[d].CommOrder = nil
	}
	return out
}

// swapText names a swap's collectives: "[3, 5] (all-gather "x" issued
// after all-reduce "y")".
func (p *Program) swapText(s Swap) string {
	name := func(id int) string {
		for d := range p.Devices {
			for _, in := range p.Devices[d].Instrs {
				if in.Comm != nil && in.Comm.ID == id {
					return fmt.Sprintf("%s %q", in.Comm.Kind, in.Name)
				}
			}
		}
		return fmt.Sprint(id)
	}
	return fmt.Sprintf("[%d, %d] (%s issued after %s)", s[0], s[1], name(s[0]), name(s[1]))
}

// CollectiveDigest is a SHA-256 of p's collectives as swaps name them: each one's ID, kind, group
// and counts, with every device's list order of them. Swaps recorded with a digest apply only to a
// program with the same one, so that a plan searched under another lowering (which may number its
// collectives otherwise) is refused rather than silently reordered.
func (p *Program) CollectiveDigest() string {
	h := sha256.New()
	for d := range p.Devices {
		fmt.Fprintf(h, "device %d:", d)
		for _, in := range p.Devices[d].Instrs {
			if c := in.Comm; c != nil {
				fmt.Fprintf(h, " %d %s %v %v;", c.ID, c.Kind, c.Group, c.Counts)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ApplyCommOrder sets prog's CommOrder to the order a plan records as
// swaps of the list order, digest being the digest of the collectives the
// order was searched for (spmd.Program's CommSwaps and CommDigest). It refuses an order searched for other
// collectives (digest is not prog's CollectiveDigest: another build
// lowered the plan otherwise, and its swaps may name other collectives)
// rather than misread it, and an order the devices cannot run to the end
// (IssueOrders: a collective before one its input needs, or devices
// waiting in different collectives for each other), naming the swaps that
// make it hang. It returns the devices' issue orders (IssueOrders), which a
// one-queue runtime follows. Without swaps it leaves prog in list order and
// returns no orders: the list is the issue order.
func (prog *Program) ApplyCommOrder(swaps []Swap, digest string) ([][]int, error) {
	if len(swaps) == 0 {
		return nil, nil
	}
	if d := prog.CollectiveDigest(); digest != "" && d != digest {
		return nil, fmt.Errorf("plan comm_order was searched for other collectives (digest %.12s; this build lowers the plan's program to %.12s): search the order again (hap simulate PLAN --search-order -o NEW)", digest, d)
	}
	if err := prog.ApplySwaps(swaps); err != nil {
		return nil, fmt.Errorf("plan comm_order: %w", err)
	}
	orders, err := prog.IssueOrders()
	if err != nil {
		culprits := prog.hangingSwaps(swaps)
		if err := prog.ApplySwaps(swaps); err != nil {
			panic(fmt.Sprintf("devprog: swaps applied once no longer apply: %v", err))
		}
		switch {
		case len(culprits) == 0:
			return nil, fmt.Errorf("plan comm_order: its %d swaps together make the order hang, though none does alone: %w", len(swaps), err)
		case len(culprits) == 1:
			return nil, fmt.Errorf("plan comm_order: swap %s makes the order hang: %w", prog.swapText(culprits[0]), err)
		default:
			texts := make([]string, len(culprits))
			for i, s := range culprits {
				texts[i] = prog.swapText(s)
			}
			return nil, fmt.Errorf("plan comm_order: swaps %s each make the order hang; with all of them: %w", strings.Join(texts, ", "), err)
		}
	}
	return orders, nil
}
