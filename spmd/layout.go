package spmd

import (
	"fmt"

	"hap/ir"
)

// PropKind is how a distributed tensor relates to the original.
type PropKind uint8

const (
	// Identity: every device holds the whole tensor.
	Identity PropKind = iota
	// Gather: device r holds a slice along Dim; concatenating the slices in
	// device order gives the original.
	Gather
	// Reduce: every device holds a partial value; their sum is the original.
	Reduce
)

// Layout is a PropKind with, for Gather, the dimension and the segment whose
// lengths cut it. Identity and Reduce layouts have Dim and Seg zero, so
// layouts compare with ==.
type Layout struct {
	Kind PropKind `json:"kind"`
	Dim  int      `json:"dim,omitempty"`
	Seg  int      `json:"seg,omitempty"`
}

// Layout constructors.
var (
	I = Layout{Kind: Identity}
	R = Layout{Kind: Reduce}
)

// G is Gather along dim, cut by segment seg.
func G(dim, seg int) Layout { return Layout{Kind: Gather, Dim: dim, Seg: seg} }

func (l Layout) String() string {
	switch l.Kind {
	case Identity:
		return "Identity"
	case Reduce:
		return "Reduce"
	}
	return fmt.Sprintf("Gather(%d,s%d)", l.Dim, l.Seg)
}

// LayoutSet is a set of layouts. A tensor is read in a handful of layouts,
// so a slice scanned linearly beats a map: Evaluate builds one per tensor
// class for every choice it prices.
type LayoutSet []Layout

// Has reports whether q is in the set.
func (s LayoutSet) Has(q Layout) bool {
	for _, l := range s {
		if l == q {
			return true
		}
	}
	return false
}

// Add returns the set with q in it.
func (s LayoutSet) Add(q Layout) LayoutSet {
	if s.Has(q) {
		return s
	}
	return append(s, q)
}

// Segment is a count of units split among devices.
type Segment struct {
	Name    string `json:"name"`
	Units   int    `json:"units"`
	Lengths []int  `json:"lengths"` // per device, summing to Units
	// Within, in a mesh program, nests this segment in mesh segment
	// *Within (same units): it cuts each replica's share of that segment
	// among the replica's ranks, so Lengths has one entry per (replica,
	// rank), replica-major, and replica r's entries sum to its length
	// there. nil for an ordinary segment.
	Within *int `json:"within,omitempty"`
}

// Offset is the first unit device r holds.
func (s *Segment) Offset(r int) int {
	o := 0
	for _, l := range s.Lengths[:r] {
		o += l
	}
	return o
}

// unit returns the elements per unit of dim d of shape under segment s, or
// 0 when the dimension is not a whole multiple of the segment's units.
func unit(shape ir.Shape, d int, s *Segment) int {
	if d < 0 || d >= len(shape) || s.Units <= 0 || shape[d]%s.Units != 0 {
		return 0
	}
	return shape[d] / s.Units
}

// Fits reports whether layout l can describe a tensor of this shape.
func Fits(l Layout, shape ir.Shape, segs []Segment) bool {
	if l.Kind != Gather {
		return true
	}
	return l.Seg >= 0 && l.Seg < len(segs) && unit(shape, l.Dim, &segs[l.Seg]) > 0
}

// LocalShape is device r's shape of a tensor laid out as l.
func LocalShape(l Layout, shape ir.Shape, segs []Segment, r int) ir.Shape {
	s := shape.Clone()
	if l.Kind == Gather {
		seg := &segs[l.Seg]
		s[l.Dim] = seg.Lengths[r] * unit(shape, l.Dim, seg)
	}
	return s
}

// Pieces is every device's length of dim l.Dim, in elements.
func Pieces(l Layout, shape ir.Shape, segs []Segment) []int {
	seg := &segs[l.Seg]
	u := unit(shape, l.Dim, seg)
	p := make([]int, len(seg.Lengths))
	for r, n := range seg.Lengths {
		p[r] = n * u
	}
	return p
}

// LocalOffset is where device r's piece starts in each dim of the original.
func LocalOffset(l Layout, shape ir.Shape, segs []Segment, r int) []int {
	off := make([]int, len(shape))
	if l.Kind == Gather {
		seg := &segs[l.Seg]
		off[l.Dim] = seg.Offset(r) * unit(shape, l.Dim, seg)
	}
	return off
}

// EvenLengths splits units as evenly as n devices can hold them, the
// remainder one each to the lowest devices.
func EvenLengths(units, n int) []int {
	ones := make([]float64, n)
	for i := range ones {
		ones[i] = 1
	}
	return RoundLengths(units, ones)
}

// RoundLengths turns shares (non-negative, not all zero) into integer
// lengths summing to units: floor of each exact share, then the leftover
// units one at a time to the largest shortfall (ties to the lower device).
func RoundLengths(units int, shares []float64) []int {
	var total float64
	for _, s := range shares {
		total += s
	}
	out := make([]int, len(shares))
	if total <= 0 || units <= 0 {
		if len(out) > 0 && units > 0 {
			out[0] = units
		}
		return out
	}
	exact := make([]float64, len(shares))
	left := units
	for i, s := range shares {
		exact[i] = float64(units) * s / total
		out[i] = int(exact[i])
		left -= out[i]
	}
	for ; left > 0; left-- {
		best := 0
		for i := range out {
			if exact[i]-float64(out[i]) > exact[best]-float64(out[best]) {
				best = i
			}
		}
		out[best]++
	}
	return out
}

// MarshalText writes the String form: Identity, Reduce, Gather(dim,sSEG).
func (l Layout) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText parses the String form.
func (l *Layout) UnmarshalText(b []byte) error {
	s := string(b)
	switch s {
	case "Identity":
		*l = I
		return nil
	case "Reduce":
		*l = R
		return nil
	}
	var d, seg int
	if n, err := fmt.Sscanf(s, "Gather(%d,s%d)", &d, &seg); err != nil || n != 2 || G(d, seg).String() != s || d < 0 || seg < 0 {
		return fmt.Errorf("layout %q: want Identity, Reduce or Gather(dim,sSEG)", s)
	}
	*l = G(d, seg)
	return nil
}
