package importer

import (
	"errors"
	"fmt"
	"slices"

	"hap/ir"
)

// indexSelect imports index_select(x, dim, index): index 1-D int64.
func indexSelect(c *conv, n *Node) ([]*val, error) {
	xv, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	d, err := intArg(n, 1, "dim", 0)
	if err != nil {
		return nil, err
	}
	iv, err := c.in(n, 2, "index")
	if err != nil {
		return nil, err
	}
	r, err := c.takeAlong(xv, d, iv)
	return one(r), err
}

// indexTensor imports x[..., idx, ...] (aten.index.Tensor) with one index
// tensor, 1-D, on one dim: what index_select does.
func indexTensor(c *conv, n *Node) ([]*val, error) {
	xv, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	l, ok := arg(n, 1, "indices").([]any)
	if !ok {
		return nil, fmt.Errorf("indices are %s; want a list", show(arg(n, 1, "indices")))
	}
	d := -1
	for i, a := range l {
		if a == nil {
			continue
		}
		if d >= 0 {
			return nil, errors.New("indexes two or more dims at once; hap imports one index tensor on one dim (index_select)")
		}
		d = i
	}
	if d < 0 {
		return one(xv), nil
	}
	iv, err := c.tensorVal(n, l[d], fmt.Sprintf("index %d", d))
	if err != nil {
		return nil, err
	}
	r, err := c.takeAlong(xv, d, iv)
	return one(r), err
}

// takeAlong is x's entries at positions index along dim d. Positions the
// trace recorded (a literal list) become slices of x's runs of consecutive
// positions, concatenated: plain views, which shard as slices do. A
// buffer's positions (unknown until the step runs) become an embedding
// lookup into x with d moved first and the other dims flattened: the
// lookup's gradient, a scatter-add into the table, is index_select's.
// The index is a buffer, an input or a view of one.
func (c *conv) takeAlong(xv *val, d int, iv *val) (*val, error) {
	r := len(xv.spec.Shape)
	d, err := normDim(d, r)
	if err != nil {
		return nil, err
	}
	if len(iv.spec.Shape) != 1 || iv.spec.DType != "int64" {
		return nil, fmt.Errorf("index is %s%v; hap imports a 1-D int64 index", iv.spec.DType, iv.spec.Shape)
	}
	x, err := c.mat(xv)
	if err != nil {
		return nil, err
	}
	size := xv.spec.Shape[d]
	if iv.kind == lzLeaf && iv.leaf.Kind == "constant" {
		if len(iv.leaf.Value) != iv.spec.Shape[0] {
			return nil, fmt.Errorf("index constant %q %v: its values were not recorded (over %d elements)", iv.leaf.Name, iv.spec.Shape, len(iv.leaf.Value))
		}
		return c.takeRuns(x, d, size, iv.leaf.Value)
	}
	// An int64 tensor other than a literal is a buffer, an input or a view
	// of one (hap computes no integer arithmetic).
	ids, err := c.mat(iv)
	if err != nil {
		return nil, err
	}
	perm := append([]int{d}, slices.Delete(seq(r), d, d+1)...)
	moved := make([]int, r)
	rest := 1
	for i, p := range perm {
		moved[i] = xv.spec.Shape[p]
		if i > 0 {
			rest *= moved[i]
		}
	}
	t := c.b.Reshape(c.permuted(x, perm), size, rest)
	e := c.b.Embedding(ids, t)
	moved[0] = iv.spec.Shape[0]
	back := make([]int, r)
	for i, p := range perm {
		back[p] = i
	}
	return plain(c.permuted(c.b.Reshape(e, moved...), back)), nil
}

// takeRuns is x's entries at the given positions along d, as slices of
// consecutive runs, concatenated.
func (c *conv) takeRuns(x ir.TensorID, d, size int, positions []float64) (*val, error) {
	var parts []ir.TensorID
	for i := 0; i < len(positions); {
		p := int(positions[i])
		if float64(p) != positions[i] || p < -size || p >= size {
			return nil, fmt.Errorf("index %v out of range for a dim of %d", positions[i], size)
		}
		if p < 0 {
			p += size
		}
		j := i + 1
		for j < len(positions) && int(positions[j]) == p+(j-i) && p+(j-i) < size {
			j++
		}
		parts = append(parts, c.b.Slice(x, d, p, p+j-i))
		i = j
	}
	if len(parts) == 1 {
		return plain(parts[0]), nil
	}
	return plain(c.b.Concat(d, parts...)), nil
}

// permuted is x permuted by perm, or x when perm is the identity.
func (c *conv) permuted(x ir.TensorID, perm []int) ir.TensorID {
	if slices.Equal(perm, seq(len(perm))) {
		return x
	}
	return c.b.Permute(x, perm...)
}

// seq is 0, 1, …, n−1.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// gatherOp imports torch.gather(x, dim, index, sparse_grad=False): index an
// int64 buffer or input (a view of one) of x's rank, whose values are
// unknown until the step runs, with x's size on every dim but dim; hap's
// gather is dense, and its gradient a scatter-add into x's shape.
func gatherOp(c *conv, n *Node) ([]*val, error) {
	x, xv, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	d, err := intArg(n, 1, "dim", 0)
	if err != nil {
		return nil, err
	}
	iv, err := c.in(n, 2, "index")
	if err != nil {
		return nil, err
	}
	sparse, err := boolArg(n, 3, "sparse_grad", false)
	if err != nil {
		return nil, err
	}
	if sparse {
		return nil, errors.New("gather with sparse_grad=True; hap's gradient is dense (a scatter-add into x's shape): drop sparse_grad")
	}
	xs, is := ir.Shape(xv.spec.Shape), ir.Shape(iv.spec.Shape)
	d, err = normDim(d, len(xs))
	if err != nil {
		return nil, err
	}
	if iv.spec.DType != "int64" {
		return nil, fmt.Errorf("gather index is %s%v; want int64", iv.spec.DType, is)
	}
	if len(is) != len(xs) {
		return nil, fmt.Errorf("gather index %v has rank %d; want x's rank %d (x is %v)", is, len(is), len(xs), xs)
	}
	for k := range xs {
		if k != d && is[k] != xs[k] {
			return nil, fmt.Errorf("gather index %v differs from x %v on dim %d; hap gathers with an index of x's size on every dim but dim %d (slice x to the index's size first)", is, xs, k, d)
		}
	}
	index, err := c.mat(iv)
	if err != nil {
		return nil, err
	}
	return one(plain(c.b.Gather(x, d, index))), nil
}
