package order

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"

	"hap/cost"
	"hap/devprog"
)

// The order bound: a lower bound on the simulated step over every communication-stream order,
// whatever the window, from relaxations of the timeline Search encodes.
//
//   - Free streams. Drop the communication streams' order (collectives on one stream may overlap)
//     and what is left — dependencies, compute streams in order, each collective on all members at
//     once — is a DAG whose longest path no order can beat. Its forward pass gives every
//     instruction a head (the earliest it can start), its backward pass a tail (the least time
//     from its end to the end of the step).
//   - Serial heads. The collectives an instruction waits on cannot all run at once on a stream
//     they share: each head is raised to when they could have ended one after another (and each
//     tail likewise by the collectives that wait on it), before the pass goes on (serialHeads).
//   - One stream at a time. A device's communication stream runs its collectives one after
//     another, each no earlier than its head and followed by its tail: the one-machine problem of
//     job-shop scheduling, bounded by Jackson's preemptive schedule (oneStream).
//
// When a program's own order (or the best Z3 finds) takes no longer than the bound, it is optimal
// among all orders, with no solver call; otherwise the bound gives the search's gap. Search also
// states the heads and tails to Z3, which proves more with them.

// Bound is a lower bound, in seconds, on p's simulated step under m over every order of its
// communication streams (the order bound above). p must be valid (devprog.Program.Validate).
func Bound(p *devprog.Program, m *cost.Model) (float64, error) {
	pr, err := newProblem(p, m)
	if err != nil {
		return 0, err
	}
	return pr.bound()
}

// bound is pr's order bound in seconds.
func (pr *problem) bound() (float64, error) {
	g, err := pr.relaxedGraph()
	if err != nil {
		return 0, err
	}
	head, tail := g.longestPaths(pr.serialHeads(g))
	pr.head, pr.tail = head[:len(pr.ids)], tail[:len(pr.ids)]
	lb := 0.0
	for v := range g.dur {
		lb = max(lb, head[v]+g.dur[v]+tail[v])
	}
	for d := range pr.p.Devices {
		jobs := make([]job, 0, len(pr.streams[d]))
		for _, i := range pr.streams[d] {
			v := pr.colls[pr.p.Devices[d].Instrs[i].Comm.ID].index
			jobs = append(jobs, job{head: head[v], dur: g.dur[v], tail: tail[v]})
		}
		lb = max(lb, oneStream(jobs))
	}
	return lb, nil
}

// relaxedGraph is the free-streams DAG: node k < len(pr.ids) is collective pr.ids[k] (one node for
// all its members), then one node per compute instruction of every device.
func (pr *problem) relaxedGraph() (*dag, error) {
	nc := len(pr.ids)
	node := make([][]int, len(pr.p.Devices)) // node[d][i]: instruction i of device d's node
	g := &dag{dur: make([]float64, nc), dev: make([]int, nc)}
	for k, id := range pr.ids {
		g.dur[k], g.dev[k] = pr.colls[id].seconds, -1
	}
	for d := range pr.p.Devices {
		node[d] = make([]int, len(pr.p.Devices[d].Instrs))
		for i, in := range pr.p.Devices[d].Instrs {
			if in.Comm != nil {
				node[d][i] = pr.colls[in.Comm.ID].index
				continue
			}
			node[d][i] = len(g.dur)
			g.dur = append(g.dur, pr.dur[d][i])
			g.dev = append(g.dev, d)
		}
	}
	g.succ = make([][]int, len(g.dur))
	for d := range pr.p.Devices {
		prevCompute := -1
		for i, in := range pr.p.Devices[d].Instrs {
			v := node[d][i]
			for _, dep := range in.Deps {
				g.succ[node[d][dep]] = append(g.succ[node[d][dep]], v)
			}
			if in.Comm == nil {
				if prevCompute >= 0 {
					g.succ[prevCompute] = append(g.succ[prevCompute], v)
				}
				prevCompute = v
			}
		}
	}
	if !g.topological() {
		return nil, fmt.Errorf("order: the program's instructions wait on each other in a cycle")
	}
	return g, nil
}

// dag is a weighted DAG: node v takes dur[v] and precedes succ[v].
type dag struct {
	dur  []float64
	dev  []int // a compute node's device; −1 for a collective
	succ [][]int
	topo []int // set by topological
}

// topological sorts g, reporting false on a cycle.
func (g *dag) topological() bool {
	var ok bool
	g.topo, ok = kahn(g.succ)
	return ok
}

// kahn is a topological order of the graph whose node v precedes succ[v], the smallest ready node
// first (so a graph gives one order, whatever the order of its edges), and whether it covers every
// node (false: a cycle).
func kahn(succ [][]int) ([]int, bool) {
	indeg := make([]int, len(succ))
	for _, ss := range succ {
		for _, s := range ss {
			indeg[s]++
		}
	}
	ready := &queue[int]{less: func(a, b int) bool { return a < b }}
	for v, n := range indeg {
		if n == 0 {
			heap.Push(ready, v)
		}
	}
	seq := make([]int, 0, len(succ))
	for ready.Len() > 0 {
		v := heap.Pop(ready).(int)
		seq = append(seq, v)
		for _, s := range succ[v] {
			if indeg[s]--; indeg[s] == 0 {
				heap.Push(ready, s)
			}
		}
	}
	return seq, len(seq) == len(succ)
}

// queue is a priority queue for container/heap: the least item by less
// first. kahn's ready nodes and oneStream's released jobs are both one.
type queue[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (q *queue[T]) Len() int           { return len(q.items) }
func (q *queue[T]) Less(i, k int) bool { return q.less(q.items[i], q.items[k]) }
func (q *queue[T]) Swap(i, k int)      { q.items[i], q.items[k] = q.items[k], q.items[i] }
func (q *queue[T]) Push(x any)         { q.items = append(q.items, x.(T)) }
func (q *queue[T]) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return x
}

// longestPaths returns every node's head (the longest path ending where it starts) and tail (the
// longest path starting where it ends). g must be sorted (topological). raise, when set, may raise
// a node's head (or, with tails true, its tail) once every node before it (after it) is final.
func (g *dag) longestPaths(raise func(v int, at []float64, tails bool) float64) (head, tail []float64) {
	head, tail = make([]float64, len(g.dur)), make([]float64, len(g.dur))
	for _, v := range g.topo {
		if raise != nil {
			head[v] = max(head[v], raise(v, head, false))
		}
		for _, s := range g.succ[v] {
			head[s] = max(head[s], head[v]+g.dur[v])
		}
	}
	for k := len(g.topo) - 1; k >= 0; k-- {
		v := g.topo[k]
		for _, s := range g.succ[v] {
			tail[v] = max(tail[v], g.dur[s]+tail[s])
		}
		if raise != nil {
			tail[v] = max(tail[v], raise(v, tail, true))
		}
	}
	return head, tail
}

// serialHeads raises a node's head to when the collectives it waits on could all have ended, one
// after another, on a stream they share — a collective's members' streams, a compute
// instruction's own device's — each taking the stream from its own head on, in order of heads; and
// its tail likewise by the collectives that wait on it. Without it a join (two collectives, then a
// kernel that needs both, then more collectives) had heads as if the stream ran the two at once.
func (pr *problem) serialHeads(g *dag) func(v int, at []float64, tails bool) float64 {
	n := len(pr.ids)
	// anc[v] and desc[v]: the collectives node v waits on, and those that wait on it.
	anc, desc := make([]bitset, len(g.dur)), make([]bitset, len(g.dur))
	for v := range anc {
		anc[v], desc[v] = newBitset(n), newBitset(n)
	}
	for _, v := range g.topo {
		for _, s := range g.succ[v] {
			anc[s].union(anc[v])
			if v < n {
				anc[s].add(v)
			}
		}
	}
	for k := len(g.topo) - 1; k >= 0; k-- {
		v := g.topo[k]
		for _, s := range g.succ[v] {
			desc[v].union(desc[s])
			if s < n {
				desc[v].add(s)
			}
		}
	}
	streams := make([][]int, len(pr.p.Devices)) // each device's collectives, by node
	members := make([][]int, n)
	for d := range pr.p.Devices {
		for _, i := range pr.streams[d] {
			k := pr.colls[pr.p.Devices[d].Instrs[i].Comm.ID].index
			streams[d] = append(streams[d], k)
			members[k] = append(members[k], d)
		}
	}
	var set []int
	var own [1]int
	return func(v int, at []float64, tails bool) float64 {
		waits := anc[v]
		if tails {
			waits = desc[v]
		}
		var devices []int
		if v < n {
			devices = members[v]
		} else {
			own[0] = g.dev[v]
			devices = own[:]
		}
		best := 0.0
		for _, d := range devices {
			set = set[:0]
			for _, k := range streams[d] {
				if waits.has(k) {
					set = append(set, k)
				}
			}
			slices.SortFunc(set, func(a, b int) int { return cmp.Compare(at[a], at[b]) })
			t := 0.0
			for _, k := range set {
				t = max(t, at[k]) + g.dur[k]
			}
			best = max(best, t)
		}
		return best
	}
}

// job is a collective on one stream: its head, its duration and its tail.
type job struct{ head, dur, tail float64 }

// oneStream is the one-machine bound on the jobs of one stream: the makespan of Jackson's
// preemptive schedule, which starts each job no earlier than its head and always runs, among the
// jobs released, the one with the longest tail (preempting a job when a job with a longer tail is
// released), plus each job's tail. No non-preemptive order ends sooner: the preemptive schedule
// is optimal for the relaxation that allows preemption (Carlier, 1982).
func oneStream(jobs []job) float64 {
	slices.SortFunc(jobs, func(a, b job) int { return cmp.Compare(a.head, b.head) })
	ready := &queue[job]{less: func(a, b job) bool { return a.tail > b.tail }} // the longest tail first
	lb, t, next := 0.0, 0.0, 0
	for next < len(jobs) || ready.Len() > 0 {
		if ready.Len() == 0 {
			t = max(t, jobs[next].head)
		}
		for next < len(jobs) && jobs[next].head <= t {
			heap.Push(ready, jobs[next])
			next++
		}
		j := &ready.items[0]
		run := j.dur
		if next < len(jobs) {
			run = min(run, jobs[next].head-t)
		}
		t += run
		if j.dur -= run; j.dur <= 0 {
			lb = max(lb, t+j.tail)
			heap.Pop(ready)
		}
	}
	return lb
}
