package importer

import (
	"fmt"

	"hap/ir"
)

// avgPool imports aten.avg_pool2d(x, kernel_size, stride=[], padding=0,
// ceil_mode=False, count_include_pad=True, divisor_override=None): hap's
// avg_pool2d divides every window by kernel², so padding must count (or be
// absent), and there is no ceil mode or other divisor.
func avgPool(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	if len(v.spec.Shape) != 4 {
		return nil, fmt.Errorf("average pool of a rank-%d input; want NCHW", len(v.spec.Shape))
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
	ceil, err := boolArg(n, 4, "ceil_mode", false)
	if err != nil {
		return nil, err
	}
	incl, err := boolArg(n, 5, "count_include_pad", true)
	if err != nil {
		return nil, err
	}
	if ceil || (pad > 0 && !incl) || arg(n, 6, "divisor_override") != nil {
		return nil, fmt.Errorf("average pool with ceil_mode %v, count_include_pad %v (padding %d), divisor_override %v; hap divides every window by kernel², padding included", ceil, incl, pad, show(arg(n, 6, "divisor_override")))
	}
	return one(c.emit(ir.OpAvgPool2D, ir.Attrs{Kernel: k, Stride: s, Pad: pad}, x)), nil
}

// batchNorm imports training-mode batch norm, as torch 1.13's make_fx
// records it: aten.native_batch_norm(input, weight, bias, running_mean,
// running_var, training, momentum, eps) → (out, save_mean, save_invstd),
// and aten.cudnn_batch_norm (same arguments) → (out, save_mean, save_var,
// reserve). It becomes hap's statistics sums, batch_norm, and (with
// running statistics) batch_norm_running updating the two buffers, which
// are state tensors. The saved statistics are not imported.
func batchNorm(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "input")
	if err != nil {
		return nil, err
	}
	if len(v.spec.Shape) < 2 {
		return nil, fmt.Errorf("batch norm of a rank-%d input; want [N, C, …]", len(v.spec.Shape))
	}
	train, err := boolArg(n, 5, "training", false)
	if err != nil {
		return nil, err
	}
	if !train {
		return nil, fmt.Errorf("batch norm in eval mode; hap imports training mode (call model.train() before tracing)")
	}
	mom, ok := c.number(arg(n, 6, "momentum"))
	if !ok {
		return nil, fmt.Errorf("batch norm momentum is %s; hap wants a number (momentum=None, the cumulative average, is not imported)", show(arg(n, 6, "momentum")))
	}
	eps, ok := c.number(arg(n, 7, "eps"))
	if !ok {
		return nil, fmt.Errorf("batch norm eps is %s; want a number", show(arg(n, 7, "eps")))
	}
	// affine=False has no weight or bias: a scale of ones and a shift of
	// zeros, made like the channel sums.
	vec := func(i int, name string, fill float64) (ir.TensorID, error) {
		if arg(n, i, name) == nil {
			axes := []int{0}
			for d := 2; d < len(v.spec.Shape); d++ {
				axes = append(axes, d)
			}
			return c.b.Emit(ir.OpFillLike, ir.Attrs{Scale: fill}, c.b.ReduceSum(x, axes...))[0], nil
		}
		id, _, err := c.inMat(n, i, name)
		return id, err
	}
	g, err := vec(1, "weight", 1)
	if err != nil {
		return nil, err
	}
	b, err := vec(2, "bias", 0)
	if err != nil {
		return nil, err
	}
	rm, rv := ir.NoTensor, ir.NoTensor
	if arg(n, 3, "running_mean") != nil || arg(n, 4, "running_var") != nil {
		if rm, _, err = c.inMat(n, 3, "running_mean"); err != nil {
			return nil, err
		}
		if rv, _, err = c.inMat(n, 4, "running_var"); err != nil {
			return nil, err
		}
	}
	y := plain(c.b.BatchNorm(x, g, b, rm, rv, eps, mom))
	stat := func(s string) *val { return &val{id: ir.NoTensor, kind: lzNone2, what: "batch norm's saved " + s} }
	out := []*val{y, stat("mean"), stat("inverse standard deviation")}
	if n.Op == "aten.cudnn_batch_norm.default" {
		out = []*val{y, stat("mean"), stat("variance"), stat("workspace")}
	}
	return out, nil
}

// isStepCounter reports an integer buffer: batch norm's
// num_batches_tracked, which its module increments in place every step.
func isStepCounter(v *val) bool {
	return v.kind == lzLeaf && v.leaf.Kind == "buffer" && v.leaf.DType == "int64"
}

// stepCounter drops the increment of an integer buffer. The counter only
// matters to batch norm with momentum=None (refused), and hap's integer
// tensors are ids and labels, not state it updates.
func stepCounter(c *conv, n *Node) []*val {
	c.note("batch norm's step counter (num_batches_tracked) is not imported: hap's batch norm uses a fixed momentum")
	return one(&val{id: ir.NoTensor, kind: lzNone2, what: "the incremented step counter"})
}
