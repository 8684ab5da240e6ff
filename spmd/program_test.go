package spmd_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"hap/cluster"
	"hap/ir"
	"hap/models"
	"hap/spmd"
	"hap/strategy"
)

func dpProgram(t *testing.T, model string) (*ir.Graph, *spmd.Program) {
	t.Helper()
	g, err := models.Load(model, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Load("paper-8")
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build("tp", g, c)
	if err != nil {
		t.Fatal(err)
	}
	return g, p
}

// A hand-broken plan gets an error naming the first instruction whose
// precondition does not hold.
func TestCheckNamesTheUnmetPrecondition(t *testing.T) {
	g, p := dpProgram(t, "bert-base-tiny")
	if err := spmd.Check(g, p); err != nil {
		t.Fatalf("strategy program invalid: %v", err)
	}
	// Drop the first communication instruction: its consumer now reads a
	// layout nobody established.
	first := -1
	for i, in := range p.Instrs {
		if in.Kind == spmd.Comm && ir.IsCollective(in.Collective) {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatal("tp program has no collective")
	}
	dropped := p.Instrs[first]
	broken := *p
	broken.Instrs = append(append([]spmd.Instr{}, p.Instrs[:first]...), p.Instrs[first+1:]...)
	err := spmd.Check(g, &broken)
	var ie *spmd.InstrError
	if !errors.As(err, &ie) || !errors.Is(err, spmd.ErrPrecondition) {
		t.Fatalf("Check = %v, want an InstrError wrapping ErrPrecondition", err)
	}
	name := g.Tensors[dropped.Tensor].Name
	if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), dropped.To.String()) {
		t.Errorf("error %q does not name %q needed as %s", err, name, dropped.To)
	}
	if ie.Index < first {
		t.Errorf("error at instruction %d, before the gap at %d", ie.Index, first)
	}
}

func TestCheckRejectsStructuralMistakes(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(g *ir.Graph, p *spmd.Program)
		want   string
	}{
		{"lengths do not sum", func(_ *ir.Graph, p *spmd.Program) { p.Segments[0].Lengths[0]++ }, "sum to"},
		{"negative length", func(_ *ir.Graph, p *spmd.Program) {
			p.Segments[0].Lengths[0]--
			p.Segments[0].Lengths[1] = -1
		}, "negative"},
		{"op twice", func(_ *ir.Graph, p *spmd.Program) {
			for _, in := range p.Instrs {
				if in.Kind == spmd.Compute {
					p.Instrs = append(p.Instrs, in)
					return
				}
			}
		}, "runs twice"},
		{"wrong collective", func(_ *ir.Graph, p *spmd.Program) {
			for i := range p.Instrs {
				if p.Instrs[i].Collective == ir.OpAllReduce {
					p.Instrs[i].Collective = ir.OpAllGather
					return
				}
				if p.Instrs[i].Collective == ir.OpAllGather {
					p.Instrs[i].Collective = ir.OpAllReduce
					return
				}
			}
		}, "does not turn"},
		{"bogus rule", func(g *ir.Graph, p *spmd.Program) {
			for i := range p.Instrs {
				if p.Instrs[i].Kind == spmd.Compute && g.Ops[p.Instrs[i].Op].Kind == ir.OpLayerNorm {
					p.Instrs[i].Rule.Out = []spmd.Layout{spmd.R}
					return
				}
			}
		}, "not a sharding rule"},
		{"loss not reduce", func(g *ir.Graph, p *spmd.Program) {
			last := &p.Instrs[len(p.Instrs)-1]
			last.Rule = spmd.Rule{Name: "replicated", In: []spmd.Layout{spmd.I, spmd.I}, Out: []spmd.Layout{spmd.I}}
		}, ""},
		{"missing leaf", func(_ *ir.Graph, p *spmd.Program) { p.Leaves = p.Leaves[1:] }, "has no layout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, p := dpProgram(t, "bert-base-tiny")
			c.break_(g, p)
			err := spmd.Check(g, p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check = %v, want an error mentioning %q", err, c.want)
			}
		})
	}
}

func TestRoundLengths(t *testing.T) {
	cases := []struct {
		units  int
		shares []float64
		want   []int
	}{
		{32, []float64{1, 1, 1, 1}, []int{8, 8, 8, 8}},
		{10, []float64{1.8, 1, 1}, []int{5, 3, 2}},
		{3, []float64{1, 1, 1, 1, 1}, []int{1, 1, 1, 0, 0}},
		{7, []float64{0, 1, 1}, []int{0, 4, 3}},
	}
	for _, c := range cases {
		got := spmd.RoundLengths(c.units, c.shares)
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("RoundLengths(%d, %v) = %v, want %v", c.units, c.shares, got, c.want)
				break
			}
		}
	}
}

func TestLayoutTextRoundTrip(t *testing.T) {
	for _, l := range []spmd.Layout{spmd.I, spmd.R, spmd.G(0, 0), spmd.G(3, 12)} {
		b, _ := l.MarshalText()
		var back spmd.Layout
		if err := back.UnmarshalText(b); err != nil || back != l {
			t.Errorf("%s: round trip gave %s, %v", l, back, err)
		}
	}
	var l spmd.Layout
	for _, bad := range []string{"", "Gather", "Gather(-1,s0)", "Gather(1,x0)", "identity"} {
		if l.UnmarshalText([]byte(bad)) == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// No collective moves integer tensors (token ids, labels): the runtimes'
// collectives are floating-point, and slicing Identity is all they need.
func TestCheckRejectsIntegerCollectives(t *testing.T) {
	g, err := models.Load("bert-base-tiny", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Load("paper-8")
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build("dp-ev", g, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, lf := range p.Leaves {
		tt := &g.Tensors[lf.Tensor]
		if tt.DType.IsFloat() || lf.Layout.Kind != spmd.Gather {
			continue
		}
		gather := spmd.Instr{Kind: spmd.Comm, Tensor: lf.Tensor, From: lf.Layout, To: spmd.I, Collective: ir.OpAllGather}
		p.Instrs = append([]spmd.Instr{gather}, p.Instrs...)
		err := spmd.Check(g, p)
		if err == nil || !strings.Contains(err.Error(), "integers") || !strings.Contains(err.Error(), tt.Name) {
			t.Fatalf("Check = %v, want an error saying no collective moves %q", err, tt.Name)
		}
		return
	}
	t.Fatal("dp-ev holds no integer leaf as Gather")
}

// SegmentsUsed finds a segment through any of the layouts that can name
// it: a leaf's, a rule's input or output, a layout change's from or to.
func TestSegmentsUsed(t *testing.T) {
	segs := make([]spmd.Segment, 6)
	p := &spmd.Program{Devices: 2, Segments: segs,
		Leaves: []spmd.LeafLayout{{Layout: spmd.G(0, 0)}, {Layout: spmd.I}},
		Instrs: []spmd.Instr{
			{Kind: spmd.Compute, Rule: spmd.Rule{In: []spmd.Layout{spmd.G(1, 1)}, Out: []spmd.Layout{spmd.R}}},
			{Kind: spmd.Compute, Rule: spmd.Rule{In: []spmd.Layout{spmd.I}, Out: []spmd.Layout{spmd.G(0, 2)}}},
			{Kind: spmd.Comm, From: spmd.G(0, 3), To: spmd.I},
			{Kind: spmd.Comm, From: spmd.I, To: spmd.G(1, 5)},
		}}
	want := []bool{true, true, true, true, false, true}
	if got := p.SegmentsUsed(); !slices.Equal(got, want) {
		t.Errorf("SegmentsUsed = %v, want %v", got, want)
	}
}
