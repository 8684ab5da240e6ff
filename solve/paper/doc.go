// Package paper owns hap's re-implementation of the HAP paper's own
// synthesis algorithm (Zhang et al., EuroSys 2024, §4–5), bench's
// hap-paper system and one of the synthesizer's candidates: best-first
// search for the cheapest program under fixed sharding ratios, alternated
// with a linear program for the ratios under the program found. It is a
// baseline, built to be the paper's algorithm rather than hap's: no memory
// limit, no topology (one bandwidth per collective type), no overlap, one
// global choice of padded or grouped uneven collectives, and one ratio
// vector for every segment.
//
// It imports ir, spmd (rules, layouts, programs), cost (the prices the
// paper's profiler would measure: compute times and collective
// bandwidths), and milp with its CBC backend for the LP — never
// encode, lower, sim, plan, bench or cmd, and not solve (the caller
// passes the candidate segments).
//
// # The search (search.go)
//
// A state is a property set: which layouts of which tensors are available
// (encode's Layouts: Identity, Gather(dim, segment), Reduce), and which
// tensors were already communicated. A computation instruction is a
// forward op under one of its sharding rules (spmd.Rules): its
// precondition the layouts the rule reads, its postcondition the layouts
// it writes. A communication instruction changes one tensor's layout:
// all-gather Gather→Identity, reduce-scatter Reduce→Gather, all-reduce
// Reduce→Identity, all-to-all Gather(i)→Gather(j), and the local, free
// dynamic slice Identity→Gather (the paper has no pad to Reduce). The goal
// is the loss held as Reduce. The paper's four reductions:
//
//  1. compute each op once: ops run in a fixed topological order, each
//     exactly once, under one rule;
//  2. communicate each tensor once: at most one collective per tensor
//     (dynamic slices, being local and free, are not communication and
//     may follow from any available Identity);
//  3. fold parameters and inputs into their consumers: a leaf's layout is
//     chosen when its first reader runs (any layout it can be fed in, a
//     replicated parameter paying its gradient all-reduce), not as a
//     search step of its own;
//  4. fold communication into the consumer: communication happens only
//     immediately before an op that reads its result — for each input the
//     rule's layout is obtained, if not available, by a slice of an
//     available Identity, or by one collective from an available layout,
//     or by a collective to Identity then a slice.
//
// Two further reductions, both exact: ops run in one fixed topological
// order (the cost is a sum over instructions, so order never changes it),
// and states with equal property sets of live tensors — those some later
// op reads, and the loss — are merged, the cheapest kept. Where a slice
// is available, collectives to the same layout are not tried (the slice
// is free and leaves the tensor uncommunicated).
//
// The search is A* with an admissible heuristic (heuristic.go) — the
// paper's best-first search with a lower bound on the cost still to pay
// in place of its zero — expanding at most MaxExpansions states, with
// ties popped in creation order, so that it is exact and deterministic.
// A search that reaches that bound takes a beam search's program instead
// (not proven the cheapest), and once one has, Synthesize's later
// searches (other rounds' shares, the other method) run the beam search
// alone rather than spend the bound's expansions again
// (Options.SearchEvery keeps the best-first search in each).
//
// # The cost (prices.go, program.go)
//
// As in the paper, under fixed per-device shares B each instruction
// costs the slowest device's compute plus the slowest device's
// communication, forward and backward together, and a program the sum
// over its instructions (no overlap):
//
//   - a computation: max_d time(op, d)·B[d] under a rule that splits the
//     op's work (any Gather layout), max_d time(op, d) otherwise, where
//     time is the cost model's forward plus backward (the gradient ops
//     autodiff emits) seconds of the whole op on device d;
//   - a collective over a tensor of S bytes: one bandwidth per collective
//     type (Bandwidths, read off the cost model over all devices for a
//     large message, latency excluded); padded all-gather, reduce-scatter
//     and all-to-all cost n·max_d B[d]·S / bandwidth, grouped all-gather
//     and reduce-scatter S / bandwidth of the grouped call, all-reduce
//     S / bandwidth; each is paid again for its adjoint in backward when
//     the tensor has a gradient (all-gather ↔ reduce-scatter, all-reduce
//     ↔ all-reduce, all-to-all ↔ all-to-all); dynamic slices are free;
//   - a replicated parameter: its gradient's all-reduce (data
//     parallelism's cost).
//
// Every collective's cost is c0 + c1·max_d B[d], so folding several into
// one instruction changes nothing, and the program's cost is linear in
// max-terms of B: the ratio LP (ratios.go) minimises it exactly.
//
// # The alternation (paper.go)
//
// From shares proportional to each device's FP32 peak: search at the
// current shares, then solve the ratio LP for the program found; repeat
// while the search's program is cheaper than the best (program, shares)
// pair so far and the LP improves on it, at most DefaultRounds rounds.
// The program's integer lengths are the shares rounded per segment by
// spmd.RoundLengths (floor, then leftovers to the largest shortfall).
// All of it runs once with every uneven all-gather and reduce-scatter
// padded and once with all of them grouped; the cheaper is kept.
package paper
