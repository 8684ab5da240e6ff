// Package devprog owns the per-device program format: for every device,
// the ordered kernel launches (with local shapes and work) and collective
// calls (with per-rank counts, padding and method) it runs in one training
// step, their dependencies, and the memory each allocates and frees
// (program.go: Program, DeviceProgram, Instr, Kernel, Comm), with its
// validator. It is the contract between the lowering pass (package lower),
// the simulator (sim), the order search (order) and the runtime
// (executor), so that they consume programs without depending on how they
// were made.
//
// swaps.go writes a communication-stream order (CommOrder) as the
// collective pairs it reverses, as plans record it, and applies such a
// list (ApplyCommOrder); issue.go merges each device's two streams into
// the one queue a runtime issues (IssueOrders) and refuses an order that
// would hang.
//
// devprog imports cost (the collective and method vocabulary) and ir for
// ir.Work alone (a kernel's work): never the IR's graphs, the SPMD
// semantics, the planner or a backend.
package devprog
