// Package ir owns hap's single-device tensor program: a graph of typed
// operators over tensors with static shapes, the builder API that constructs
// it, shape inference and validation, automatic differentiation (the backward
// graph and the optimizer update, so that one training step is one program),
// per-op work estimates (FLOPs and bytes, forward and backward), and the graph
// JSON codec.
//
// Everything else in hap reads these graphs; ir imports nothing of hap.
//
// # Shape of a program
//
//	inputs, labels, params ──► forward ops ──► loss (scalar)
//	                                             │ seed 1
//	                     grads ◄── backward ops ◄┘
//	params, grads, state ──► update ops ──► new params, new state
//
// Tensors and ops are identified by dense integer IDs (TensorID, OpID) that
// index Graph.Tensors and Graph.Ops; ops are stored in a topological order,
// so a pass over Graph.Ops sees every producer before its consumers.
// A training step's TrainInfo ties each parameter to its gradient and
// update, and lists the adds that sum a tensor's gradients from its several
// readers (Accumulations), which cost models price apart.
//
// # Operator table
//
// Every operator kind has one entry in the table of ops.go: its arity, its
// shape inference, its gradient (expressed as more ops of this table), and its
// forward and backward work. Adding an operator means adding one entry there,
// its kernel in package cpu, and a case in the finite-difference tests.
package ir
