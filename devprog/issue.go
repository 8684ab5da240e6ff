package devprog

import (
	"fmt"
	"strings"
)

// IssueOrders returns, for every device, the order in which a runtime
// that issues from one queue per device (the CPU backend's goroutine; the
// CUDA backend's host thread, enqueueing onto its two streams) issues its
// instructions so as to keep both orders of
// the two-stream execution model: kernels in list order, collectives in CommStream order
// (the searched order, when CommOrder is set), each after its dependencies.
// Of the two streams' next instructions, the one listed first is issued
// if its dependencies have been, else the other, so a program without
// CommOrder is issued in list order exactly and one with it moves only
// its reordered collectives (and what must move with them).
//
// It also proves that the devices, each issuing its order and blocking in
// every collective until the whole group has reached it, all finish: it
// runs that protocol with every instruction taking no time. It returns an
// error naming the device and instructions for an order that cannot be
// issued (a collective that the order puts before a kernel it depends on,
// while that kernel waits for a later collective) and for one that
// deadlocks across devices (each waiting in a collective for a device
// waiting in another), where a runtime would hang.
func (p *Program) IssueOrders() ([][]int, error) {
	out := make([][]int, len(p.Devices))
	for d := range p.Devices {
		q, err := p.Devices[d].issueOrder()
		if err != nil {
			return nil, fmt.Errorf("device %d: %w", d, err)
		}
		out[d] = q
	}
	if err := p.rendezvous(out); err != nil {
		return nil, err
	}
	return out, nil
}

// issueOrder merges the device's two streams as IssueOrders says.
func (dp *DeviceProgram) issueOrder() ([]int, error) {
	comm := dp.CommStream()
	issued := make([]bool, len(dp.Instrs))
	ready := func(i int) bool {
		for _, dep := range dp.Instrs[i].Deps {
			if !issued[dep] {
				return false
			}
		}
		return true
	}
	out := make([]int, 0, len(dp.Instrs))
	k, c := 0, 0 // next kernel's list index; next collective's place in comm
	for len(out) < len(dp.Instrs) {
		for k < len(dp.Instrs) && dp.Instrs[k].Comm != nil {
			k++
		}
		next := -1
		kernelReady := k < len(dp.Instrs) && ready(k)
		commReady := c < len(comm) && ready(comm[c])
		switch {
		case kernelReady && commReady:
			next = min(k, comm[c])
		case kernelReady:
			next = k
		case commReady:
			next = comm[c]
		default:
			heads := []int{k}
			if c < len(comm) {
				heads = append(heads, comm[c])
			}
			var why []string
			for _, i := range heads {
				if i >= len(dp.Instrs) {
					continue // every kernel is issued
				}
				for _, dep := range dp.Instrs[i].Deps {
					if !issued[dep] {
						why = append(why, fmt.Sprintf("instruction %d (%q) waits for instruction %d (%q)", i, dp.Instrs[i].Name, dep, dp.Instrs[dep].Name))
						break
					}
				}
			}
			return nil, fmt.Errorf("the collective order cannot be issued: %s", strings.Join(why, ", while "))
		}
		if next == k {
			k++
		} else {
			c++
		}
		issued[next] = true
		out = append(out, next)
	}
	return out, nil
}

// rendezvous runs the devices' issue orders with every instruction taking
// no time: a device passes its kernels and waits in each collective until
// every member of its group has reached it. It returns an error naming
// where each device waits if they stop before the end.
func (p *Program) rendezvous(orders [][]int) error {
	pos := make([]int, len(p.Devices)) // place in orders[d] of the next instruction
	arrived := map[int]int{}           // collective ID → members waiting in it
	var queue []int                    // devices that may advance
	for d := range p.Devices {
		queue = append(queue, d)
	}
	waiting := make([]bool, len(p.Devices)) // counted in arrived at pos[d]
	for len(queue) > 0 {
		d := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if waiting[d] {
			continue
		}
		dp := &p.Devices[d]
		for pos[d] < len(orders[d]) && dp.Instrs[orders[d][pos[d]]].Comm == nil {
			pos[d]++
		}
		if pos[d] == len(orders[d]) {
			continue
		}
		c := dp.Instrs[orders[d][pos[d]]].Comm
		arrived[c.ID]++
		waiting[d] = true
		if arrived[c.ID] < len(c.Group) {
			continue // the last member to arrive releases the group
		}
		for _, m := range c.Group {
			waiting[m] = false
			pos[m]++
			queue = append(queue, m)
		}
	}
	var waits []string
	for d := range p.Devices {
		if pos[d] == len(orders[d]) {
			continue
		}
		in := &p.Devices[d].Instrs[orders[d][pos[d]]]
		var missing []string
		for _, m := range in.Comm.Group {
			mp := &p.Devices[m]
			if pos[m] == len(orders[m]) || mp.Instrs[orders[m][pos[m]]].Comm.ID != in.Comm.ID {
				at := "the end"
				if pos[m] < len(orders[m]) {
					at = fmt.Sprintf("collective %d", mp.Instrs[orders[m][pos[m]]].Comm.ID)
				}
				missing = append(missing, fmt.Sprintf("device %d (at %s)", m, at))
			}
		}
		waits = append(waits, fmt.Sprintf("device %d in collective %d (%q) for %s", d, in.Comm.ID, in.Name, strings.Join(missing, ", ")))
	}
	if len(waits) > 0 {
		return fmt.Errorf("the collective order deadlocks: %s", strings.Join(waits, "; "))
	}
	return nil
}
