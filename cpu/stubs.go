package cpu

// Temporary: placeholders for the kernels being written in conv.go,
// attention.go and moe.go. This file is deleted when they land.

import (
	"errors"

	"hap/ir"
)

var errPending = errors.New("kernel not implemented yet")

func conv2d[F Float](a *ir.Attrs, x, w, y *Tensor[F]) error                        { return errPending }
func conv2dGradInput[F Float](a *ir.Attrs, dy, w, dx *Tensor[F]) error             { return errPending }
func conv2dGradWeight[F Float](a *ir.Attrs, x, dy, dw *Tensor[F]) error            { return errPending }
func maxPool2d[F Float](a *ir.Attrs, x, y *Tensor[F]) error                        { return errPending }
func maxPool2dGrad[F Float](a *ir.Attrs, x, dy, dx *Tensor[F]) error               { return errPending }
func adaptiveAvgPool2d[F Float](a *ir.Attrs, x, y *Tensor[F]) error                { return errPending }
func adaptiveAvgPool2dGrad[F Float](a *ir.Attrs, dy, dx *Tensor[F]) error          { return errPending }
func attention[F Float](a *ir.Attrs, q, k, v, y *Tensor[F]) error                  { return errPending }
func attentionGrad[F Float](a *ir.Attrs, q, k, v, dy, dq, dk, dv *Tensor[F]) error { return errPending }
func top2Gate[F Float](a *ir.Attrs, logits, combine, dispatch *Tensor[F]) error    { return errPending }
func top2GateGrad[F Float](a *ir.Attrs, logits, dcombine, dlogits *Tensor[F]) error {
	return errPending
}
func einsum[F Float](a *ir.Attrs, x, y, out *Tensor[F]) error { return errPending }
