// Package lower turns a plan into per-device programs: for every device, the ordered kernel launches
// (with local shapes and work) and collective calls (with per-rank counts, padding and method) it runs in
// one training step, their dependencies, and the memory each allocates and frees.
//
// program.go defines that per-device program format (Program, DeviceProgram, Instr, Kernel, Comm) and its
// validator. It is the contract between the lowering pass, the simulator (package sim) and the runtime;
// it imports only package cost (for Work and the collective/method vocabulary) and must stay free of the
// IR, the planner and any backend, so that the simulator and runtimes can consume programs without
// depending on how they were made. swaps.go writes a communication-stream order (CommOrder) as the
// collective pairs it reverses, as plans record it; issue.go merges each device's two streams into the
// one queue a runtime issues (IssueOrders) and refuses an order that would hang. local.go lowers a plan's
// program for one device (BuildLocal) and derives every device's training step: each its own for running
// it (TrainSteps), or, for pricing it, one step derived per set of devices holding the same pieces, shared
// as it is or, in a mesh program, copied to name each device's own groups (CostSteps: 3 steps for
// bert-base's dp-cp on 64 devices, 2 for megatron's), which schedule.go turns into the Program.
//
// The lowering pass itself may import ir, the plan and cost; nothing in lower may import sim, a runtime
// backend, solve or cmd.
package lower
