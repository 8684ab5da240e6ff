package paper

import (
	"math"
	"math/bits"
)

// The search's heuristic is a lower bound on the cost still to pay from
// a state, from relaxations of the remaining program in which an op's
// rule may differ for each of its computed inputs: each input i gets a
// share λ_i (Σ λ_i = 1) of the op — its compute, its first-read leaves'
// feeding, and the bounds of what its outputs feed, all under one rule —
// with its own conversion to that rule's layout, under whichever rule is
// cheapest for it. Ops reading only leaves are roots, counted whole.
// Two relaxations are kept and the larger bound used: each op hung
// wholly under its primary input (λ = 1 for the input produced last —
// the branch of a residual add, not the skip connection — then the
// largest), and each op shared evenly among its computed inputs. A tensor
// read n times (over ops and slots) pays 1/n of each read's cheapest
// conversion from its layout: one collective may serve every reader, and
// the true cost is at least the dearest read's conversion, which is at
// least their average. A leaf pays its feeding (a replicated parameter's
// gradient all-reduce) with its first reader, coupled to that reader's
// rule.
//
// For a state before op k: the bounds of the root ops from k on, plus,
// for every read at op k or later of a tensor held in the state, the
// read's term computed from the layouts actually held (Identity gives
// every Gather for free; a tensor already communicated can obtain nothing
// else). Every term is at most what the true program pays for it, so the
// bound is admissible; it is not consistent (a collective shared by
// several readers is charged in parts), so the search reopens states
// reached again more cheaply.

// weight is 1/n for a tensor read n times.
func (p *Problem) weight(t int) float64 { return 1 / float64(len(p.tens[t].uses)) }

// heuristic fills pr.q and pr.root of every relaxation, from the last
// op back.
func (p *Problem) heuristic(pr *prices) {
	K := len(p.ops)
	inf := math.Inf(1)
	maxRules := 0
	for k := range p.ops {
		maxRules = max(maxRules, len(p.ops[k].rules))
	}
	pr.tmp = make([]float64, maxRules)
	// tail[t][X]: a leaf fed in X, its reads after the first reader.
	tail := make([][]float64, len(p.tens))
	for t := range p.tens {
		ti := &p.tens[t]
		if !ti.used || !ti.leaf {
			continue
		}
		nb := len(ti.layouts)
		tail[t] = make([]float64, nb)
		w := p.weight(t)
		for m := ti.leafOK; m != 0; m &= m - 1 {
			x := bits.TrailingZeros64(m)
			for _, us := range ti.uses {
				if us.c == ti.first {
					continue
				}
				oi := &p.ops[us.c]
				best := inf
				for r := range oi.rules {
					best = math.Min(best, w*pr.conv[t][x*nb+int(oi.in[r][us.j])])
				}
				tail[t][x] += best
			}
		}
	}
	// feed[c][r]: the leaves first read by op c under rule r — fed in the
	// cheapest layout, converted for these reads, and their later reads.
	feed := make([][]float64, K)
	for c := range p.ops {
		oi := &p.ops[c]
		feed[c] = make([]float64, len(oi.rules))
		for r := range oi.rules {
			for _, fl := range oi.fed {
				ti := &p.tens[fl.t]
				nb := len(ti.layouts)
				w := p.weight(int(fl.t))
				best := inf
				for m := ti.leafOK; m != 0; m &= m - 1 {
					x := bits.TrailingZeros64(m)
					f := tail[fl.t][x]
					if x == bitI {
						f += pr.grad[fl.t]
					}
					for _, j := range fl.slots {
						f += w * pr.conv[fl.t][x*nb+int(oi.in[r][j])]
					}
					best = math.Min(best, f)
				}
				feed[c][r] += best
			}
		}
	}
	g := p.G
	for f := 0; f < numForests; f++ {
		pr.q[f] = make([][]float64, K)
		pr.root[f] = make([]float64, K+1)
		// u[t][L]: the bound of the reads of a computed tensor t held in
		// layout L alone (filled by its readers, which come after it).
		u := make([][]float64, len(p.tens))
		for t := range p.tens {
			if ti := &p.tens[t]; ti.used && !ti.leaf {
				u[t] = make([]float64, len(ti.layouts))
			}
		}
		for c := K - 1; c >= 0; c-- {
			oi := &p.ops[c]
			op := &g.Ops[c]
			q := make([]float64, len(oi.rules))
			for r := range oi.rules {
				v := pr.op[c][r] + feed[c][r]
				for o, t := range op.Outputs {
					if c == p.lossOp && t == g.Loss && oi.out[r][o] != bitR {
						v = inf
					}
					if u[t] != nil {
						v += u[t][oi.out[r][o]]
					}
				}
				q[r] = v
			}
			pr.q[f][c] = q
			lambda := oi.lambda[f]
			for j, t := range op.Inputs {
				if u[t] == nil {
					continue // a leaf: paid with its first reader, or in tail
				}
				nb := len(p.tens[t].layouts)
				w := p.weight(int(t))
				for L := range u[t] {
					best := inf
					for r := range oi.rules {
						x := w * pr.conv[t][L*nb+int(oi.in[r][j])]
						if lambda[j] > 0 {
							x += lambda[j] * q[r]
						}
						best = math.Min(best, x)
					}
					u[t][L] += best
				}
			}
			pr.root[f][c] = pr.root[f][c+1]
			if oi.root {
				best := inf
				for _, x := range q {
					best = math.Min(best, x)
				}
				pr.root[f][c] += best
			}
		}
	}
}

// readTerms fills pr.read: for every read and every single layout, each
// relaxation's term (see h).
func (p *Problem) readTerms(pr *prices) {
	n := p.firstUse[len(p.ops)]
	for f := range pr.read {
		pr.read[f] = make([][]float64, n)
	}
	for c := range p.ops {
		for j, t := range p.G.Ops[c].Inputs {
			if !p.tens[t].used {
				continue
			}
			nb := len(p.tens[t].layouts)
			for f := range pr.read {
				terms := make([]float64, nb)
				for L := range terms {
					terms[L] = p.readTerm(pr, f, c, j, 1<<L, pr.tmp)
				}
				pr.read[f][p.firstUse[c]+j] = terms
			}
		}
	}
}

// readTerm is relaxation f's term for op c's read j of a tensor held as
// word w: the cheapest rule for it of its conversion, weighted by the
// tensor's reads, plus its share λ of the op's bound under that rule.
func (p *Problem) readTerm(pr *prices, f, c, j int, w uint64, tmp []float64) float64 {
	t := p.G.Ops[c].Inputs[j]
	ti := &p.tens[t]
	oi := &p.ops[c]
	wt := p.weight(int(t))
	lambda := oi.lambda[f][j]
	q := pr.q[f][c]
	best := math.Inf(1)
	for r := range oi.rules {
		x := wt * convSet(ti, pr.conv[t], w, int(oi.in[r][j]))
		if lambda > 0 {
			x += lambda * q[r]
		}
		if x < best {
			best = x
		}
	}
	return best
}

// h is the heuristic of the state words before op k: the largest of the
// relaxations' bounds.
func (s *searcher) h(k int, words []uint64) float64 {
	p, pr := s.p, s.pr
	var v [numForests]float64
	for f := range v {
		v[f] = pr.root[f][k]
	}
	for _, fu := range p.frontier[k] {
		w := words[fu.live]
		if w&(w-1) == 0 {
			L := bits.TrailingZeros64(w)
			for f := range v {
				v[f] += pr.read[f][fu.use][L]
			}
			continue
		}
		for f := range v {
			v[f] += p.readTerm(pr, f, fu.c, fu.j, w, pr.tmp)
		}
	}
	best := v[0]
	for _, x := range v[1:] {
		if x > best {
			best = x
		}
	}
	return best
}

// convSet is the cheapest way to obtain layout L of a tensor whose state
// word is w (its layouts held and whether it was communicated).
func convSet(ti *tensorInfo, conv []float64, w uint64, L int) float64 {
	if w&(1<<L) != 0 || (w&(1<<bitI) != 0 && ti.gather&(1<<L) != 0) {
		return 0
	}
	if w&flag != 0 {
		return math.Inf(1)
	}
	nb := len(ti.layouts)
	best := math.Inf(1)
	for m := w & availAll; m != 0; m &= m - 1 {
		if x := conv[bits.TrailingZeros64(m)*nb+L]; x < best {
			best = x
		}
	}
	return best
}
