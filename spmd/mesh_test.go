package spmd_test

import (
	"errors"
	"strings"
	"testing"

	"hap/cluster"
	"hap/ir"
	"hap/models"
	"hap/spmd"
	"hap/strategy"
)

func meshProgram(t *testing.T, model, clusterName string) (*ir.Graph, *spmd.Program) {
	t.Helper()
	g, err := models.Load(model, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Load(clusterName)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build("megatron", g, c)
	if err != nil {
		t.Fatal(err)
	}
	if p.Mesh == nil {
		t.Fatalf("megatron on %s is not a mesh program", clusterName)
	}
	return g, p
}

// Megatron on paper-32 (8 machines × 4 GPUs) is 8 replicas × 4 ranks: the
// groups along each axis are a machine's GPUs and one GPU of every machine.
func TestMeshGroups(t *testing.T) {
	_, p := meshProgram(t, "bert-base-tiny", "paper-32")
	if p.NumDevices() != 32 || p.NumReplicas() != 8 || p.Devices != 4 {
		t.Fatalf("mesh %d devices, %d replicas × %d ranks; want 32 = 8 × 4", p.NumDevices(), p.NumReplicas(), p.Devices)
	}
	if g := p.Group(spmd.AxisRanks, 6); !equalInts(g, []int{4, 5, 6, 7}) {
		t.Errorf("device 6's ranks group %v, want its machine [4 5 6 7]", g)
	}
	if g := p.Group(spmd.AxisReplicas, 6); !equalInts(g, []int{2, 6, 10, 14, 18, 22, 26, 30}) {
		t.Errorf("device 6's replicas group %v, want rank 2 of every machine", g)
	}
	if r, k := p.Coord(6); r != 1 || k != 2 {
		t.Errorf("device 6 at replica %d rank %d, want 1, 2", r, k)
	}
	if n := len(p.Groups(spmd.AxisReplicas)); n != 4 {
		t.Errorf("%d groups across replicas, want one per rank (4)", n)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Pieces of a hand-made 2 × 2 mesh whose replicas are not in device
// order: a [6, 4] tensor split across replicas along dim 0 (lengths 4, 2)
// and among ranks along dim 1 (1, 3), and the same tensor split twice
// along dim 0 through a nested segment.
func TestMeshPieces(t *testing.T) {
	within := 0
	p := &spmd.Program{
		Devices: 2,
		Mesh: &spmd.Mesh{Replicas: [][]int{{3, 1}, {0, 2}},
			Segments: []spmd.Segment{{Name: "batch", Units: 6, Lengths: []int{4, 2}}}},
		Segments: []spmd.Segment{
			{Name: "cols", Units: 4, Lengths: []int{1, 3}},
			{Name: "rows", Units: 6, Lengths: []int{1, 3, 2, 0}, Within: &within},
		},
	}
	shape := ir.Shape{6, 4}
	cases := []struct {
		pl     spmd.Placement
		device int
		off    []int
		local  ir.Shape
	}{
		{spmd.Placement{Outer: spmd.G(0, 0), Inner: spmd.G(1, 0)}, 3, []int{0, 0}, ir.Shape{4, 1}},
		{spmd.Placement{Outer: spmd.G(0, 0), Inner: spmd.G(1, 0)}, 1, []int{0, 1}, ir.Shape{4, 3}},
		{spmd.Placement{Outer: spmd.G(0, 0), Inner: spmd.G(1, 0)}, 2, []int{4, 1}, ir.Shape{2, 3}},
		{spmd.Placement{Outer: spmd.G(0, 0), Inner: spmd.G(0, 1)}, 1, []int{1, 0}, ir.Shape{3, 4}},
		{spmd.Placement{Outer: spmd.G(0, 0), Inner: spmd.G(0, 1)}, 0, []int{4, 0}, ir.Shape{2, 4}},
		{spmd.Placement{Outer: spmd.G(0, 0), Inner: spmd.G(0, 1)}, 2, []int{6, 0}, ir.Shape{0, 4}},
		{spmd.Placement{Outer: spmd.I, Inner: spmd.R}, 2, []int{0, 0}, ir.Shape{6, 4}},
	}
	for _, c := range cases {
		off, local := p.Piece(c.pl, shape, c.device)
		if !equalInts(off, c.off) || !local.Equal(c.local) {
			t.Errorf("%s on device %d: offset %v shape %v, want %v %v", c.pl, c.device, off, local, c.off, c.local)
		}
	}
	if pieces, rank := p.AxisPieces(spmd.AxisRanks, spmd.G(0, 1), shape, 2); !equalInts(pieces, []int{2, 0}) || rank != 1 {
		t.Errorf("nested pieces of replica 1: %v rank %d, want [2 0] rank 1", pieces, rank)
	}
	if pieces, rank := p.AxisPieces(spmd.AxisReplicas, spmd.G(0, 0), shape, 1); !equalInts(pieces, []int{4, 2}) || rank != 0 {
		t.Errorf("pieces across replicas: %v rank %d, want [4 2] rank 0", pieces, rank)
	}
}

// A hand-broken 2-D program: without an all-gather among a replica's ranks
// (tensor parallelism's change back to whole activations), its consumer's
// precondition fails, and the error names the tensor and the placement it
// needs.
func TestMeshCheckNamesTheUnmetPrecondition(t *testing.T) {
	g, p := meshProgram(t, "bert-moe-tiny", "paper-16")
	if err := spmd.Check(g, p); err != nil {
		t.Fatalf("megatron program invalid: %v", err)
	}
	gap := -1
	for i, in := range p.Instrs {
		if in.Kind == spmd.Comm && in.Axis == spmd.AxisRanks && in.Collective == ir.OpAllGather {
			gap = i
			break
		}
	}
	if gap < 0 {
		t.Fatal("no all-gather among ranks in megatron's bert-moe-tiny program")
	}
	dropped := p.Instrs[gap]
	broken := *p
	broken.Instrs = append(append([]spmd.Instr{}, p.Instrs[:gap]...), p.Instrs[gap+1:]...)
	err := spmd.Check(g, &broken)
	var ie *spmd.InstrError
	if !errors.As(err, &ie) || !errors.Is(err, spmd.ErrPrecondition) {
		t.Fatalf("Check = %v, want an InstrError wrapping ErrPrecondition", err)
	}
	want := spmd.Placement{Outer: dropped.Other, Inner: dropped.To}.String()
	if name := g.Tensors[dropped.Tensor].Name; !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %q needed as %s", err, name, want)
	}
	if ie.Index < gap {
		t.Errorf("error at instruction %d, before the gap at %d", ie.Index, gap)
	}
}

func TestMeshCheckRejectsStructuralMistakes(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(g *ir.Graph, p *spmd.Program)
		want   string
	}{
		{"device twice", func(_ *ir.Graph, p *spmd.Program) { p.Mesh.Replicas[1][0] = p.Mesh.Replicas[0][0] }, "twice"},
		{"short replica", func(_ *ir.Graph, p *spmd.Program) { p.Mesh.Replicas[2] = p.Mesh.Replicas[2][:1] }, "every replica has the same ranks"},
		{"replica lengths do not sum", func(_ *ir.Graph, p *spmd.Program) { p.Mesh.Segments[0].Lengths[0]++ }, "sum to"},
		{"nested lengths disagree", func(_ *ir.Graph, p *spmd.Program) {
			s := &p.Segments[0]
			s.Lengths[0], s.Lengths[len(s.Lengths)-1] = s.Lengths[0]-1, s.Lengths[len(s.Lengths)-1]+1
		}, "but mesh segment 0 gives it"},
		{"nested split without the replicas' split", func(g *ir.Graph, p *spmd.Program) {
			// Labels whole on every replica, then cut among ranks by
			// the nested segment: which replica's share would that be?
			for i, lf := range p.Leaves {
				if g.Tensors[lf.Tensor].Kind == ir.Label {
					p.Leaves[i].Outer = spmd.I
				}
			}
			for i, in := range p.Instrs {
				if in.Kind == spmd.Comm && g.Tensors[in.Tensor].Kind == ir.Label {
					p.Instrs[i].Other = spmd.I
				}
			}
		}, "splits each replica's share"},
		{"rule across replicas is not a rule", func(g *ir.Graph, p *spmd.Program) {
			for i := range p.Instrs {
				if p.Instrs[i].Kind == spmd.Compute && g.Ops[p.Instrs[i].Op].Kind == ir.OpLayerNorm {
					p.Instrs[i].Outer.Out = []spmd.Layout{spmd.R}
					return
				}
			}
		}, "not a sharding rule of layer_norm across replicas"},
		{"no mesh", func(_ *ir.Graph, p *spmd.Program) { p.Mesh = nil }, "no mesh"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, p := meshProgram(t, "bert-base-tiny", "paper-16")
			c.break_(g, p)
			err := spmd.Check(g, p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check = %v, want an error mentioning %q", err, c.want)
			}
		})
	}
}

// A 1-D program may not use the mesh fields.
func TestOneDProgramRejectsMeshFields(t *testing.T) {
	g, p := dpProgram(t, "bert-base-tiny")
	for i := range p.Instrs {
		if p.Instrs[i].Kind == spmd.Comm {
			p.Instrs[i].Axis = spmd.AxisReplicas
			break
		}
	}
	if err := spmd.Check(g, p); err == nil || !strings.Contains(err.Error(), "needs a mesh program") {
		t.Errorf("Check = %v, want a complaint about communication across replicas", err)
	}
}
