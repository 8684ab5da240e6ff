package ir

import "fmt"

// Average pooling over square windows, PyTorch's avg_pool2d with
// count_include_pad (its default): every window divides by Kernel²,
// padding counting as zeros. No ceil mode.
const (
	OpAvgPool2D     OpKind = "avg_pool2d"      // x[N,C,H,W]; Kernel, Stride, Pad
	OpAvgPool2DGrad OpKind = "avg_pool2d_grad" // (dy); Shape = x shape, Kernel, Stride, Pad
)

func poolKinds() []OpKind { return []OpKind{OpAvgPool2D, OpAvgPool2DGrad} }

// lookupPool is the operator table's entries for this file's kinds; both
// directions read each input once and write each output once (workPool:
// one add per input element window-read, the division folded in).
func lookupPool(k OpKind) (opDef, bool) {
	switch k {
	case OpAvgPool2D:
		return opDef{1, inferAvgPool, gradAvgPool, workAvgPool}, true
	case OpAvgPool2DGrad:
		return opDef{1, inferAvgPoolGrad, nil, workAvgPoolGrad}, true
	}
	return opDef{}, false
}

func avgPoolOut(a *Attrs, x Shape, name string) (Shape, error) {
	if len(x) != 4 {
		return nil, fmt.Errorf("avg_pool2d wants x[N,C,H,W], got %q %v", name, x)
	}
	if a.Kernel < 1 || a.Stride < 1 || a.Pad < 0 || 2*a.Pad > a.Kernel {
		return nil, fmt.Errorf("avg_pool2d kernel %d, stride %d, pad %d: want kernel, stride ≥ 1 and 0 ≤ pad ≤ kernel/2", a.Kernel, a.Stride, a.Pad)
	}
	if x[2]+2*a.Pad < a.Kernel || x[3]+2*a.Pad < a.Kernel {
		return nil, fmt.Errorf("avg_pool2d kernel %d larger than %q %v padded by %d", a.Kernel, name, x, a.Pad)
	}
	return Shape{x[0], x[1], convOut(x[2], a.Kernel, a.Stride, a.Pad), convOut(x[3], a.Kernel, a.Stride, a.Pad)}, nil
}

func inferAvgPool(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	if err := needFloat(in[0]); err != nil {
		return nil, err
	}
	s, err := avgPoolOut(a, in[0].Shape, in[0].Name)
	if err != nil {
		return nil, err
	}
	return one(s, in[0].DType), nil
}

func inferAvgPoolGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	dy := in[0]
	if err := needFloat(dy); err != nil {
		return nil, err
	}
	s, err := avgPoolOut(a, Shape(a.Shape), "x")
	if err != nil {
		return nil, err
	}
	if !s.Equal(dy.Shape) {
		return nil, fmt.Errorf("avg_pool2d_grad: dy %q %v does not match the pooled shape %v of x %v", dy.Name, dy.Shape, s, a.Shape)
	}
	return one(Shape(a.Shape), dy.DType), nil
}

func gradAvgPool(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	a := op.Attrs
	return []TensorID{c.emit1(OpAvgPool2DGrad, Attrs{Kernel: a.Kernel, Stride: a.Stride, Pad: a.Pad, Shape: c.t(op.Inputs[0]).Shape.Clone()}, dy[0])}
}

// workAvgPool: Kernel² adds per output, x read and y written once.
func workAvgPool(a *Attrs, in, out []*Tensor) (Work, Work) {
	f := numel(out[0]) * float64(a.Kernel*a.Kernel)
	b := bytesOf(in...) + bytesOf(out...)
	return Work{ClassReduction, f, b}, Work{ClassReduction, f, b}
}

func workAvgPoolGrad(a *Attrs, in, out []*Tensor) (Work, Work) {
	w, _ := workAvgPool(a, out, in)
	return w, w
}

// MaxPool2DPadded is MaxPool2D with pad elements of −∞ on every side
// (PyTorch's padding; ResNet's stem pool is 3×3, stride 2, pad 1).
func (b *Builder) MaxPool2DPadded(x TensorID, kernel, stride, pad int) TensorID {
	return b.emit1(OpMaxPool2D, Attrs{Kernel: kernel, Stride: stride, Pad: pad}, x)
}

// AvgPool2D averages kernel×kernel windows every stride pixels, the input
// padded by pad zeros that count in the average (PyTorch's default).
func (b *Builder) AvgPool2D(x TensorID, kernel, stride, pad int) TensorID {
	return b.emit1(OpAvgPool2D, Attrs{Kernel: kernel, Stride: stride, Pad: pad}, x)
}
