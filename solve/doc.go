// Package solve is hap's solver loop: the joint solve that turns an encoding
// (package encode) into a plan's program: Synthesize, which runs the
// joint MILP and a deterministic primal heuristic, Polish — LocalSearch
// (rule and layout moves priced by Encoding.Evaluate, and when those
// stall relabel.go's segment moves, chain.go's runs of op classes moved
// together and pairs of leaf layouts) ⇄ the exact integer lengths for the
// program found — side by side from the best start (the default bare
// search) or one after the other, the MILP from Polish's plan (a thorough
// or time-limited search), keeps the cheaper plan, and bounds every solve by
// branch-and-bound nodes, so that the same inputs give the same plan on
// any machine (a time limit, when asked for, caps it too). pinned.go
// solves the MILP with the program or the lengths pinned; methods.go
// breaks the ties the step time leaves among collective methods, toward
// less communication; bound.go solves the transport relaxation
// (encode.TransportLP) beside the joint MILP for a tighter proven bound,
// and alone for plan's device search (TransportFor: solved until it
// proves a set of devices no faster than a plan already found, with
// ideal.go's IdealFor the cheaper screen before it);
// solve/paper is the HAP paper's own algorithm
// (bench's hap-paper, and a start here), and solve/z3 the cgo binding to
// Z3 that the order search (package order) uses. The MILP model itself is
// package milp, solver-neutral, with its CBC backend in milp/cbc.
//
//	graph + cluster ──encode.Encode──► Encoding ──Encoding.MILP──► milp.Model
//	                                                                  │ CBC
//	  Program ◄──Encoding.Decode── Choice ◄──tidyMethods── Choice ◄──Encoding.ChoiceFrom── solution
//
// solve imports encode, spmd, ir, cost, milp and milp/cbc, and never
// lower, devprog or sim: it chooses programs, it does not lower or time
// them (internal/layering holds it to that). solve/z3 imports nothing of
// hap; solve/paper imports ir, spmd, cost, milp and milp/cbc, never
// encode or solve itself.
package solve
