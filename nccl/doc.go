// Package nccl is hap's binding to NVIDIA's collective library (libnccl.so.2),
// loaded at run time with purego like package cuda (which it builds on): no
// toolkit or cgo to build, ErrNoNCCL where the library is missing.
//
// It owns:
//   - the bindings: unique ids, communicators (created non-blocking so
//     their set-up can time out), all-gather, reduce-scatter, all-reduce,
//     broadcast, reduce, send/recv and group calls (nccl.go);
//   - the piece arithmetic that turns hap's collectives on uneven pieces
//     into NCCL calls, padded or grouped, and all-to-all into grouped
//     send/recv (pieces.go: pure Go, tested without a GPU);
//   - the watchdog: waiting for collective work polls the stream and
//     ncclCommGetAsyncError, and a failed or silent peer ends the wait with
//     an error after the communicator's timeout (ncclCommAbort), never a
//     hang (comm.go).
//
// nccl imports cuda and ir and nothing else of hap.
package nccl
