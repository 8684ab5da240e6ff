// Package executor runs distributed programs. It owns what every backend
// shares: lowering a plan's program for every device, deriving each
// device's training step (its ops reordered to issue the collectives in
// the plan's searched order, when it has one), setting the initial
// parameters and optimizer state, cutting each batch into each device's
// shards, stepping all devices together, and assembling and comparing
// results (Run, Train, Verify). It also owns the two backends behind its Backend interface:
//
//   - CPU (backend.go): N virtual devices as goroutines of one process,
//     computing with package cpu and exchanging data in memory with NCCL's
//     semantics; this is how hap proves a distributed program equal to
//     single-device training (Verify);
//   - CUDA (cuda.go): one GPU per rank driven from this process, tensors in
//     device memory placed by lifetime (arena.go), ops through package
//     cuda's kernel/cuBLAS plans, collectives through package nccl on a
//     communication stream that overlaps the compute stream (streams.go).
//
// executor imports ir, spmd (the program it runs), lower (to lower it into
// the devprog format), cost, cluster, cpu, cuda and nccl; never encode,
// milp, solve or plan; nothing imports it but the command line (plan and
// bench must not), and cuda and nccl never import it.
package executor
