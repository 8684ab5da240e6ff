// Package lower is the lowering pass: from a plan's distributed program
// (spmd.Program) to per-device programs in the format of package devprog.
//
// local.go lowers the program for one device (BuildLocal: each op on its
// local shapes, each layout change as its collective or slice) and derives
// every device's training step: each its own for running it (TrainSteps),
// or, for pricing it, one step derived per set of devices holding the same
// pieces, shared as it is or, in a mesh program, copied to name each
// device's own groups (CostSteps: 3 steps for bert-base's dp-cp on 64
// devices, 2 for megatron's), which schedule.go turns into a
// devprog.Program. order.go applies a plan's recorded collective order.
//
// lower imports ir, spmd, cost and devprog; nothing in lower may import
// encode, solve, plan, sim, a runtime backend or cmd.
package lower
