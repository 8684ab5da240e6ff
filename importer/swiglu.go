package importer

import (
	"hap/ir"
)

// SwiGLU as LLaMA's Hugging Face code writes it:
//
//	down_proj(act_fn(gate_proj(x)) * up_proj(x)),  act_fn = silu
//
// traces into a silu and a mul of two tensors of one shape. Imported as
// they come, the mul's backward would read silu(gate) as well as up, so
// the step would keep gate, silu(gate) and up until the backward: three
// FFN-wide activations a layer where the fused swiglu op keeps two, in
// the memory-bound LLaMA-7B plans one tensor of every layer's largest
// width. A silu whose one reader is a mul therefore stays lazy (lzSiLU),
// and the mul, finding it an operand of the other's shape, becomes one
// swiglu(gate, up). A silu read more than once (or by anything else) is
// the silu op at once, and the mul after it a mul, as before: fusing it
// would compute silu(gate) twice, once inside swiglu and once for the
// other reader.

// isMul reports whether an ATen overload is the tensor product the
// SwiGLU pattern ends in (in place or not).
func isMul(op string) bool { return op == "aten.mul.Tensor" || op == "aten.mul_.Tensor" }

// siluOp imports aten.silu: lazy when the trace's one reader of its
// output is a mul, which may complete SwiGLU; the silu op otherwise.
func siluOp(c *conv, n *Node) ([]*val, error) {
	x, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	if r := c.readers[n.Name]; len(r) == 1 && isMul(r[0]) {
		return one(&val{spec: x.spec, id: ir.NoTensor, kind: lzSiLU, src: x}), nil
	}
	id, err := c.mat(x)
	if err != nil {
		return nil, err
	}
	return one(c.emit(ir.OpSiLU, ir.Attrs{}, id)), nil
}

// swigluOf recognises silu(gate)·up, either operand order, of operands of
// one shape, and emits the swiglu op; ok is false when neither operand is
// a pending silu.
func (c *conv) swigluOf(a, b *val) (*val, bool, error) {
	if b.kind == lzSiLU && b.id == ir.NoTensor && !(a.kind == lzSiLU && a.id == ir.NoTensor) {
		a, b = b, a
	}
	if a.kind != lzSiLU || a.id != ir.NoTensor {
		return nil, false, nil
	}
	gate, err := c.mat(a.src)
	if err != nil {
		return nil, true, err
	}
	up, err := c.mat(b)
	if err != nil {
		return nil, true, err
	}
	return plain(c.b.SwiGLU(gate, up)), true, nil
}

// matSiLU materialises a pending silu that its mul did not take into a
// swiglu (a mul by a number, a dropout mask or a broadcast operand). It is
// emitted as the mul is translated, so the op is named in the mul's
// module rather than the silu's.
func (c *conv) matSiLU(v *val) (ir.TensorID, error) {
	x, err := c.mat(v.src)
	if err != nil {
		return ir.NoTensor, err
	}
	return c.b.SiLU(x), nil
}
