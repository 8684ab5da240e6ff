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
