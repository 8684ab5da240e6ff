package importer

import (
	"errors"
	"fmt"
	"math"

	"hap/ir"
)

// handler translates one node into one value per output.
type handler func(c *conv, n *Node) ([]*val, error)

// Entry is one ATen overload the importer accepts.
type Entry struct {
	// Op is the overload as torch prints it.
	Op string
	// Becomes says what it turns into, as docs/import.md's table says.
	Becomes string
	fn      handler
}

// Table is every ATen overload hap imports, sorted by Op. An in-place
// overload ("aten.relu_.default") not listed itself is imported as its
// functional form. docs/import.md holds the same table; a test keeps them
// equal.
func Table() []Entry {
	return []Entry{
		{"aten._adaptive_avg_pool2d.default", "`adaptive_avg_pool2d`", adaptivePool},
		{"aten._log_softmax.default", "`log_softmax` (over the last dim); with `nll_loss_forward` after it, `cross_entropy`", logSoftmax},
		{"aten._native_batch_norm_legit.default", "as `native_batch_norm` (torch 2.x's name for it)", batchNorm},
		{"aten._reshape_alias.default", "`reshape` (nothing when the shape stays)", reshape},
		{"aten._softmax.default", "`softmax` (over the last dim); between the two `bmm`s of attention, part of `attention`", softmax},
		{"aten._to_copy.default", "nothing when the dtype stays (a copy); refused otherwise", toCopy},
		{"aten._unsafe_view.default", "`reshape` (nothing when the shape stays)", reshape},
		{"aten.add.Scalar", "`add` of a `fill_like`", addScalar},
		{"aten.add.Tensor", "`add` (equal shapes), `bias` (one operand broadcast), `add` of a `fill_like` (a number), the broadcasting `add` (both broadcast)", add},
		{"aten.addmm.default", "`matmul` (`trans_b` when the weight is `t`'s) and `bias`: a linear layer", addmm},
		{"aten.alias.default", "nothing", identity},
		{"aten.amax.default", "`amax` (keep-dims as torch says)", amaxOp},
		{"aten.as_strided.default", "nothing when it restrides size-1 dims only (a memory-format change); refused otherwise", asStrided},
		{"aten.avg_pool2d.default", "`avg_pool2d` (square; padding counted, as `count_include_pad`; no ceil mode)", avgPool},
		{"aten.bernoulli_.float", "part of dropout (with `empty_like`, `div_` by the keep probability and `mul`)", bernoulli},
		{"aten.bmm.default", "`matmul`; q·kᵀ, scaled, softmaxed, times v: `attention` with the scale folded in", bmm},
		{"aten.cat.default", "`concat`; an expand it reads, a `fill_like` of zeros plus the expand's source (ViT's class token)", cat},
		{"aten.clone.default", "nothing", identity},
		{"aten.convolution.default", "`conv2d` (with `groups`: grouped and depthwise) and `bias` over the channels (2-D, square stride and padding, no dilation)", convolution},
		{"aten.cudnn_batch_norm.default", "as `native_batch_norm` (on a GPU)", batchNorm},
		{"aten.detach.default", "nothing", identity},
		{"aten.div.Scalar", "a scale (folded into attention or a dropout mask, else `mul` by a `fill_like`)", div},
		{"aten.div.Tensor", "as `div.Scalar` when the divisor is a number; else `div` (operands broadcast)", div},
		{"aten.dropout.default", "`dropout` (nothing when not training)", dropoutOp},
		{"aten.embedding.default", "`embedding`", embedding},
		{"aten.empty_like.default", "part of dropout (the mask `bernoulli_` fills)", emptyLike},
		{"aten.exp.default", "`exp`", unary(ir.OpExp)},
		{"aten.expand.default", "`reshape` when it only adds size-1 dims; a broadcast an `add` may take as `bias`", expand},
		{"aten.flatten.using_ints", "`reshape`", reshape},
		{"aten.gather.default", "`gather` (the index an int64 buffer or input of x's rank, x's size on every dim but `dim`; not `sparse_grad`)", gatherOp},
		{"aten.gelu.default", "`gelu` (exact only)", gelu},
		{"aten.hardsigmoid.default", "`hardsigmoid`", unary(ir.OpHardSigmoid)},
		{"aten.hardswish.default", "`hardswish`", unary(ir.OpHardSwish)},
		{"aten.index.Tensor", "as `index_select`, for one 1-D index tensor on one dim (`x[:, idx]`)", indexTensor},
		{"aten.index_select.default", "positions the trace recorded (a literal list): `slice`s of their runs, `concat`enated; a buffer's or input's: `embedding` into x with the dim moved first (`permute`, `reshape`)", indexSelect},
		{"aten.lift_fresh_copy.default", "nothing", identity},
		{"aten.log.default", "`log`", unary(ir.OpLog)},
		{"aten.masked_fill.Scalar", "`masked_fill` (a constant mask: a bool buffer, or one folded from buffers, becomes a state tensor of 0s and 1s; ±∞ becomes ±3.4e38); −∞ over the scores' last two dims, an additive mask `attention` takes", maskedFill},
		{"aten.masked_fill.Tensor", "as `masked_fill.Scalar` (a one-element constant value)", maskedFill},
		{"aten.max_pool2d.default", "`max_pool2d` (square, padding up to half the kernel, no dilation)", maxPool},
		{"aten.max_pool2d_with_indices.default", "`max_pool2d` (the indices are not imported)", maxPool},
		{"aten.mean.default", "`reduce_sum` over every dim, scaled", mean},
		{"aten.mean.dim", "`adaptive_avg_pool2d` to 1×1 over H, W of an NCHW tensor; else `mean` (keep-dims as torch says); in RMSNorm's x·rsqrt(mean(x²) + ε)·w, part of `rms_norm`", mean},
		{"aten.mm.default", "`matmul` (`trans_a`/`trans_b` for `t` operands)", mm},
		{"aten.mul.Scalar", "a scale, as `div.Scalar`", mul},
		{"aten.mul.Tensor", "`mul` (operands broadcast; an expand feeding it is dropped); by a dropout mask, `dropout`; by a number, a scale; of a `silu` it alone reads and a tensor of that shape, `swiglu`", mul},
		{"aten.native_batch_norm.default", "training mode: `reduce_sum`s of x and x·x over all but the channels, `batch_norm`, and `batch_norm_running` updating the running mean and variance (state); the saved statistics are not imported", batchNorm},
		{"aten.native_dropout.default", "`dropout` (the mask is not imported)", nativeDropout},
		{"aten.native_layer_norm.default", "`layer_norm` over the last dim; without weight and bias, `layer_norm_bare` (mean and rstd are not imported)", layerNorm},
		{"aten.neg.default", "a scale by −1; in rotate_half (cat(−x2, x1)) part of `rotary`", neg},
		{"aten.nll_loss_forward.default", "`nll_loss`; after `_log_softmax`, `cross_entropy` (reduction sum, no class weights)", nllLoss},
		{"aten.permute.default", "`permute` (composed with neighbouring permutes; folded into matmuls)", permuteOp},
		{"aten.pow.Tensor_Scalar", "`pow_scalar`; squared inside RMSNorm, part of `rms_norm`", powScalar},
		{"aten.reciprocal.default", "`reciprocal`", unary(ir.OpReciprocal)},
		{"aten.relu.default", "`relu`", unary(ir.OpReLU)},
		{"aten.repeat_interleave.self_int", "`concat` of copies and `reshape`s (a number of repeats; torch 2.x traces it, 1.13 cannot on fake tensors); repeating key/value heads, grouped-query `attention`", repeatInterleave},
		{"aten.reshape.default", "`reshape`", reshape},
		{"aten.rsqrt.default", "`rsqrt`; inside RMSNorm, part of `rms_norm`", unary(ir.OpRsqrt)},
		{"aten.scaled_dot_product_attention.default", "`attention` (no mask; dropout dropped)", sdpa},
		{"aten.select.int", "`slice` of one index and `reshape`", selectOp},
		{"aten.sigmoid.default", "`sigmoid`", unary(ir.OpSigmoid)},
		{"aten.silu.default", "`silu`; read only by a `mul` by a tensor of its shape, SwiGLU's silu(gate)·up, `swiglu`", siluOp},
		{"aten.slice.Tensor", "`slice` (step 1; nothing when it keeps the whole dim)", sliceOp},
		{"aten.split.Tensor", "`split`", split},
		{"aten.split_with_sizes.default", "`split`", split},
		{"aten.sqrt.default", "`sqrt`", unary(ir.OpSqrt)},
		{"aten.squeeze.default", "`reshape`", reshape},
		{"aten.squeeze.dim", "`reshape`", reshape},
		{"aten.sub.Tensor", "`add` of the operand times −1", sub},
		{"aten.sum.default", "`reduce_sum` over every dim", sum},
		{"aten.sum.dim_IntList", "`reduce_sum` (and `reshape` for keepdim)", sum},
		{"aten.t.default", "`permute` (folded into matmuls)", permuteOp},
		{"aten.tanh.default", "`tanh`", unary(ir.OpTanh)},
		{"aten.transpose.int", "`permute` (composed with neighbouring permutes; folded into matmuls)", permuteOp},
		{"aten.unbind.int", "`split` and `reshape`s", unbind},
		{"aten.unflatten.int", "`reshape`", reshape},
		{"aten.unsqueeze.default", "`reshape`", reshape},
		{"aten.var.correction", "`var` (correction as torch says, default 1)", varOp},
		{"aten.var.dim", "`var` (unbiased: correction 1, else 0)", varOp},
		{"aten.view.default", "`reshape` (nothing when the shape stays)", reshape},
		{"aten.where.self", "`masked_fill` of the tensor side, where the constant condition holds (or, the number second, where it does not: 1 − mask)", where},
		{"hap.einsum.default", "`einsum` (two operands: `torch.einsum` while `hap_torch` traces)", einsumOp},
		{"hap.top2_gate.default", "`top2_gate` (`hap_torch.top2_gate`, GShard's top-2 gate)", top2GateOp},
	}
}

func one(v *val) []*val { return []*val{v} }

func outShape(n *Node, i int) ([]int, error) {
	if i >= len(n.Outputs) || n.Outputs[i] == nil {
		return nil, fmt.Errorf("output %d has no recorded shape", i)
	}
	return n.Outputs[i].Shape, nil
}

func (c *conv) in(n *Node, i int, name string) (*val, error) {
	return c.tensorVal(n, arg(n, i, name), "argument "+argName(i, name))
}

func (c *conv) inMat(n *Node, i int, name string) (ir.TensorID, *val, error) {
	v, err := c.in(n, i, name)
	if err != nil {
		return ir.NoTensor, nil, err
	}
	id, err := c.mat(v)
	return id, v, err
}

func identity(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	return one(v), nil
}

func toCopy(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	if out, err := outShape(n, 0); err == nil && n.Outputs[0].DType != v.spec.DType {
		return nil, fmt.Errorf("casts %s to %s %v; hap keeps one float type per graph", v.spec.DType, n.Outputs[0].DType, out)
	}
	return one(v), nil
}

func unary(k ir.OpKind) handler {
	return func(c *conv, n *Node) ([]*val, error) {
		x, _, err := c.inMat(n, 0, "")
		if err != nil {
			return nil, err
		}
		return one(c.emit(k, ir.Attrs{}, x)), nil
	}
}

func gelu(c *conv, n *Node) ([]*val, error) {
	if a, ok := arg(n, 1, "approximate").(string); ok && a != "none" {
		return nil, fmt.Errorf("gelu approximate=%q; hap's gelu is the exact one", a)
	}
	return unary(ir.OpGELU)(c, n)
}

// reshapeTo is v reshaped to shape: v itself when the shape stays (views
// of lazy values stay lazy), else a reshape op.
func (c *conv) reshapeTo(v *val, shape []int) (*val, error) {
	if ir.Shape(shape).Equal(v.spec.Shape) {
		return v, nil
	}
	if r, ok, err := c.repeatHeads(v, shape); ok {
		return r, err
	}
	x, err := c.mat(v)
	if err != nil {
		return nil, err
	}
	return c.emit(ir.OpReshape, ir.Attrs{Shape: ir.Shape(shape).Clone()}, x), nil
}

func reshape(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	out, err := outShape(n, 0)
	if err != nil {
		return nil, err
	}
	r, err := c.reshapeTo(v, out)
	return one(r), err
}

func expand(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	out, err := outShape(n, 0)
	if err != nil {
		return nil, err
	}
	if ir.Shape(out).Numel() == ir.Shape(v.spec.Shape).Numel() {
		r, err := c.reshapeTo(v, out)
		return one(r), err
	}
	return one(&val{id: ir.NoTensor, kind: lzBroadcast, src: v}), nil
}

func permuteOp(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	r := len(v.spec.Shape)
	p := make([]int, r)
	for i := range p {
		p[i] = i
	}
	switch n.Op {
	case "aten.t.default":
		if r == 2 {
			p[0], p[1] = 1, 0
		}
	case "aten.transpose.int":
		d0, err := intArg(n, 1, "dim0", 0)
		if err != nil {
			return nil, err
		}
		d1, err := intArg(n, 2, "dim1", 0)
		if err != nil {
			return nil, err
		}
		if d0, err = normDim(d0, r); err != nil {
			return nil, err
		}
		if d1, err = normDim(d1, r); err != nil {
			return nil, err
		}
		p[d0], p[d1] = d1, d0
	default:
		dims, err := intsArg(n, 1, "dims")
		if err != nil {
			return nil, err
		}
		if len(dims) != r {
			return nil, fmt.Errorf("permute dims %v for rank %d", dims, r)
		}
		for i, d := range dims {
			if p[i], err = normDim(d, r); err != nil {
				return nil, err
			}
		}
	}
	return one(c.permute(v, p)), nil
}

func selectOp(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	r := len(v.spec.Shape)
	d, err := intArg(n, 1, "dim", 0)
	if err != nil {
		return nil, err
	}
	if d, err = normDim(d, r); err != nil {
		return nil, err
	}
	i, err := intArg(n, 2, "index", 0)
	if err != nil {
		return nil, err
	}
	if i < 0 {
		i += v.spec.Shape[d]
	}
	out, err := outShape(n, 0)
	if err != nil {
		return nil, err
	}
	s := c.b.Slice(x, d, i, i+1)
	return one(c.emit(ir.OpReshape, ir.Attrs{Shape: ir.Shape(out).Clone()}, s)), nil
}

func sliceOp(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	r := len(v.spec.Shape)
	d, err := intArg(n, 1, "dim", 0)
	if err != nil {
		return nil, err
	}
	if d, err = normDim(d, r); err != nil {
		return nil, err
	}
	size := v.spec.Shape[d]
	start, err := intArg(n, 2, "start", 0)
	if err != nil {
		return nil, err
	}
	end, err := intArg(n, 3, "end", size)
	if err != nil {
		return nil, err
	}
	step, err := intArg(n, 4, "step", 1)
	if err != nil {
		return nil, err
	}
	if step != 1 {
		return nil, fmt.Errorf("slice step %d; hap slices with step 1", step)
	}
	clamp := func(i int) int {
		if i < 0 {
			i += size
		}
		return max(0, min(i, size))
	}
	start, end = clamp(start), clamp(end)
	end = max(end, start)
	if start == 0 && end == size {
		return one(v), nil
	}
	if h, ok := lazyHalf(v, d, start, end); ok {
		return one(h), nil
	}
	x, err := c.mat(v)
	if err != nil {
		return nil, err
	}
	return one(plain(c.b.Slice(x, d, start, end))), nil
}

func split(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	r := len(v.spec.Shape)
	d, err := intArg(n, 2, "dim", 0)
	if err != nil {
		return nil, err
	}
	if d, err = normDim(d, r); err != nil {
		return nil, err
	}
	var sizes []int
	if n.Op == "aten.split.Tensor" {
		s, err := intArg(n, 1, "split_size", 0)
		if err != nil {
			return nil, err
		}
		if s <= 0 {
			return nil, fmt.Errorf("split size %d", s)
		}
		for left := v.spec.Shape[d]; left > 0; left -= s {
			sizes = append(sizes, min(s, left))
		}
	} else if sizes, err = intsArg(n, 1, "split_sizes"); err != nil {
		return nil, err
	}
	if len(sizes) == 1 {
		return one(v), nil
	}
	x, err := c.mat(v)
	if err != nil {
		return nil, err
	}
	var outs []*val
	for _, id := range c.b.Split(x, d, sizes...) {
		outs = append(outs, plain(id))
	}
	return outs, nil
}

func unbind(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	r := len(v.spec.Shape)
	d, err := intArg(n, 1, "dim", 0)
	if err != nil {
		return nil, err
	}
	if d, err = normDim(d, r); err != nil {
		return nil, err
	}
	k := v.spec.Shape[d]
	shape := append(append([]int{}, v.spec.Shape[:d]...), v.spec.Shape[d+1:]...)
	pieces := []ir.TensorID{x}
	if k > 1 {
		sizes := make([]int, k)
		for i := range sizes {
			sizes[i] = 1
		}
		pieces = c.b.Split(x, d, sizes...)
	}
	var outs []*val
	for _, p := range pieces {
		outs = append(outs, c.emit(ir.OpReshape, ir.Attrs{Shape: shape}, p))
	}
	return outs, nil
}

func cat(c *conv, n *Node) ([]*val, error) {
	l, ok := arg(n, 0, "tensors").([]any)
	if !ok || len(l) == 0 {
		return nil, fmt.Errorf("argument 0 is %s; want a list of tensors", show(arg(n, 0, "tensors")))
	}
	var ids []ir.TensorID
	var first *val
	var parts []*val
	for i, a := range l {
		v, err := c.tensorVal(n, a, fmt.Sprintf("tensor %d", i))
		if err != nil {
			return nil, err
		}
		parts = append(parts, v)
	}
	if d, err := intArg(n, 1, "dim", 0); err == nil && len(parts) == 2 {
		if d, err = normDim(d, len(parts[1].spec.Shape)); err == nil {
			if r, ok := rotateHalf(parts, d); ok {
				return one(r), nil
			}
		}
	}
	d, err := intArg(n, 1, "dim", 0)
	if err != nil {
		return nil, err
	}
	for i, v := range parts {
		if len(v.spec.Shape) == 1 && v.spec.Shape[0] == 0 {
			continue // torch.cat skips empty 1-D tensors
		}
		if v.kind == lzBroadcast && v.id == ir.NoTensor {
			// ViT's class token expanded over the batch.
			if v, err = c.expandBeside(v, parts, d); err != nil {
				return nil, fmt.Errorf("tensor %d: %w", i, err)
			}
		}
		if first == nil {
			first = v
		}
		id, err := c.mat(v)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if len(ids) == 1 {
		return one(first), nil
	}
	if d, err = normDim(d, len(first.spec.Shape)); err != nil {
		return nil, err
	}
	return one(plain(c.b.Concat(d, ids...))), nil
}

// ---- matmuls and attention ----

// matOperand reads a matmul operand, folding a transpose of its last two
// dims into a trans flag.
func (c *conv) matOperand(v *val) (ir.TensorID, bool, error) {
	if v.kind == lzPerm && v.id == ir.NoTensor && swapsLastTwo(v.perm) {
		id, err := c.mat(v.src)
		return id, true, err
	}
	id, err := c.mat(v)
	return id, false, err
}

func mm(c *conv, n *Node) ([]*val, error) {
	a, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	b, err := c.in(n, 1, "mat2")
	if err != nil {
		return nil, err
	}
	y, err := c.matmul(a, b)
	return one(y), err
}

func (c *conv) matmul(a, b *val) (*val, error) {
	x, ta, err := c.matOperand(a)
	if err != nil {
		return nil, err
	}
	w, tb, err := c.matOperand(b)
	if err != nil {
		return nil, err
	}
	return plain(c.b.MatMulT(x, w, ta, tb)), nil
}

func addmm(c *conv, n *Node) ([]*val, error) {
	for i, name := range []string{"beta", "alpha"} {
		if a := arg(n, 3+i, name); a != nil {
			if f, ok := c.number(a); !ok || f != 1 {
				return nil, fmt.Errorf("addmm %s=%s; hap imports beta = alpha = 1", name, show(a))
			}
		}
	}
	bias, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	a, err := c.in(n, 1, "mat1")
	if err != nil {
		return nil, err
	}
	b, err := c.in(n, 2, "mat2")
	if err != nil {
		return nil, err
	}
	y, err := c.matmul(a, b)
	if err != nil {
		return nil, err
	}
	out, err := outShape(n, 0)
	if err != nil {
		return nil, err
	}
	y.spec = Spec{DType: bias.spec.DType, Shape: out}
	r, err := c.addBroadcast(y, bias, out)
	return one(r), err
}

func bmm(c *conv, n *Node) ([]*val, error) {
	a, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	b, err := c.in(n, 1, "mat2")
	if err != nil {
		return nil, err
	}
	// probs · v: attention.
	if a.kind == lzProbs && a.id == ir.NoTensor && a.src.scale > 0 {
		s := a.src
		q, err := c.mat(s.q)
		if err != nil {
			return nil, err
		}
		k, err := c.mat(s.k)
		if err != nil {
			return nil, err
		}
		v, err := c.mat(b)
		if err != nil {
			return nil, err
		}
		return one(c.emit(ir.OpAttention, ir.Attrs{Scale: s.scale}, q, k, v)), nil
	}
	// (s·q) · (t·k)ᵀ: attention scores, kept lazy for the softmax.
	qa, s1 := unscale(a)
	kb, s2 := unscale(b)
	if kb.kind == lzPerm && kb.id == ir.NoTensor {
		k := c.permute(kb, swapLast(len(kb.spec.Shape)))
		s3 := 1.0
		if k.kind == lzScaled {
			k, s3 = unscale(k)
		}
		return one(&val{id: ir.NoTensor, kind: lzScores, q: qa, k: k, scale: s1 * s2 * s3}), nil
	}
	y, err := c.matmul(a, b)
	return one(y), err
}

func softmax(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	if err := lastDim(n, v); err != nil {
		return nil, err
	}
	if half, _ := boolArg(n, 2, "half_to_float", false); half {
		return nil, errors.New("half_to_float softmax; hap imports float32/float64 graphs")
	}
	if v.kind == lzScores && v.id == ir.NoTensor {
		return one(&val{id: ir.NoTensor, kind: lzProbs, src: v}), nil
	}
	x, err := c.mat(v)
	if err != nil {
		return nil, err
	}
	return one(plain(c.b.Softmax(x))), nil
}

func logSoftmax(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	if err := lastDim(n, v); err != nil {
		return nil, err
	}
	return one(&val{id: ir.NoTensor, kind: lzLogSM, src: v}), nil
}

func lastDim(n *Node, v *val) error {
	d, err := intArg(n, 1, "dim", -1)
	if err != nil {
		return err
	}
	r := len(v.spec.Shape)
	if d, err = normDim(d, r); err != nil {
		return err
	}
	if d != r-1 {
		return fmt.Errorf("over dim %d of a rank-%d tensor; hap's is over the last dim", d, r)
	}
	return nil
}

func sdpa(c *conv, n *Node) ([]*val, error) {
	if a := arg(n, 3, "attn_mask"); a != nil {
		return nil, errors.New("attention with a mask; hap imports unmasked or causal attention")
	}
	var ids [3]ir.TensorID
	var q *val
	for i := range ids {
		x, v, err := c.inMat(n, i, "")
		if err != nil {
			return nil, err
		}
		ids[i] = x
		if i == 0 {
			q = v
		}
	}
	p, _ := c.number(arg(n, 4, "dropout_p"))
	if p > 0 {
		c.note("attention dropout %g dropped: hap's attention has none", p)
	}
	causal, err := boolArg(n, 5, "is_causal", false)
	if err != nil {
		return nil, err
	}
	scale, ok := c.number(arg(n, 6, "scale"))
	if !ok {
		scale = 1 / math.Sqrt(float64(q.spec.Shape[len(q.spec.Shape)-1]))
	}
	return one(c.emit(ir.OpAttention, ir.Attrs{Scale: scale, Causal: causal}, ids[0], ids[1], ids[2])), nil
}

// ---- elementwise ----

// addBroadcast is a + b where one of them has the output's shape and the
// other broadcasts to it: add, or bias over the dims b keeps.
func (c *conv) addBroadcast(a, b *val, out []int) (*val, error) {
	if b.kind == lzBroadcast {
		b = b.src
	}
	if a.kind == lzBroadcast {
		a = a.src
	}
	if !ir.Shape(a.spec.Shape).Equal(out) {
		a, b = b, a
	}
	if !ir.Shape(a.spec.Shape).Equal(out) {
		// Neither operand has the result's shape ([N, 1] + [1, M]): the
		// broadcasting add.
		vs, err := c.broadcastBinary(ir.OpAdd, a, b)
		if err != nil {
			return nil, err
		}
		return vs[0], nil
	}
	x, err := c.mat(a)
	if err != nil {
		return nil, err
	}
	y, err := c.mat(b)
	if err != nil {
		return nil, err
	}
	if ir.Shape(b.spec.Shape).Equal(out) {
		return plain(c.b.Add(x, y)), nil
	}
	off := len(out) - len(b.spec.Shape)
	if off < 0 {
		return nil, fmt.Errorf("adds %v to %v", b.spec.Shape, out)
	}
	var axes, kept []int
	for j, d := range b.spec.Shape {
		switch {
		case d == out[off+j]:
			axes = append(axes, off+j)
			kept = append(kept, d)
		case d == 1:
		default:
			return nil, fmt.Errorf("adds %v to %v: shapes do not broadcast", b.spec.Shape, out)
		}
	}
	if !ir.Shape(kept).Equal(b.spec.Shape) {
		y = c.b.Reshape(y, kept...)
	}
	if len(axes) == 0 {
		return nil, fmt.Errorf("adds a one-element tensor %v to %v; hap adds numbers, not one-element tensors", b.spec.Shape, out)
	}
	return plain(c.b.Bias(x, y, axes...)), nil
}

func (c *conv) addNumber(v *val, s float64) (*val, error) {
	x, err := c.mat(v)
	if err != nil {
		return nil, err
	}
	if s == 0 {
		return v, nil
	}
	return plain(c.b.Add(x, c.b.Emit(ir.OpFillLike, ir.Attrs{Scale: s}, x)[0])), nil
}

// alpha reads add/sub's alpha (1 when absent).
func (c *conv) alpha(n *Node) (float64, error) {
	a := arg(n, 2, "alpha")
	if a == nil {
		return 1, nil
	}
	f, ok := c.number(a)
	if !ok {
		return 0, fmt.Errorf("alpha is %s; want a number", show(a))
	}
	return f, nil
}

func add(c *conv, n *Node) ([]*val, error) { return addSub(c, n, 1) }
func sub(c *conv, n *Node) ([]*val, error) { return addSub(c, n, -1) }

func addSub(c *conv, n *Node, sign float64) ([]*val, error) {
	a, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	if isStepCounter(a) {
		return stepCounter(c, n), nil
	}
	al, err := c.alpha(n)
	if err != nil {
		return nil, err
	}
	if s, ok := c.number(arg(n, 1, "other")); ok {
		r, err := c.addNumber(a, sign*al*s)
		return one(r), err
	}
	b, err := c.in(n, 1, "other")
	if err != nil {
		return nil, err
	}
	if sign*al == 1 {
		if r, ok, err := c.rotaryOf(a, b); ok {
			return one(r), err
		}
	}
	if sign*al != 1 {
		b = c.scaled(b, sign*al)
	}
	out, err := outShape(n, 0)
	if err != nil {
		return nil, err
	}
	r, err := c.addBroadcast(a, b, out)
	return one(r), err
}

func addScalar(c *conv, n *Node) ([]*val, error) { return addSub(c, n, 1) }

func mul(c *conv, n *Node) ([]*val, error) {
	a, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	if s, ok := c.number(arg(n, 1, "other")); ok {
		return one(c.scaleMask(a, s)), nil
	}
	b, err := c.in(n, 1, "other")
	if err != nil {
		return nil, err
	}
	if a.kind == lzMask {
		a, b = b, a
	}
	if b.kind == lzMask {
		if !b.scaled {
			return nil, errors.New("multiplies by a bernoulli mask not divided by its keep probability (only dropout's is imported)")
		}
		rate := math.Round((1-b.keep)*1e12) / 1e12
		if a.kind == lzProbs && a.id == ir.NoTensor {
			c.note("attention dropout %g dropped: hap's attention has none", rate)
			return one(a), nil
		}
		x, err := c.mat(a)
		if err != nil {
			return nil, err
		}
		return one(plain(c.b.Dropout(x, rate))), nil
	}
	if !ir.Shape(a.spec.Shape).Equal(b.spec.Shape) {
		if t, ok := tableProduct(a, b); ok {
			return one(t), nil
		}
		return c.broadcastBinary(ir.OpMul, a, b)
	}
	if v, ok, err := c.swigluOf(a, b); err != nil {
		return nil, err
	} else if ok {
		return one(v), nil
	}
	x, err := c.mat(a)
	if err != nil {
		return nil, err
	}
	y, err := c.mat(b)
	if err != nil {
		return nil, err
	}
	return one(plain(c.b.Mul(x, y))), nil
}

// scaleMask is v·s; a dropout mask divided by its keep probability becomes
// the scaled mask.
func (c *conv) scaleMask(v *val, s float64) *val {
	if v.kind == lzMask && !v.scaled && math.Abs(s*v.keep-1) < 1e-9 {
		return &val{id: ir.NoTensor, kind: lzMask, keep: v.keep, scaled: true}
	}
	return c.scaled(v, s)
}

func div(c *conv, n *Node) ([]*val, error) {
	a, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	s, ok := c.number(arg(n, 1, "other"))
	if !ok {
		b, err := c.in(n, 1, "other")
		if err != nil {
			return nil, err
		}
		return c.broadcastBinary(ir.OpDiv, a, b)
	}
	if s == 0 {
		return nil, errors.New("divides by zero")
	}
	return one(c.scaleMask(a, 1/s)), nil
}

func emptyLike(c *conv, n *Node) ([]*val, error) {
	return one(&val{id: ir.NoTensor, kind: lzEmpty}), nil
}

func bernoulli(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	if v.kind != lzEmpty {
		return nil, errors.New("bernoulli_ of a tensor other than an empty_like (only dropout's mask is imported)")
	}
	p, ok := c.number(arg(n, 1, "p"))
	if !ok || p <= 0 || p > 1 {
		return nil, fmt.Errorf("bernoulli_ p=%s; want a number in (0, 1]", show(arg(n, 1, "p")))
	}
	return one(&val{id: ir.NoTensor, kind: lzMask, keep: p}), nil
}

func dropoutOp(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	p, _ := c.number(arg(n, 1, "p"))
	train, err := boolArg(n, 2, "train", true)
	if err != nil {
		return nil, err
	}
	if !train || p == 0 {
		return one(v), nil
	}
	x, err := c.mat(v)
	if err != nil {
		return nil, err
	}
	return one(plain(c.b.Dropout(x, p))), nil
}

func nativeDropout(c *conv, n *Node) ([]*val, error) {
	outs, err := dropoutOp(c, n)
	if err != nil {
		return nil, err
	}
	return append(outs, &val{id: ir.NoTensor, kind: lzNone2, what: "native_dropout's mask"}), nil
}

// ---- normalisation, convolution, pooling, embedding, reductions, loss ----

func layerNorm(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	ns, err := intsArg(n, 1, "normalized_shape")
	if err != nil {
		return nil, err
	}
	r := len(v.spec.Shape)
	if len(ns) != 1 || r == 0 || ns[0] != v.spec.Shape[r-1] {
		return nil, fmt.Errorf("layer norm over %v of %v; hap's is over the last dim", ns, v.spec.Shape)
	}
	stat := func(s string) *val { return &val{id: ir.NoTensor, kind: lzNone2, what: "layer norm's " + s} }
	if arg(n, 2, "weight") == nil && arg(n, 3, "bias") == nil {
		eps, ok := c.number(arg(n, 4, "eps"))
		if !ok {
			return nil, fmt.Errorf("eps is %s; want a number", show(arg(n, 4, "eps")))
		}
		return []*val{plain(c.b.LayerNormBare(x, eps)), stat("mean"), stat("rstd")}, nil
	}
	if arg(n, 2, "weight") == nil || arg(n, 3, "bias") == nil {
		return nil, errors.New("layer norm with only one of weight and bias; hap's has both or neither")
	}
	g, _, err := c.inMat(n, 2, "weight")
	if err != nil {
		return nil, err
	}
	b, _, err := c.inMat(n, 3, "bias")
	if err != nil {
		return nil, err
	}
	eps, ok := c.number(arg(n, 4, "eps"))
	if !ok {
		return nil, fmt.Errorf("eps is %s; want a number", show(arg(n, 4, "eps")))
	}
	y := c.emit(ir.OpLayerNorm, ir.Attrs{Eps: eps}, x, g, b)
	return []*val{y, stat("mean"), stat("rstd")}, nil
}

// square reads a 2-D op's pair argument ([a, a] or [a]) as one number.
func square(n *Node, i int, name string, def int) (int, error) {
	l, err := intsArg(n, i, name)
	if err != nil {
		return 0, err
	}
	switch {
	case len(l) == 0:
		return def, nil
	case len(l) == 1 || len(l) == 2 && l[0] == l[1]:
		return l[0], nil
	}
	return 0, fmt.Errorf("%s %v; hap imports equal values for height and width", name, l)
}

func convolution(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	if len(v.spec.Shape) != 4 {
		return nil, fmt.Errorf("convolution of a rank-%d input; hap imports 2-D convolutions", len(v.spec.Shape))
	}
	w, _, err := c.inMat(n, 1, "weight")
	if err != nil {
		return nil, err
	}
	stride, err := square(n, 3, "stride", 1)
	if err != nil {
		return nil, err
	}
	pad, err := square(n, 4, "padding", 0)
	if err != nil {
		return nil, err
	}
	dil, err := square(n, 5, "dilation", 1)
	if err != nil {
		return nil, err
	}
	tr, err := boolArg(n, 6, "transposed", false)
	if err != nil {
		return nil, err
	}
	groups, err := intArg(n, 8, "groups", 1)
	if err != nil {
		return nil, err
	}
	if dil != 1 || tr || groups < 1 {
		return nil, fmt.Errorf("convolution with dilation %d, transposed %v, groups %d; hap imports dilation 1, not transposed", dil, tr, groups)
	}
	var y ir.TensorID
	if groups > 1 {
		y = c.b.GroupedConv2D(x, w, stride, pad, groups)
	} else {
		y = c.b.Conv2D(x, w, stride, pad) // no groups attribute: graphs stay as they were
	}
	if arg(n, 2, "bias") != nil {
		b, _, err := c.inMat(n, 2, "bias")
		if err != nil {
			return nil, err
		}
		y = c.b.Bias(y, b, 1)
	}
	return one(plain(y)), nil
}

func maxPool(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	if len(v.spec.Shape) != 4 {
		return nil, fmt.Errorf("max pool of a rank-%d input; want NCHW", len(v.spec.Shape))
	}
	k, err := square(n, 1, "kernel_size", 0)
	if err != nil {
		return nil, err
	}
	s, err := square(n, 2, "stride", k)
	if err != nil {
		return nil, err
	}
	pad, err := square(n, 3, "padding", 0)
	if err != nil {
		return nil, err
	}
	dil, err := square(n, 4, "dilation", 1)
	if err != nil {
		return nil, err
	}
	ceil, err := boolArg(n, 5, "ceil_mode", false)
	if err != nil {
		return nil, err
	}
	if dil != 1 || ceil {
		return nil, fmt.Errorf("max pool with dilation %d, ceil_mode %v; hap imports neither", dil, ceil)
	}
	y := c.emit(ir.OpMaxPool2D, ir.Attrs{Kernel: k, Stride: s, Pad: pad}, x)
	if n.Op == "aten.max_pool2d_with_indices.default" {
		return []*val{y, {id: ir.NoTensor, kind: lzNone2, what: "max pool's indices"}}, nil
	}
	return one(y), nil
}

func adaptivePool(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	size, err := intsArg(n, 1, "output_size")
	if err != nil {
		return nil, err
	}
	if len(size) == 1 {
		size = []int{size[0], size[0]}
	}
	if len(size) != 2 || len(v.spec.Shape) != 4 {
		return nil, fmt.Errorf("adaptive pool to %v of %v; want NCHW to [OH, OW]", size, v.spec.Shape)
	}
	return one(c.emit(ir.OpAdaptiveAvgPool2D, ir.Attrs{Shape: size}, x)), nil
}

func embedding(c *conv, n *Node) ([]*val, error) {
	w, _, err := c.inMat(n, 0, "weight")
	if err != nil {
		return nil, err
	}
	ids, _, err := c.inMat(n, 1, "indices")
	if err != nil {
		return nil, err
	}
	if p, _ := intArg(n, 2, "padding_idx", -1); p != -1 {
		c.note("embedding padding_idx %d ignored: its row is trained like the others", p)
	}
	if s, _ := boolArg(n, 3, "scale_grad_by_freq", false); s {
		return nil, errors.New("embedding with scale_grad_by_freq; hap's gradient is unscaled")
	}
	return one(plain(c.b.Embedding(ids, w))), nil
}

// reduceDims reads sum/mean's dims: every dim when absent or empty.
func reduceDims(n *Node, r int) ([]int, bool, error) {
	var dims []int
	if n.Op == "aten.sum.dim_IntList" || n.Op == "aten.mean.dim" {
		l, err := intsArg(n, 1, "dim")
		if err != nil {
			return nil, false, err
		}
		dims = l
	}
	keep, err := boolArg(n, 2, "keepdim", false)
	if err != nil {
		return nil, false, err
	}
	if a := arg(n, 3, "dtype"); a != nil && (n.Op == "aten.sum.dim_IntList" || n.Op == "aten.mean.dim") {
		return nil, false, fmt.Errorf("reduction with dtype %s; hap keeps one float type", show(a))
	}
	seen := make([]bool, r)
	if len(dims) == 0 {
		for i := range seen {
			seen[i] = true
		}
	}
	for _, d := range dims {
		d, err := normDim(d, r)
		if err != nil {
			return nil, false, err
		}
		seen[d] = true
	}
	var axes []int
	for i, s := range seen {
		if s {
			axes = append(axes, i)
		}
	}
	return axes, keep, nil
}

func (c *conv) reduce(n *Node) (*val, *val, int, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, nil, 0, err
	}
	axes, _, err := reduceDims(n, len(v.spec.Shape))
	if err != nil {
		return nil, nil, 0, err
	}
	out, err := outShape(n, 0)
	if err != nil {
		return nil, nil, 0, err
	}
	count := 1
	for _, a := range axes {
		count *= v.spec.Shape[a]
	}
	y := plain(c.b.ReduceSum(x, axes...))
	y.spec.Shape = c.b.Shape(y.id)
	r, err := c.reshapeTo(y, out)
	return r, v, count, err
}

func sum(c *conv, n *Node) ([]*val, error) {
	r, _, _, err := c.reduce(n)
	return one(r), err
}

func mean(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	if len(v.spec.Shape) == 4 {
		axes, keep, err := reduceDims(n, 4)
		if err != nil {
			return nil, err
		}
		if len(axes) == 2 && axes[0] == 2 && axes[1] == 3 {
			x, err := c.mat(v)
			if err != nil {
				return nil, err
			}
			y := c.emit(ir.OpAdaptiveAvgPool2D, ir.Attrs{Shape: []int{1, 1}}, x)
			if keep {
				return one(y), nil
			}
			y.spec.Shape = c.b.Shape(y.id)
			out, err := outShape(n, 0)
			if err != nil {
				return nil, err
			}
			r, err := c.reshapeTo(y, out)
			return one(r), err
		}
	}
	if n.Op == "aten.mean.dim" {
		return meanDims(c, n)
	}
	r, _, count, err := c.reduce(n)
	if err != nil {
		return nil, err
	}
	return one(c.scaled(r, 1/float64(count))), nil
}

func nllLoss(c *conv, n *Node) ([]*val, error) {
	lp, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	if arg(n, 2, "weight") != nil {
		return nil, errors.New("nll loss with class weights; hap's is unweighted")
	}
	red, err := intArg(n, 3, "reduction", 1)
	if err != nil {
		return nil, err
	}
	if red != 2 {
		return nil, fmt.Errorf("loss reduction %d; hap's loss is a sum over samples: use reduction='sum'", red)
	}
	labels, _, err := c.inMat(n, 1, "target")
	if err != nil {
		return nil, err
	}
	if len(lp.spec.Shape) != 2 {
		return nil, fmt.Errorf("nll loss of a rank-%d input; hap's takes [N, C] (flatten first)", len(lp.spec.Shape))
	}
	var y *val
	if lp.kind == lzLogSM && lp.id == ir.NoTensor {
		x, err := c.mat(lp.src)
		if err != nil {
			return nil, err
		}
		y = plain(c.b.CrossEntropy(x, labels))
	} else {
		x, err := c.mat(lp)
		if err != nil {
			return nil, err
		}
		y = plain(c.b.NLLLoss(x, labels))
	}
	return []*val{y, {id: ir.NoTensor, kind: lzNone2, what: "nll loss's total weight"}}, nil
}
