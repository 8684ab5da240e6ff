// Package cpu is hap's reference backend: real float32/float64 math for
// every ir operator, forward and backward, on the host CPU. In float64 it is
// the single-device reference every distributed run is verified against; in
// float32 it is fast enough to train the tiny zoo models (dense products go
// through gonum's BLAS, which uses every core).
//
// Kernels are generic over the float type: one function per operator family,
// dispatched from a single switch in kernels.go. A kernel writes into
// preallocated, zeroed outputs whose shapes come from the graph.
//
// cpu imports ir and gonum only; it knows nothing of plans or devices. The
// executor that runs per-device programs sits above it.
package cpu
