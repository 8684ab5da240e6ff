package importer

import (
	"errors"
	"fmt"
	"math"

	"hap/ir"
)

// Arithmetic as today's models write it: products and quotients of
// tensors that broadcast (a squeeze-and-excitation scale [N, C, 1, 1]
// times the feature map, ConvNeXt's layer scale [C, 1, 1]), powers,
// roots and reductions that keep their dims (RMSNorm's
// x·rsqrt(mean(x²) + ε)). Each becomes hap's operator of the same name;
// fuseRMSNorm then folds RMSNorm's chain into one rms_norm op.

// broadcastBinary is a op b for ops whose operands broadcast (ir aligns
// them at their last dims, as PyTorch does). An expand feeding the op is
// dropped: the op broadcasts its source itself, so the copies are never
// made.
func (c *conv) broadcastBinary(k ir.OpKind, a, b *val) ([]*val, error) {
	if a.kind == lzBroadcast && a.id == ir.NoTensor {
		a = a.src
	}
	if b.kind == lzBroadcast && b.id == ir.NoTensor {
		b = b.src
	}
	if _, ok := ir.BroadcastShapes(a.spec.Shape, b.spec.Shape); !ok {
		return nil, fmt.Errorf("%s of %v and %v: shapes do not broadcast", k, a.spec.Shape, b.spec.Shape)
	}
	x, err := c.mat(a)
	if err != nil {
		return nil, err
	}
	y, err := c.mat(b)
	if err != nil {
		return nil, err
	}
	return one(c.emit(k, ir.Attrs{}, x, y)), nil
}

func powScalar(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	p, ok := c.number(arg(n, 1, "exponent"))
	if !ok {
		return nil, fmt.Errorf("pow by %s; hap imports powers by a number", show(arg(n, 1, "exponent")))
	}
	if p == 1 {
		return one(v), nil
	}
	return one(plain(c.b.PowScalar(x, p))), nil
}

// meanDims is mean.dim over anything but an NCHW tensor's H and W (those
// are global average pooling, which mean imports as adaptive_avg_pool2d).
func meanDims(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	axes, keep, err := reduceDims(n, len(v.spec.Shape))
	if err != nil {
		return nil, err
	}
	return one(plain(c.b.Mean(x, keep, axes...))), nil
}

// varOp is var.correction (torch ≥ 1.13: correction, default 1) and
// var.dim (unbiased, default true).
func varOp(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	var dims []int
	if arg(n, 1, "dim") != nil {
		if dims, err = intsArg(n, 1, "dim"); err != nil {
			return nil, err
		}
	}
	axes, err := normDims(dims, len(v.spec.Shape))
	if err != nil {
		return nil, err
	}
	correction := 1
	var keep bool
	if n.Op == "aten.var.dim" {
		unbiased, err := boolArg(n, 2, "unbiased", true)
		if err != nil {
			return nil, err
		}
		if !unbiased {
			correction = 0
		}
		if keep, err = boolArg(n, 3, "keepdim", false); err != nil {
			return nil, err
		}
	} else {
		if a := arg(n, 2, "correction"); a != nil {
			f, ok := c.number(a)
			if !ok || f != float64(int(f)) || f < 0 {
				return nil, fmt.Errorf("var correction %s; want a whole number ≥ 0", show(a))
			}
			correction = int(f)
		}
		if keep, err = boolArg(n, 3, "keepdim", false); err != nil {
			return nil, err
		}
	}
	return one(plain(c.b.Var(x, correction, keep, axes...))), nil
}

func amaxOp(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	dims, err := intsArg(n, 1, "dim")
	if err != nil {
		return nil, err
	}
	axes, err := normDims(dims, len(v.spec.Shape))
	if err != nil {
		return nil, err
	}
	keep, err := boolArg(n, 2, "keepdim", false)
	if err != nil {
		return nil, err
	}
	return one(plain(c.b.Amax(x, keep, axes...))), nil
}

// normDims is dims normalised, sorted and deduplicated; none means every
// dim, as PyTorch's reductions read an empty list.
func normDims(dims []int, r int) ([]int, error) {
	seen := make([]bool, r)
	for _, d := range dims {
		d, err := normDim(d, r)
		if err != nil {
			return nil, err
		}
		seen[d] = true
	}
	var axes []int
	for i, s := range seen {
		if s || len(dims) == 0 {
			axes = append(axes, i)
		}
	}
	if len(axes) == 0 {
		return nil, errors.New("reduces a rank-0 tensor")
	}
	return axes, nil
}

// expandBeside materialises v, an expand that a cat reads, as zeros the
// size of the expand plus its source: ir has no op that copies a tensor
// along a dim, but a broadcasting add onto zeros makes the copies, and
// its gradient sums them back (what expand's is). The zeros are a
// fill_like of a slice of another operand of the cat, which has the
// expand's shape but along the cat's dim d. ViT's class token, [1, 1, D]
// expanded to [B, 1, D] and put before the patches, is the case.
func (c *conv) expandBeside(v *val, parts []*val, d int) (*val, error) {
	want := v.spec.Shape
	if d < 0 {
		d += len(want)
	}
	for _, p := range parts {
		ps := p.spec.Shape
		if p == v || p.kind == lzBroadcast || len(ps) != len(want) || d < 0 || d >= len(ps) || ps[d] < want[d] {
			continue
		}
		same := true
		for i := range ps {
			same = same && (i == d || ps[i] == want[i])
		}
		if !same {
			continue
		}
		like, err := c.mat(p)
		if err != nil {
			return nil, err
		}
		if ps[d] != want[d] {
			like = c.b.Slice(like, d, 0, want[d])
		}
		zeros := c.b.Emit(ir.OpFillLike, ir.Attrs{Scale: 0}, like)[0]
		src, err := c.mat(v.src)
		if err != nil {
			return nil, err
		}
		r := plain(c.b.Add(zeros, src))
		r.spec = v.spec
		return r, nil
	}
	return nil, fmt.Errorf("concatenates an expand of %v to %v that no other operand has the shape of", v.src.spec.Shape, want)
}

// asStrided is as_strided when it only restrides: the same sizes, no
// offset, and over the dims longer than 1 the row-major strides of the
// values as they are — what torch's decompositions emit to give a
// reduction's keep-dims result the memory format of its input (ConvNeXt's
// pooling). It changes no value, so it imports as nothing; any other
// as_strided reinterprets memory, which hap's value graph cannot, and is
// refused.
func asStrided(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	size, err := intsArg(n, 1, "size")
	if err != nil {
		return nil, err
	}
	stride, err := intsArg(n, 2, "stride")
	if err != nil {
		return nil, err
	}
	off := 0
	if a := arg(n, 3, "storage_offset"); a != nil {
		if off, err = intArg(n, 3, "storage_offset", 0); err != nil {
			return nil, err
		}
	}
	if !ir.Shape(size).Equal(v.spec.Shape) || len(stride) != len(size) || off != 0 {
		return nil, fmt.Errorf("as_strided to size %v, stride %v, offset %d of a %v tensor; hap imports only restrides that keep every value", size, stride, off, v.spec.Shape)
	}
	want := 1
	for i := len(size) - 1; i >= 0; i-- {
		if size[i] == 1 {
			continue
		}
		if stride[i] != want {
			return nil, fmt.Errorf("as_strided with stride %v over %v: not row-major, so it reorders values; hap imports only restrides that keep every value", stride, size)
		}
		want *= size[i]
	}
	return one(v), nil
}

// maskedInf stands for ±∞ as masked_fill's value: graph JSON has no
// infinities, and the float32 maximum behaves as −∞ wherever masks are
// used — exp(−3.4e38 − m) underflows to exactly 0 after softmax's shift in
// float32 and float64 alike. Only a row masked whole differs (torch: NaN;
// hap: uniform weights), which no causal or padding mask produces.
const maskedInf = math.MaxFloat32

// fillValue is masked_fill's value, with ±∞ as ±maskedInf.
func fillValue(v float64) float64 {
	switch {
	case math.IsInf(v, 1):
		return maskedInf
	case math.IsInf(v, -1):
		return -maskedInf
	}
	return v
}

// maskTensor is masked_fill's or where's condition as a graph tensor of
// x's dtype (1 where true): a boolean buffer, or one folded from buffers,
// becomes a state tensor of x's float type. A mask computed from the
// step's own tensors is refused: hap's masked_fill takes a constant mask.
func (c *conv) maskTensor(m, x *val) (ir.TensorID, error) {
	if m.kind != lzLeaf || m.leaf.Kind != "buffer" {
		return ir.NoTensor, fmt.Errorf("its mask %v is computed by the step; hap imports masks that are constants (a buffer, or computed from buffers alone, which the importer folds)", m.spec.Shape)
	}
	if m.leaf.DType == "bool" {
		m.leaf.DType = x.spec.DType
		m.spec.DType = x.spec.DType
	}
	return c.mat(m)
}

// maskedFill imports masked_fill(x, mask, value) with a constant mask.
func maskedFill(c *conv, n *Node) ([]*val, error) {
	xv, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	mv, err := c.in(n, 1, "mask")
	if err != nil {
		return nil, err
	}
	v, ok := c.number(arg(n, 2, "value"))
	if !ok {
		return nil, fmt.Errorf("value %s is not a number", show(arg(n, 2, "value")))
	}
	return c.fillWhere(xv, mv, v, false)
}

// where imports where(cond, a, b) with a number on one side: masked_fill
// of the tensor side, where cond holds (a is the number) or where it does
// not (b is).
func where(c *conv, n *Node) ([]*val, error) {
	cv, err := c.in(n, 0, "condition")
	if err != nil {
		return nil, err
	}
	if v, ok := c.number(arg(n, 2, "other")); ok {
		if _, both := c.number(arg(n, 1, "self")); both {
			return nil, errors.New("chooses between two numbers; hap imports where with a tensor on one side")
		}
		xv, err := c.in(n, 1, "self")
		if err != nil {
			return nil, err
		}
		return c.fillWhere(xv, cv, v, true)
	}
	v, ok := c.number(arg(n, 1, "self"))
	if !ok {
		return nil, errors.New("chooses between two tensors; hap imports where with a number on one side (masked_fill)")
	}
	xv, err := c.in(n, 2, "other")
	if err != nil {
		return nil, err
	}
	return c.fillWhere(xv, cv, v, false)
}

// fillWhere is x with v where mask holds (where it does not, if invert).
func (c *conv) fillWhere(xv, mv *val, v float64, invert bool) ([]*val, error) {
	x, err := c.mat(xv)
	if err != nil {
		return nil, err
	}
	m, err := c.maskTensor(mv, xv)
	if err != nil {
		return nil, err
	}
	if invert { // 1 − m: the mask is 0 or 1
		m = c.b.Emit(ir.OpSub, ir.Attrs{}, c.b.Emit(ir.OpFillLike, ir.Attrs{Scale: 1}, m)[0], m)[0]
	}
	// −∞ over the last two dims is an attention mask: as an additive one
	// (0 or −maskedInf, x + it) the attention pass fuses it into the
	// attention op, as it does the additive masks of LLaMA's code.
	xs, ms := xv.spec.Shape, c.b.Shape(m)
	if r := len(xs); math.IsInf(v, -1) && r >= 2 && ir.Shape(xs[r-2:]).Equal(ms) {
		add := c.b.MaskedFill(c.b.Emit(ir.OpFillLike, ir.Attrs{Scale: 0}, m)[0], m, -maskedInf)
		return one(plain(c.b.Bias(x, add, r-2, r-1))), nil
	}
	return one(plain(c.b.MaskedFill(x, m, fillValue(v)))), nil
}
