package order

import (
	"fmt"
	"slices"

	"hap/cost"
	"hap/devprog"
)

// problem is a lowered program reduced to what its timing depends on: every instruction's duration
// under the cost model, the devices whose timing can bind the step, the compute runs whose starts
// are decisions, and which collectives depend on which.
type problem struct {
	p *devprog.Program
	// dur[d][i] is instruction i of device d's seconds, as the simulator prices it.
	dur [][]float64
	// colls lists the collectives by ID, with their seconds.
	colls map[int]*collective
	ids   []int // collective IDs, ascending
	// devices are those kept: a device whose every instruction takes at most as long as the same
	// instruction of a kept device with the same instruction structure cannot finish later than it,
	// so its timing constraints are implied and it is left out.
	devices []int
	// streams[d] is device d's communication stream in issue order (DeviceProgram.CommStream).
	streams [][]int
	// after[c] is the set of collectives (by index into ids) collective ids[c] transitively waits on.
	after []bitset
	// head[c] and tail[c], set by bound, are the earliest collective ids[c] can start and the least
	// time from its end to the end of the step, in any order (bound.go).
	head, tail []float64
}

// collective is one collective across its members.
type collective struct {
	id      int
	index   int // into problem.ids
	seconds float64
}

// bitset is a set of small non-negative integers.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) add(i int)      { b[i/64] |= 1 << (i % 64) }

// union adds o to b and reports whether b grew.
func (b bitset) union(o bitset) bool {
	grew := false
	for k := range b {
		n := b[k] | o[k]
		grew = grew || n != b[k]
		b[k] = n
	}
	return grew
}

// newProblem prices p under m. p must have passed devprog.Program.Validate.
func newProblem(p *devprog.Program, m *cost.Model) (*problem, error) {
	if len(p.Devices) != m.NumDevices() {
		return nil, fmt.Errorf("order: the program has %d devices, cluster %q has %d", len(p.Devices), m.Cluster().Name, m.NumDevices())
	}
	pr := &problem{p: p, dur: make([][]float64, len(p.Devices)), colls: map[int]*collective{}, streams: make([][]int, len(p.Devices))}
	for d := range p.Devices {
		pr.streams[d] = p.Devices[d].CommStream()
		instrs := p.Devices[d].Instrs
		pr.dur[d] = make([]float64, len(instrs))
		for i := range instrs {
			in := &instrs[i]
			switch {
			case in.Kernel != nil && in.Kernel.Work != nil:
				pr.dur[d][i] = m.ComputeTime(d, *in.Kernel.Work)
			case in.Kernel != nil:
				pr.dur[d][i] = in.Kernel.Seconds
			default:
				c := pr.colls[in.Comm.ID]
				if c == nil {
					est, err := m.Collective(in.Comm.Call())
					if err != nil {
						return nil, fmt.Errorf("order: device %d, instruction %d (%q): %w", d, i, in.Name, err)
					}
					c = &collective{id: in.Comm.ID, seconds: est.Seconds}
					pr.colls[c.id] = c
				}
				pr.dur[d][i] = c.seconds
			}
		}
	}
	for id := range pr.colls {
		pr.ids = append(pr.ids, id)
	}
	slices.Sort(pr.ids)
	for k, id := range pr.ids {
		pr.colls[id].index = k
	}
	pr.devices = pr.binding()
	if err := pr.reach(); err != nil {
		return nil, err
	}
	return pr, nil
}

// binding lists the devices whose timing can bind the step (see problem.devices).
func (pr *problem) binding() []int {
	var kept []int
	for d := range pr.p.Devices {
		if len(pr.p.Devices[d].Instrs) == 0 {
			continue // a device outside the program sets no time
		}
		dominated := false
		for e := range pr.p.Devices {
			if e != d && pr.sameShape(d, e) && pr.noLonger(d, e) && (!pr.noLonger(e, d) || e < d) {
				dominated = true
				break
			}
		}
		if !dominated {
			kept = append(kept, d)
		}
	}
	return kept
}

// sameShape reports whether devices d and e run the same instructions: the same streams, the same
// collectives in the same places and order, the same dependencies.
func (pr *problem) sameShape(d, e int) bool {
	a, b := &pr.p.Devices[d], &pr.p.Devices[e]
	if len(a.Instrs) != len(b.Instrs) || !slices.Equal(pr.streams[d], pr.streams[e]) {
		return false
	}
	for i := range a.Instrs {
		x, y := &a.Instrs[i], &b.Instrs[i]
		if (x.Comm == nil) != (y.Comm == nil) || !slices.Equal(x.Deps, y.Deps) || x.Comm != nil && x.Comm.ID != y.Comm.ID {
			return false
		}
	}
	return true
}

// noLonger reports whether no instruction of device d takes longer than the same one of device e.
func (pr *problem) noLonger(d, e int) bool {
	for i, t := range pr.dur[d] {
		if t > pr.dur[e][i] {
			return false
		}
	}
	return true
}

// reach computes after: the collectives each collective waits on through dependencies and compute
// stream order on any member (the communication stream's order, the thing searched, excluded). A
// collective's members each contribute what their instructions before it wait on, so the sets are
// found by passes over every device until none grows.
func (pr *problem) reach() error {
	n := len(pr.ids)
	pr.after = make([]bitset, n)
	for k := range pr.after {
		pr.after[k] = newBitset(n)
	}
	waits := make([][]bitset, len(pr.p.Devices)) // per device and instruction: the collectives it waits on
	for d := range waits {
		waits[d] = make([]bitset, len(pr.p.Devices[d].Instrs))
		for i := range waits[d] {
			waits[d][i] = newBitset(n)
		}
	}
	for pass := 0; ; pass++ {
		if pass > n+1 {
			return fmt.Errorf("order: the program's collectives wait on each other in a cycle")
		}
		grew := false
		for d := range pr.p.Devices {
			prevCompute := -1
			for i := range pr.p.Devices[d].Instrs {
				in := &pr.p.Devices[d].Instrs[i]
				w := waits[d][i]
				for _, dep := range in.Deps {
					w.union(waits[d][dep])
					if c := pr.p.Devices[d].Instrs[dep].Comm; c != nil {
						w.add(pr.colls[c.ID].index)
					}
				}
				if in.Comm == nil {
					if prevCompute >= 0 {
						w.union(waits[d][prevCompute])
					}
					prevCompute = i
					continue
				}
				k := pr.colls[in.Comm.ID].index
				if pr.after[k].union(w) {
					grew = true
				}
				// A member waits for the collective's other members to reach it, so what any of
				// them waited on, it waited on too.
				w.union(pr.after[k])
			}
		}
		if !grew {
			break
		}
	}
	for k := range pr.after {
		if pr.after[k].has(k) {
			return fmt.Errorf("order: collective %d waits on itself", pr.ids[k])
		}
	}
	return nil
}
