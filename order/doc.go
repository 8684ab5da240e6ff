// Package order searches, with Z3, the order in which a lowered program's communication streams
// issue their collectives: the instruction order where it matters for overlap. The planner fixes
// that order by a rule (forward in graph order, each gradient's reduction as soon as it is ready);
// this package asks whether another order makes the simulated step shorter, and proves, within a
// window, when none does. `hap plan --search-order` and `hap simulate PLAN --search-order` run it,
// and a plan records the order found as swaps (devprog.Swap, plan comm_order).
//
//	devprog.Program ──newProblem──► problem ──encodeTimeline──► Z3 (QF_IDL) ──check makespan ≤ best·(1−minGain)──┐
//	  durations under cost.Model    dominated devices dropped,        ▲                                        │ sat:
//	                                dependencies between collectives  └── best = simulated step ◄── sim.Run ◄──┘ read the order
//	                                                                       unsat: proven; budget out: stopped
//
// The encoding (search.go, encodeTimeline) is the simulator's timeline (package sim) as integer
// difference constraints in picoseconds: compute streams keep their order, each collective starts
// on all members at once after its dependencies, and two collectives on one stream do not overlap,
// in an order that is a Boolean when the pair lies within the window and no dependency (through any
// member, problem.go's reach) fixes it. Because the simulator starts every instruction as early as
// those constraints allow, the least makespan over the Booleans is exactly the least simulated step
// over the orders; tests check it against enumerating every order.
//
// Two reductions keep it small: a device whose every instruction is no longer than a twin's (same
// instructions, same dependencies) cannot finish later, so only the undominated devices are
// encoded (one per device type and shard on the paper's clusters); and a compute run — the compute
// instructions from one that waits on a collective to the next — is a single start variable.
//
// Before Z3 is asked anything, the order bound (bound.go) prices the program with the streams'
// order relaxed: heads and tails from the dependency DAG with no stream order, each raised to the
// collectives it waits on (or that wait on it) ending one after another on a shared stream, and
// each stream's one-machine bound (Jackson's preemptive schedule). No order of any window beats
// it, so an order that meets it is optimal with no solver call (Result.Bound; Status Optimal),
// and otherwise it is the search's gap. Its heads and tails are also stated to Z3 (every
// collective's earliest start and least tail), rows every order satisfies that let it prove what
// it could not: VGG19's synthesized plan on paper-16 went from out of budget after 25 s to proven
// in 0.15 s. On the synthesizer's plans the bound is within 0.04–1.1% of the best order found
// (docs/planner.md).
//
// The search is linear: each satisfying order is simulated, and the next check asks for one
// shorter by minGain. Z3's budget is its resource limit (rlimit), counted in work, so the answer
// is the same on any machine. Options.TimeLimit bounds the search's wall time as well (hap plan
// --time-limit): each check gets what is left as Z3's timeout, and the answer then depends on
// the machine (Status TimeLimit). Memory is not encoded: Options.Accept vets each order's simulated
// peak, and a rejected order's swaps are excluded together.
//
// The order found is then tidied (tidy.go): a Z3 model sets pairs with slack either way, so each
// collective issued early is moved back toward its list place, one move at a time, keeping every
// move that leaves the step no longer, until none is kept. What remains are the reversals that
// pay (bert-moe paper-8: 684 → 78), and the step sometimes shortens further on the way.
//
// order imports devprog (the program), cost (durations), sim (to check each order) and solve/z3; it
// must not import plan, encode or anything that plans, so that any lowered program can be searched.
// It keeps no package-level mutable state.
package order
