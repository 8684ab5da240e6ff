// Package sim is hap's simulator: it executes a lowered per-device program (devprog.Program) against the
// cost model (cost.Model) as events on two streams per device — compute and communication — honouring
// stream order, explicit dependencies and the synchronisation of collectives, and reports the step time,
// each device's busy, idle and overlapped time and peak memory. It writes Chrome trace event JSON that
// opens in Perfetto (ui.perfetto.dev) or chrome://tracing, and the per-device summary table
// (WriteSummary), whose merging of consecutive devices with the same figures (MergeDeviceRows) hap
// explain's table uses too.
//
// The simulation is deterministic: the same program and model give byte-identical results and traces.
// Contention is modelled only where the program states it: sibling collectives of a mesh, run on
// other groups at the same time (devprog.Collective.Sharing), divide each node's network egress as
// the cost model prices them; other concurrent collectives do not slow each other, and kernels
// have no launch overhead.
//
// sim imports devprog (the program format) and cost only; only the layers that judge programs
// import it (plan, order, bench and the commands), never those that build them. It keeps no
// package-level mutable state.
package sim
