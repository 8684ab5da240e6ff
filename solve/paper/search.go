package paper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"hap/ir"
	"hap/spmd"
)

// MaxExpansions bounds one best-first search: the number of states it
// may expand (a count, not a clock, so that the result is the same on
// every machine). The paper suite needs at most about 0.1 M; a search
// that reaches the bound — tiny models on many devices, whose small
// dimensions every segment divides, and whose microsecond compute leaves
// communication to decide — falls back to a beam search.
const MaxExpansions = 300_000

// BeamWidth is how many states per op the fallback beam search keeps
// (the cheapest by cost so far plus the heuristic, ties in creation
// order). Its program is the best it finds, not necessarily the
// cheapest; Path.Capped says so.
const BeamWidth = 512

// ctxCheckEvery is how many expansions pass between looks at the context
// (the caller's safety stop).
const ctxCheckEvery = 1 << 12

// errExpansions: the best-first search expanded MaxExpansions states
// without reaching the goal.
var errExpansions = errors.New("the search expanded its maximum number of states")

// ErrNoProgram is returned when no program in the space ends with the
// loss as Reduce.
var ErrNoProgram = errors.New("no program in the paper's space makes the loss Reduce")

// How an input is obtained before its consumer runs (Choice.opt).
const (
	optHave      = iota // already available in the layout the rule reads
	optSlice            // dynamic slice from Identity (free)
	optColl             // one collective from the source layout
	optCollSlice        // a collective to Identity, then a dynamic slice
)

// choice packs, per input slot, how the layout was obtained: the leaf's
// fed layout + 1 (0: not fed here) in bits 16–23, the option in bits 8–15
// and the collective's source layout in bits 0–7.
func pack(place, opt, src int) uint32 { return uint32(place)<<16 | uint32(opt)<<8 | uint32(src) }
func unpack(c uint32) (place, opt, src int) {
	return int(c>>16) & 0xff, int(c>>8) & 0xff, int(c) & 0xff
}

// prices are the costs of one search under fixed ratios, and the tables
// of its heuristic.
type prices struct {
	op   [][]float64  // [op][rule] compute
	comm [][4]float64 // [tensor][kAllGather..kAllToAll]
	grad []float64    // [tensor] a replicated parameter's gradient all-reduce
	// conv[t][a·nb+L]: the cheapest way, in the paper's space, to make
	// layout L of tensor t available when only layout a is (and t was
	// never communicated); +Inf when none.
	conv [][]float64
	// The heuristic (see heuristic.go), per relaxation: q[c][r] bounds
	// what op c under rule r and everything hanging under it costs;
	// root[k] sums the bounds of the root ops from k on.
	q    [numForests][][]float64
	root [numForests][]float64
	// read[f][n][L] is relaxation f's term for read n (see
	// Problem.firstUse) of a tensor held in layout L alone, never
	// communicated: the common case of h, precomputed.
	read [numForests][][]float64
	// scratch for h: one entry per rule
	tmp []float64
}

func (p *Problem) prices(b []float64, method Method) *prices {
	pr := &prices{op: make([][]float64, len(p.ops)), comm: make([][4]float64, len(p.tens)), grad: make([]float64, len(p.tens)), conv: make([][]float64, len(p.tens))}
	bmax := maxShare(b)
	for k := range p.ops {
		pr.op[k] = make([]float64, len(p.ops[k].rules))
		for r := range pr.op[k] {
			pr.op[k][r] = p.computeCost(k, r, b)
		}
	}
	for t := range p.tens {
		ti := &p.tens[t]
		for k := kAllGather; k <= kAllToAll; k++ {
			c0, c1 := p.BW.commCoeffs(k, ti.bytes, p.N, p.req[t], method)
			pr.comm[t][k] = c0 + c1*bmax
		}
		if ti.param && p.req[t] {
			pr.grad[t] = p.BW.gradCoeff(ti.bytes)
		}
		if ti.used {
			pr.conv[t] = p.convTable(ti, &pr.comm[t])
		}
	}
	p.heuristic(pr)
	p.readTerms(pr)
	return pr
}

// convTable is conv[a·nb+L] for one tensor (see prices.conv).
func (p *Problem) convTable(ti *tensorInfo, comm *[4]float64) []float64 {
	nb := len(ti.layouts)
	tab := make([]float64, nb*nb)
	for a, from := range ti.layouts {
		for L, to := range ti.layouts {
			c := math.Inf(1)
			switch {
			case a == L, a == bitI && ti.gather&(1<<L) != 0:
				c = 0
			default:
				if k := kindOf(from, to); k <= kAllToAll {
					c = comm[k]
				}
				if to.Kind == spmd.Gather {
					if k := kindOf(from, spmd.I); k <= kAllToAll {
						c = math.Min(c, comm[k])
					}
				}
			}
			tab[a*nb+L] = c
		}
	}
	return tab
}

// node is one state of the search: the layouts (and communicated flag)
// of every tensor live before op k, reached at cost g. The words live in
// searcher.arena at off (len(live[k]) of them).
type node struct {
	g      float64
	f      float64 // g plus the heuristic
	off    int32
	parent int32
	k      int32
	act    int32 // offset into searcher.acts: rule, then one choice per input
	stale  bool  // a cheaper node with the same state replaced it
}

type item struct {
	f  float64
	id int32
}

// heap is a binary min-heap on (f, id): equal priorities pop in creation
// order, so the search is deterministic.
type heap []item

func (h heap) less(i, j int) bool {
	return h[i].f < h[j].f || (h[i].f == h[j].f && h[i].id < h[j].id)
}

func (h *heap) push(x item) {
	*h = append(*h, x)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !a.less(i, p) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *heap) pop() item {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && a.less(l, m) {
			m = l
		}
		if r < n && a.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// searcher holds one search's state.
type searcher struct {
	p     *Problem
	pr    *prices
	nodes []node
	arena []uint64
	acts  []uint32
	table table
	open  heap
	// beam, when set, collects the new nodes (the beam search) instead of
	// queueing them.
	beam  bool
	level []int32

	uniform  bool // no heuristic: uniform-cost search
	improved int

	// The expansion in progress.
	u      int32
	k, r   int
	ext    []uint64
	choice []uint32
	words  []uint64
}

// Path is a search's result: per op, the rule and how each input was
// obtained (see pack), and the paper's cost at the search's ratios.
type Path struct {
	Rules      []int
	Choices    [][]uint32
	Cost       float64
	Expansions int
	States     int
	Bound      float64 // the heuristic at the root: a lower bound on Cost
	Improved   int     // states reached again more cheaply (queued or expanded)
	// Capped says the best-first search reached MaxExpansions and the
	// beam search's program was taken instead: Cost is then not proven
	// the least.
	Capped bool
}

// Search finds the cheapest program of the paper's space at per-group
// shares b with the global method, best-first; if that expands
// MaxExpansions states, it returns the beam search's program instead,
// marked Capped. See the package documentation for the space and its
// reductions.
func (p *Problem) Search(ctx context.Context, b []float64, method Method) (*Path, error) {
	return p.searchOrBeam(ctx, b, method, false)
}

// searchOrBeam is Search, or with beamOnly the beam search alone (Capped):
// what Search returns wherever the best-first search would reach
// MaxExpansions, without the expansions that find that out.
func (p *Problem) searchOrBeam(ctx context.Context, b []float64, method Method, beamOnly bool) (*Path, error) {
	pr := p.prices(b, method)
	spent := 0
	if !beamOnly {
		pa, err := p.newSearcher(pr, false).bestFirst(ctx)
		if !errors.Is(err, errExpansions) {
			return pa, err
		}
		spent = MaxExpansions
	}
	pa, err := p.newSearcher(pr, false).beamSearch(ctx)
	if err != nil {
		return nil, err
	}
	pa.Capped = true
	pa.Expansions += spent
	return pa, nil
}

// search is the best-first search alone; uniform, it is the paper's
// plain uniform-cost search (no heuristic), which the tests compare with.
func (p *Problem) search(ctx context.Context, b []float64, method Method, uniform bool) (*Path, error) {
	return p.newSearcher(p.prices(b, method), uniform).bestFirst(ctx)
}

func (p *Problem) newSearcher(pr *prices, uniform bool) *searcher {
	s := &searcher{p: p, pr: pr, uniform: uniform}
	s.table.init(1 << 12)
	maxScratch := 0
	for k := range p.ops {
		maxScratch = max(maxScratch, len(p.live[k])+len(p.ops[k].places))
	}
	s.ext = make([]uint64, maxScratch)
	s.words = make([]uint64, maxScratch)
	s.choice = make([]uint32, 0, 16)
	return s
}

// bestFirst is A*: states popped cheapest (cost so far plus heuristic)
// first, ties in creation order; the first goal popped is the cheapest.
func (s *searcher) bestFirst(ctx context.Context) (*Path, error) {
	p := s.p
	s.add(0, nil, -1, 0)
	K := len(p.ops)
	expansions := 0
	for len(s.open) > 0 {
		it := s.open.pop()
		nd := &s.nodes[it.id]
		if nd.stale {
			continue
		}
		if int(nd.k) == K {
			if s.isGoal(nd) {
				return s.path(it.id, expansions), nil
			}
			continue
		}
		expansions++
		if expansions > MaxExpansions {
			return nil, fmt.Errorf("%w (%d; %d states, at op %d of %d)", errExpansions, MaxExpansions, len(s.nodes), nd.k, K)
		}
		if expansions%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("search stopped by its safety limit after %d expansions: %w", expansions, err)
			}
		}
		s.expand(it.id)
	}
	return nil, ErrNoProgram
}

// beamSearch expands the program op by op, keeping the BeamWidth
// cheapest states (by cost so far plus heuristic) after each op, and
// returns the cheapest goal.
func (s *searcher) beamSearch(ctx context.Context) (*Path, error) {
	p := s.p
	K := len(p.ops)
	s.beam = true
	s.add(0, nil, -1, 0)
	expansions := 0
	for k := 0; k < K; k++ {
		cur := s.live(s.level)
		s.level = nil
		for _, id := range cur {
			expansions++
			s.expand(id)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("beam search stopped by its safety limit at op %d of %d: %w", k, K, err)
		}
	}
	var best int32 = -1
	for _, id := range s.live(s.level) {
		if nd := &s.nodes[id]; s.isGoal(nd) && (best < 0 || nd.g < s.nodes[best].g) {
			best = id
		}
	}
	if best < 0 {
		return nil, ErrNoProgram
	}
	return s.path(best, expansions), nil
}

// live is the beam: the level's nodes not replaced, the BeamWidth
// cheapest by f, ties in creation order.
func (s *searcher) live(level []int32) []int32 {
	var out []int32
	for _, id := range level {
		if !s.nodes[id].stale {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b int32) int {
		if c := cmp.Compare(s.nodes[a].f, s.nodes[b].f); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return out[:min(len(out), BeamWidth)]
}

func (s *searcher) isGoal(nd *node) bool {
	for i, t := range s.p.live[len(s.p.ops)] {
		if t == s.p.G.Loss {
			return s.arena[int(nd.off)+i]&(1<<bitR) != 0
		}
	}
	return false
}

// add records a node for state words before op k (words is copied) and
// queues it, unless a node with the same state is at least as cheap.
func (s *searcher) add(k int, words []uint64, parent int32, gain float64) {
	g := 0.0
	if parent >= 0 {
		g = s.nodes[parent].g + gain
	}
	hash := stateHash(k, words)
	if id := s.find(hash, k, words); id >= 0 {
		old := &s.nodes[id]
		if old.g <= g {
			return
		}
		// Cheaper than a node already queued or expanded: it is replaced
		// (the heuristic is not consistent, so even an expanded state may
		// be reached more cheaply later; it is then expanded again).
		old.stale = true
		s.improved++
		s.table.remove(hash, id)
	}
	h := 0.0
	if !s.uniform {
		h = s.h(k, words)
	}
	if math.IsInf(h, 1) {
		return // some remaining read can no longer be served
	}
	act := int32(-1)
	if parent >= 0 {
		act = int32(len(s.acts))
		s.acts = append(s.acts, uint32(s.r))
		s.acts = append(s.acts, s.choice...)
	}
	id := int32(len(s.nodes))
	s.nodes = append(s.nodes, node{g: g, f: g + h, off: int32(len(s.arena)), parent: parent, k: int32(k), act: act})
	s.arena = append(s.arena, words...)
	s.table.insert(hash, id)
	if s.beam {
		s.level = append(s.level, id)
		return
	}
	s.open.push(item{g + h, id})
}

// expand generates every successor of node u: op k under each of its
// rules, with every way the paper's space allows to obtain each input.
func (s *searcher) expand(u int32) {
	nd := &s.nodes[u]
	s.u, s.k = u, int(nd.k)
	oi := &s.p.ops[s.k]
	nl := len(s.p.live[s.k])
	ext := s.ext[:nl+len(oi.places)]
	copy(ext, s.arena[nd.off:int(nd.off)+nl])
	clear(ext[nl:])
	lossOut := -1
	if s.k == s.p.lossOp {
		for j, t := range s.p.G.Ops[s.k].Outputs {
			if t == s.p.G.Loss {
				lossOut = j
			}
		}
	}
	for r := range oi.rules {
		// Nothing turns a layout into Reduce (the paper has no pad), so
		// the loss must be produced as Reduce.
		if lossOut >= 0 && oi.out[r][lossOut] != bitR {
			continue
		}
		s.r = r
		s.choice = s.choice[:0]
		s.slot(0, s.pr.op[s.k][r])
	}
}

// slot obtains input j (and then the rest) of op k under rule r.
func (s *searcher) slot(j int, cost float64) {
	oi := &s.p.ops[s.k]
	if j == len(oi.slot) {
		s.successor(cost)
		return
	}
	t := s.p.G.Ops[s.k].Inputs[j]
	wi := oi.slot[j]
	if s.ext[wi] == 0 {
		// A leaf first read here: its fed layout is chosen now (the third
		// reduction), any layout it can be fed in, then obtained like any
		// other tensor's.
		ti := &s.p.tens[t]
		for m := ti.leafOK; m != 0; m &= m - 1 {
			x := bits.TrailingZeros64(m)
			c := cost
			if x == bitI {
				c += s.pr.grad[t]
			}
			s.ext[wi] = 1 << x
			s.obtain(j, t, wi, c, x+1)
		}
		s.ext[wi] = 0
		return
	}
	s.obtain(j, t, wi, cost, 0)
}

// obtain makes the layout rule r reads at input j available, by the
// options of the paper's space: already there; a free dynamic slice of an
// available Identity; or — only if the tensor was never communicated (the
// second reduction) — one collective from an available layout, or a
// collective to Identity followed by a slice. Whatever communication it
// takes runs just before op k (the fourth reduction).
func (s *searcher) obtain(j int, t ir.TensorID, wi int, cost float64, place int) {
	oi := &s.p.ops[s.k]
	L := int(oi.in[s.r][j])
	w := s.ext[wi]
	s.choice = append(s.choice, 0)
	defer func() { s.choice = s.choice[:j] }()
	if w&(1<<L) != 0 {
		s.choice[j] = pack(place, optHave, 0)
		s.slot(j+1, cost)
		return
	}
	ti := &s.p.tens[t]
	if ti.gather&(1<<L) != 0 && w&(1<<bitI) != 0 {
		// A free slice dominates any collective to the same layout.
		s.ext[wi] = w | 1<<L
		s.choice[j] = pack(place, optSlice, 0)
		s.slot(j+1, cost)
		s.ext[wi] = w
		return
	}
	if w&flag != 0 {
		return // communicated once already
	}
	to := ti.layouts[L]
	for m := w & availAll; m != 0; m &= m - 1 {
		a := bits.TrailingZeros64(m)
		from := ti.layouts[a]
		if k := kindOf(from, to); k <= kAllToAll {
			s.ext[wi] = w | 1<<L | flag
			s.choice[j] = pack(place, optColl, a)
			s.slot(j+1, cost+s.pr.comm[t][k])
		}
		if to.Kind == spmd.Gather {
			if k := kindOf(from, spmd.I); k <= kAllToAll {
				s.ext[wi] = w | 1<<L | 1<<bitI | flag
				s.choice[j] = pack(place, optCollSlice, a)
				s.slot(j+1, cost+s.pr.comm[t][k])
			}
		}
	}
	s.ext[wi] = w
}

// successor records the state after op k under rule r with the inputs
// obtained as s.choice says, cost the instructions' price.
func (s *searcher) successor(cost float64) {
	oi := &s.p.ops[s.k]
	k1 := s.k + 1
	words := s.words[:len(s.p.live[k1])]
	for i, src := range oi.next {
		if src >= 0 {
			words[i] = s.ext[src]
		} else {
			words[i] = 1 << oi.out[s.r][-1-src]
		}
	}
	s.add(k1, words, s.u, cost)
}

// path reconstructs the rules and choices from the goal back to the root.
func (s *searcher) path(goal int32, expansions int) *Path {
	K := len(s.p.ops)
	pa := &Path{Rules: make([]int, K), Choices: make([][]uint32, K), Cost: s.nodes[goal].g, Expansions: expansions, States: len(s.nodes), Bound: s.h(0, nil), Improved: s.improved}
	for id := goal; s.nodes[id].parent >= 0; id = s.nodes[id].parent {
		nd := &s.nodes[id]
		k := int(nd.k) - 1
		n := len(s.p.ops[k].slot)
		a := s.acts[nd.act : int(nd.act)+1+n]
		pa.Rules[k] = int(a[0])
		pa.Choices[k] = append([]uint32(nil), a[1:]...)
	}
	return pa
}

// same reports whether node id holds state words before op k.
func (s *searcher) same(id int32, k int, words []uint64) bool {
	nd := &s.nodes[id]
	if int(nd.k) != k {
		return false
	}
	for i, w := range words {
		if s.arena[int(nd.off)+i] != w {
			return false
		}
	}
	return true
}

// stateHash mixes k and the words (splitmix64's finaliser per word).
func stateHash(k int, words []uint64) uint64 {
	h := uint64(k)*0x9e3779b97f4a7c15 + 1
	for _, w := range words {
		h ^= w + 0x9e3779b97f4a7c15 + h<<6 + h>>2
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// table maps state hashes to node ids: open addressing, linear probing,
// tombstones for replaced nodes.
type table struct {
	ids    []int32 // −1 empty, −2 removed
	hashes []uint64
	used   int
}

func (t *table) init(n int) {
	t.ids = make([]int32, n)
	t.hashes = make([]uint64, n)
	for i := range t.ids {
		t.ids[i] = -1
	}
	t.used = 0
}

// find is the node holding state words before op k, or −1.
func (s *searcher) find(h uint64, k int, words []uint64) int32 {
	t := &s.table
	mask := uint64(len(t.ids) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch id := t.ids[i]; {
		case id == -1:
			return -1
		case id >= 0 && t.hashes[i] == h && s.same(id, k, words):
			return id
		}
	}
}

func (t *table) remove(h uint64, id int32) {
	mask := uint64(len(t.ids) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if t.ids[i] == id {
			t.ids[i] = -2
			return
		}
	}
}

func (t *table) insert(h uint64, id int32) {
	if 2*(t.used+1) > len(t.ids) {
		old, oldH := t.ids, t.hashes
		t.init(2 * len(old))
		for i, x := range old {
			if x >= 0 {
				t.insert(oldH[i], x)
			}
		}
	}
	mask := uint64(len(t.ids) - 1)
	i := h & mask
	for t.ids[i] >= 0 {
		i = (i + 1) & mask
	}
	t.ids[i] = id
	t.hashes[i] = h
	t.used++
}
