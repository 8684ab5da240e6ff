// Package spmd owns hap's SPMD semantics: how a distributed tensor relates
// to its single-device original (a Layout: Identity, Gather(dim) or Reduce),
// the sharding rules of every ir operator (Rules: Hoare triples naming the
// layouts an op's inputs must have and the layouts its outputs then have),
// the communication instructions that change a tensor's layout (Conversion),
// and the distributed program — an instruction sequence plus integer shard
// lengths per segment and device — with a checker (Check) that proves every
// precondition is established. Assemble builds a program from per-op rule
// choices (the hand-written strategies use it), Compose a 2-D one from two
// 1-D programs.
//
// It says what a program means, not what it costs: pricing and searching
// programs is package encode's, lowering them package lower's.
//
//	            Identity ──dynamic-slice──► Gather(d) ──all-to-all──► Gather(d')
//	               ▲                          │  ▲
//	        all-gather ◄──────────────────────┘  │ reduce-scatter
//	               │                              │
//	all-reduce ◄── Reduce ────────────────────────┘
//
// A Gather layout names a segment: a count of units (a batch of 32 samples,
// 12 heads, a vocabulary of 33,278 rows) split into integer lengths per
// device, the same for every tensor laid out on that segment. A tensor's
// dimension d holds Units(seg)·unit elements; device r holds Lengths[r]·unit
// of them, at offset (Σ_{q<r} Lengths[q])·unit. Lengths may be zero.
//
// A program may also be 2-D (mesh.go): with a Mesh its devices form
// replicas × ranks and every tensor has a Placement, a layout across
// replicas and one among a replica's ranks, so that megatron — tensor
// parallel inside a machine, data parallel across machines — is a program
// like any other.
//
// Backward needs no rules of its own: lowering builds each device's forward
// program, in which collectives are ops whose gradients are their adjoint
// collectives (all-gather ↔ reduce-scatter, all-reduce ↔ all-reduce,
// all-to-all(i→j) ↔ all-to-all(j→i), dynamic-slice ↔ pad) and replicated
// parameters pass through a replicate op whose gradient is an all-reduce;
// autodiff of that program is the distributed backward pass.
//
// spmd imports ir only: no cost model, no solver, nothing of the planner.
package spmd
