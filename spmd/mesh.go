package spmd

import (
	"fmt"
	"strings"

	"hap/ir"
)

// A 2-D mesh program. Megatron-style training — tensor parallel inside a
// machine, data parallel across machines — needs a tensor to be split one
// way across machines and another way (or not at all) among one machine's
// GPUs, which a single Layout over the flat device list cannot say. A
// Program with a Mesh arranges its devices as replicas × ranks and gives
// every tensor a Placement: one Layout across replicas (Outer, cut by the
// mesh's segments, one length per replica) and one among the ranks of a
// replica (Inner, cut by the program's segments, one length per rank).
// Device (r, k) holds the inner piece k of the outer piece r.
//
// Everything else carries over from 1-D programs: a compute instruction
// runs its op under a pair of rules (Outer along the replicas, Rule along
// the ranks; running the op on outer pieces is an op on a smaller tensor,
// to which the inner rule applies), and a communication instruction changes
// the layout along one Axis, as a collective among the devices that differ
// only in that coordinate (a machine's GPUs, or the GPUs of the same rank
// in every replica), leaving the layout along the other axis (Other) as it
// is. Replicated parameters get their gradient summed along every axis on
// which they are Identity; the loss ends as Reduce on both.
//
// Both axes may cut the same dimension only through a nested segment: one
// that splits each replica's share of a mesh segment among that replica's
// ranks (Segment.Within). Tensor parallelism nests the samples it splits
// for the loss inside the samples data parallelism gives each replica.
// Otherwise the axes cut different dimensions, so every piece is a box of
// the original tensor whose extent along each cut dimension comes from one
// segment, and the offsets of the two axes add.

// Axis is a direction of a mesh program's device grid.
type Axis uint8

const (
	// AxisRanks runs among the ranks of one replica (a 1-D program's only
	// axis).
	AxisRanks Axis = iota
	// AxisReplicas runs across replicas, among devices of the same rank.
	AxisReplicas
)

func (a Axis) String() string {
	if a == AxisReplicas {
		return "replicas"
	}
	return "ranks"
}

// MarshalText writes "ranks" or "replicas".
func (a Axis) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText parses "ranks" (or "") and "replicas".
func (a *Axis) UnmarshalText(b []byte) error {
	switch string(b) {
	case "", "ranks":
		*a = AxisRanks
	case "replicas":
		*a = AxisReplicas
	default:
		return fmt.Errorf("axis %q: want ranks or replicas", b)
	}
	return nil
}

// Mesh makes a program 2-D: Replicas[r][k] is the global device index
// (package cluster's order) of rank k of replica r; every replica has
// Program.Devices ranks and every device appears once. Segments cut
// dimensions across replicas, with one length per replica.
type Mesh struct {
	Replicas [][]int   `json:"replicas"`
	Segments []Segment `json:"segments"`
}

// Placement is a tensor's layout along both axes of a program: Outer
// across replicas (Identity in a 1-D program) and Inner among a replica's
// ranks.
type Placement struct {
	Outer Layout
	Inner Layout
}

func (pl Placement) String() string { return pl.Outer.String() + "×" + pl.Inner.String() }

// along is the placement with layout l on axis and other on the other axis.
func along(axis Axis, l, other Layout) Placement {
	if axis == AxisReplicas {
		return Placement{Outer: l, Inner: other}
	}
	return Placement{Outer: other, Inner: l}
}

// NumDevices is the number of devices the program runs on: Devices, or
// replicas × Devices with a mesh.
func (p *Program) NumDevices() int {
	if p.Mesh == nil {
		return p.Devices
	}
	return len(p.Mesh.Replicas) * p.Devices
}

// NumReplicas is the mesh's replica count, 1 without a mesh.
func (p *Program) NumReplicas() int {
	if p.Mesh == nil {
		return 1
	}
	return len(p.Mesh.Replicas)
}

// Coord is device d's replica and rank.
func (p *Program) Coord(d int) (r, k int) {
	if p.Mesh == nil {
		return 0, d
	}
	for r, rep := range p.Mesh.Replicas {
		for k, e := range rep {
			if e == d {
				return r, k
			}
		}
	}
	panic(fmt.Sprintf("encode: device %d is not in the mesh %v", d, p.Mesh.Replicas))
}

// Group is the devices device d exchanges with along axis, in rank order:
// its replica's ranks, or the devices of its rank in every replica.
func (p *Program) Group(axis Axis, d int) []int {
	if p.Mesh == nil {
		g := make([]int, p.Devices)
		for i := range g {
			g[i] = i
		}
		return g
	}
	r, k := p.Coord(d)
	if axis == AxisRanks {
		return append([]int{}, p.Mesh.Replicas[r]...)
	}
	g := make([]int, len(p.Mesh.Replicas))
	for q, rep := range p.Mesh.Replicas {
		g[q] = rep[k]
	}
	return g
}

// Groups is every group along axis: one per replica (AxisRanks) or per
// rank (AxisReplicas).
func (p *Program) Groups(axis Axis) [][]int {
	var out [][]int
	if axis == AxisRanks {
		for r := 0; r < p.NumReplicas(); r++ {
			out = append(out, p.Group(AxisRanks, p.deviceAt(r, 0)))
		}
		return out
	}
	for k := 0; k < p.Devices; k++ {
		out = append(out, p.Group(AxisReplicas, p.deviceAt(0, k)))
	}
	return out
}

func (p *Program) deviceAt(r, k int) int {
	if p.Mesh == nil {
		return k
	}
	return p.Mesh.Replicas[r][k]
}

// innerLength is the length of inner segment s at replica r, rank k.
func (p *Program) innerLength(s *Segment, r, k int) int {
	if s.Within != nil {
		return s.Lengths[r*p.Devices+k]
	}
	return s.Lengths[k]
}

// Piece is where device d's piece of a tensor of this shape placed as pl
// lies in the original: its offset in every dimension and its shape.
func (p *Program) Piece(pl Placement, shape ir.Shape, d int) (offset []int, local ir.Shape) {
	r, k := p.Coord(d)
	offset, local = make([]int, len(shape)), shape.Clone()
	if l := pl.Outer; l.Kind == Gather {
		s := &p.Mesh.Segments[l.Seg]
		u := unit(shape, l.Dim, s)
		offset[l.Dim] += s.Offset(r) * u
		local[l.Dim] = s.Lengths[r] * u
	}
	if l := pl.Inner; l.Kind == Gather {
		s := &p.Segments[l.Seg]
		u := unit(shape, l.Dim, s)
		for q := 0; q < k; q++ {
			offset[l.Dim] += p.innerLength(s, r, q) * u
		}
		local[l.Dim] = p.innerLength(s, r, k) * u
	}
	return offset, local
}

// AxisPieces is, for a tensor of this shape laid out as the Gather l along
// axis, every member's piece of dimension l.Dim in elements, in the rank
// order of device d's group along axis, and d's rank in that group.
func (p *Program) AxisPieces(axis Axis, l Layout, shape ir.Shape, d int) (pieces []int, rank int) {
	r, k := p.Coord(d)
	if axis == AxisReplicas {
		return Pieces(l, shape, p.Mesh.Segments), r
	}
	s := &p.Segments[l.Seg]
	u := unit(shape, l.Dim, s)
	pieces = make([]int, p.Devices)
	for q := range pieces {
		pieces[q] = p.innerLength(s, r, q) * u
	}
	return pieces, k
}

// checkPlacement says why pl cannot describe a tensor of this shape: a
// Gather whose segment does not divide the dimension, a Gather across
// replicas without a mesh, both axes cutting one dimension without a
// nested segment, or a nested segment without its parent's Gather.
func (p *Program) checkPlacement(pl Placement, shape ir.Shape) error {
	if p.Mesh == nil && pl.Outer != I {
		return fmt.Errorf("the program has no mesh, so it has no layout %s across replicas", pl.Outer)
	}
	if p.Mesh != nil && !Fits(pl.Outer, shape, p.Mesh.Segments) {
		return fmt.Errorf("%v cannot be laid out as %s across replicas", shape, pl.Outer)
	}
	if !Fits(pl.Inner, shape, p.Segments) {
		if p.Mesh == nil {
			return fmt.Errorf("%v cannot be laid out as %s", shape, pl.Inner)
		}
		return fmt.Errorf("%v cannot be laid out as %s among ranks", shape, pl.Inner)
	}
	if pl.Inner.Kind != Gather {
		return nil
	}
	s := &p.Segments[pl.Inner.Seg]
	if s.Within != nil {
		want := G(pl.Inner.Dim, *s.Within)
		if pl.Outer != want {
			return fmt.Errorf("%s among ranks splits each replica's share of mesh segment %d, so it needs %s across replicas, not %s", pl.Inner, *s.Within, want, pl.Outer)
		}
		return nil
	}
	if pl.Outer.Kind == Gather && pl.Outer.Dim == pl.Inner.Dim {
		return fmt.Errorf("%s across replicas and %s among ranks both cut dim %d, which needs a segment nested in mesh segment %d", pl.Outer, pl.Inner, pl.Inner.Dim, pl.Outer.Seg)
	}
	return nil
}

// checkMesh validates the mesh and the segments' lengths.
func (p *Program) checkMesh() error {
	checkSeg := func(what string, s *Segment, n int) error {
		if len(s.Lengths) != n {
			return fmt.Errorf("%s %q has %d lengths, want %d", what, s.Name, len(s.Lengths), n)
		}
		sum := 0
		for _, l := range s.Lengths {
			if l < 0 {
				return fmt.Errorf("%s %q has a negative length in %v", what, s.Name, s.Lengths)
			}
			sum += l
		}
		if sum != s.Units || s.Units < 1 {
			return fmt.Errorf("%s %q lengths %v sum to %d, want %d units", what, s.Name, s.Lengths, sum, s.Units)
		}
		return nil
	}
	m := p.Mesh
	if m == nil {
		for i := range p.Segments {
			if p.Segments[i].Within != nil {
				return fmt.Errorf("segment %d %q is nested in a mesh segment, but the program has no mesh", i, p.Segments[i].Name)
			}
		}
		return nil
	}
	if len(m.Replicas) < 1 {
		return fmt.Errorf("mesh has no replicas")
	}
	n := len(m.Replicas) * p.Devices
	seen := make([]bool, n)
	for r, rep := range m.Replicas {
		if len(rep) != p.Devices {
			return fmt.Errorf("mesh replica %d has %d devices %v, want %d (every replica has the same ranks)", r, len(rep), rep, p.Devices)
		}
		for _, d := range rep {
			if d < 0 || d >= n {
				return fmt.Errorf("mesh replica %d names device %d, outside the %d devices of %d replicas × %d ranks", r, d, n, len(m.Replicas), p.Devices)
			}
			if seen[d] {
				return fmt.Errorf("mesh names device %d twice", d)
			}
			seen[d] = true
		}
	}
	for i := range m.Segments {
		if err := checkSeg(fmt.Sprintf("mesh segment %d", i), &m.Segments[i], len(m.Replicas)); err != nil {
			return err
		}
	}
	for i := range p.Segments {
		s := &p.Segments[i]
		if s.Within == nil {
			continue
		}
		w := *s.Within
		if w < 0 || w >= len(m.Segments) {
			return fmt.Errorf("segment %d %q is nested in mesh segment %d, which does not exist", i, s.Name, w)
		}
		parent := &m.Segments[w]
		if s.Units != parent.Units {
			return fmt.Errorf("segment %d %q has %d units but is nested in mesh segment %d %q of %d", i, s.Name, s.Units, w, parent.Name, parent.Units)
		}
		if len(s.Lengths) != n {
			return fmt.Errorf("nested segment %d %q has %d lengths, want one per replica and rank (%d)", i, s.Name, len(s.Lengths), n)
		}
		for r := range m.Replicas {
			sum := 0
			for _, l := range s.Lengths[r*p.Devices : (r+1)*p.Devices] {
				if l < 0 {
					return fmt.Errorf("nested segment %d %q has a negative length in %v", i, s.Name, s.Lengths)
				}
				sum += l
			}
			if sum != parent.Lengths[r] {
				return fmt.Errorf("nested segment %d %q gives replica %d lengths %v summing to %d, but mesh segment %d gives it %d",
					i, s.Name, r, s.Lengths[r*p.Devices:(r+1)*p.Devices], sum, w, parent.Lengths[r])
			}
		}
	}
	return nil
}

// NestedLengths cuts every replica's length of a mesh segment among the
// ranks in proportion to shares (RoundLengths per replica), replica-major:
// the lengths of a segment nested in it.
func NestedLengths(parent []int, shares []float64) []int {
	var out []int
	for _, l := range parent {
		out = append(out, RoundLengths(l, shares)...)
	}
	return out
}

// describePlacement prints a placement as a 1-D program's layout or a
// mesh program's pair.
func (p *Program) describePlacement(pl Placement) string {
	if p.Mesh == nil {
		return pl.Inner.String()
	}
	return pl.String()
}

func (p *Program) placementSet(ps []Placement) string {
	var s []string
	for _, pl := range ps {
		s = append(s, p.describePlacement(pl))
	}
	return "{" + strings.Join(sortedStrings(s), ", ") + "}"
}

func hasPlacement(ps []Placement, pl Placement) bool {
	for _, x := range ps {
		if x == pl {
			return true
		}
	}
	return false
}
