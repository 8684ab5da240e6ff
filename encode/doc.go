// Package encode owns hap's SPMD semantics: how a distributed tensor relates
// to its single-device original (a Layout: Identity, Gather(dim) or Reduce),
// the sharding rules of every ir operator (Hoare triples: the layouts an
// op's inputs must have and the layouts its outputs then have), the
// communication instructions that change a tensor's layout, and the
// distributed program — an instruction sequence plus integer shard lengths
// per segment and device — with a checker that proves every precondition is
// established. It also encodes the planning problem (encoding.go): op and
// tensor classes, their prices under the step-time model (timeline.go, the
// two-stream timeline the simulator runs) and the MILP over rules, layouts,
// methods, all-to-alls and integer lengths (milp.go), and the same MILP
// with transport rows (transport.go), whose LP relaxation is far tighter.
// A collective whose one method never costs more than the other, whatever
// the lengths, has it fixed when the encoding is built (prune.go): no
// search chooses it, and the MILP's starts and pins set it.
// An op's compute is
// priced at its rule's share of the work, except the adds that sum the
// gradients of an input several ops read, priced over the conversion tree
// the program sums them on (gradsum.go: each reader's at the layout it
// reads, OpClass.Acc, and each conversion's at the layouts it joins), and
// the kernels that
// move bytes whatever the share (an operand a rule leaves whole, an
// embedding's gradient's table), priced at their roofline at the shapes a
// device runs them at (roofline.go). A layout change's pads (a slice's adjoint, a
// Gather made Reduce) are compute on the devices too (padTimes). A leaf read in several
// blocks (GPT-2's tied embedding) has its layout change timed at the first
// reader that needs it, where Decode makes it (spreadLeaf). Evaluate
// (evaluate.go) prices one choice with the same terms as the MILP; an
// Evaluator does it without allocating, for loops that price thousands. An
// Encoding is read-only once built, so pricing may run on several
// goroutines (one Evaluator each).
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
// like any other. Compose builds one from two 1-D programs.
//
// Backward needs no rules of its own: lowering builds each device's forward
// program, in which collectives are ops whose gradients are their adjoint
// collectives (all-gather ↔ reduce-scatter, all-reduce ↔ all-reduce,
// all-to-all(i→j) ↔ all-to-all(j→i), dynamic-slice ↔ pad) and replicated
// parameters pass through a replicate op whose gradient is an all-reduce;
// autodiff of that program is the distributed backward pass.
//
// encode imports ir, cost (prices) and milp (the model type) only.
package encode
