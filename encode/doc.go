// Package encode owns hap's planning problem, built on the SPMD semantics of
// package spmd (layouts, sharding rules, programs): the choice of a program
// for a graph on a cluster — op and tensor classes, each class's rule,
// leaf layouts, collective methods, all-to-alls and integer shard lengths
// per segment and device (encoding.go: Encoding, Choice) — and its price.
//
// A Choice is priced two ways that must agree: Evaluate (evaluate.go)
// prices one choice under the step-time model (timeline.go: the
// two-stream timeline the simulator runs, with the memory of memory.go),
// and the MILP (milp.go) prices every choice at once, its rows built from
// the same terms; the same MILP with transport rows (transport.go) has a
// far tighter LP relaxation. Decode turns a choice into an spmd.Program.
// An Evaluator prices without allocating, for loops that price thousands.
// An Encoding is read-only once built, so pricing may run on several
// goroutines (one Evaluator each).
//
// The MILP is built as a declared list of row families (builder.go:
// milpFamilies, and tensorFamilies run per tensor class), each in a file of
// its own (family_*.go, and timeline.go, memory.go, transport.go,
// gradsum.go, roofline.go for the larger ones) with what it adds, what it
// needs built before it and why the model has it. The list's order is the
// model's column and row order, pinned bit for bit by TestMILPIsWhatItWas;
// TestEveryMILPFamilyPricesAsEvaluate checks each family on a case it
// exercises.
//
// A collective whose one method never costs more than the other, whatever
// the lengths, has it fixed when the encoding is built (prune.go): no
// search chooses it, and the MILP's starts and pins set it.
//
// An op's compute is priced at its rule's share of the work, except the
// adds that sum the gradients of an input several ops read, priced over
// the conversion tree the program sums them on (gradsum.go: each reader's
// at the layout it reads, OpClass.Acc, and each conversion's at the
// layouts it joins), and the kernels that move bytes whatever the share
// (an operand a rule leaves whole, an embedding's gradient's table),
// priced at their roofline at the shapes a device runs them at
// (roofline.go). A layout change's pads (a slice's adjoint, a Gather made
// Reduce) are compute on the devices too (padTimes). A leaf read in
// several blocks (GPT-2's tied embedding) has its layout change timed at
// the first reader that needs it, where Decode makes it (spreadLeaf).
//
// encode imports ir, spmd, cost (prices) and milp (the model type) only:
// never a solver backend, the plan format, or anything that lowers or runs
// a program.
package encode
