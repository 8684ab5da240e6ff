package ir

import "fmt"

// ConvGroups is a convolution's number of groups: Attrs.Groups, or 1 when
// it is 0 (absent), so graphs written before groups existed keep their
// meaning and their JSON.
func ConvGroups(a *Attrs) int { return max(a.Groups, 1) }

// checkConvGroups checks x[N,C,H,W] against w[O,C/G,KH,KW] for G groups:
// G divides both channel counts. An empty channel shard (C = O = 0, a
// device holding no group of a group-split convolution) fits any G.
func checkConvGroups(a *Attrs, x, w *Tensor) error {
	if a.Groups < 0 {
		return fmt.Errorf("conv2d groups %d must be ≥ 1 (or 0 for 1)", a.Groups)
	}
	g := ConvGroups(a)
	c, o := x.Shape[1], w.Shape[0]
	if c == 0 && o == 0 {
		return nil
	}
	if o%g != 0 {
		return errShapes(fmt.Sprintf("conv2d with %d groups needs output channels w[0] divisible by %d", g, g), x, w)
	}
	if c != w.Shape[1]*g {
		return errShapes(fmt.Sprintf("conv2d with %d groups needs x's channels = %d × w's input channels per group", g, g), x, w)
	}
	return nil
}
