package plan

import (
	"math"
	"sort"
	"strings"

	"hap/devprog"
	"hap/ir"
	"hap/sim"
)

// Bottleneck is the busiest device of a simulated step and what keeps it
// busy: each forward op's kernels (forward and backward) and each
// tensor's layout changes and update, by the seconds they take on that
// device's two streams. It answers "which device and which op limit this
// plan" for hap explain.
type Bottleneck struct {
	Device int
	Type   string
	// Busy is the seconds at least one of the device's streams is busy,
	// of Step, the simulated step.
	Busy, Step float64
	// Compute and Comm are the busy seconds of its two streams.
	Compute, Comm float64
	// Sources are the device's instructions grouped by the forward op or
	// tensor they come from, the costliest (compute + communication)
	// first; equal times (within sameTime) by name.
	Sources []Source
}

// Source is one forward op or one tensor of the graph and the time its
// instructions take on a device.
type Source struct {
	// Name is the op's or the tensor's name; Op tells which, and OpKind is
	// the op's kind ("" for a tensor).
	Name   string
	Op     bool
	OpKind ir.OpKind
	// Compute and Comm are the seconds its instructions run on the
	// device's compute and communication streams; Instrs how many there are.
	Compute, Comm float64
	Instrs        int
}

// Seconds is the source's total time on the device.
func (s Source) Seconds() float64 { return s.Compute + s.Comm }

// sameTime is the relative difference below which two sources' times
// count as equal and order by name: the same instructions of two
// identical layers differ in the last bits when summed in another order.
const sameTime = 1e-9

// FindBottleneck returns the busiest device of res, a simulation of a
// program lowered from g, and the sources of its time. Lowering names
// every instruction within the scope of what it comes from — an op's
// kernels "<op>.<kernel>", its backward "<op>.<kernel>.grad.<kernel>", a
// tensor's layout change "<tensor>.comm.<collective>" and its update
// "<tensor>.update.<kernel>" — so an instruction belongs to the op or
// tensor whose name is its longest prefix (at a dot); backward's seed, the
// loss's gradient, belongs to the loss. Instructions no
// name prefixes are grouped under their own name.
func FindBottleneck(g *ir.Graph, res *sim.Result) Bottleneck {
	busiest := 0
	busy := func(d sim.DeviceStats) float64 { return d.Compute + d.Comm - d.Overlap }
	for i, d := range res.Devices {
		if busy(d) > busy(res.Devices[busiest]) {
			busiest = i
		}
	}
	dev := res.Devices[busiest]
	b := Bottleneck{Device: dev.Device, Type: dev.Type, Busy: busy(dev), Step: res.StepSeconds, Compute: dev.Compute, Comm: dev.Comm}

	ops := map[string]ir.OpKind{}
	for i := range g.Ops {
		ops[g.Ops[i].Name] = g.Ops[i].Kind
	}
	tensors := map[string]bool{}
	for i := range g.Tensors {
		tensors[g.Tensors[i].Name] = true
	}
	type key struct {
		name string
		op   bool
	}
	bySource := map[key]*Source{}
	for _, ev := range res.Events {
		if ev.Device != dev.Device {
			continue
		}
		comm := ev.Stream == devprog.StreamComm
		src := attribute(ev.Name, ops, tensors, comm)
		if strings.HasPrefix(ev.Name, ir.LossGradScope+".") {
			src = Source{Name: g.Tensors[g.Loss].Name} // backward's seed
		}
		k := key{src.Name, src.Op}
		s := bySource[k]
		if s == nil {
			s = &src
			bySource[k] = s
		}
		if comm {
			s.Comm += ev.End - ev.Start
		} else {
			s.Compute += ev.End - ev.Start
		}
		s.Instrs++
	}
	for _, s := range bySource {
		b.Sources = append(b.Sources, *s)
	}
	sort.Slice(b.Sources, func(i, j int) bool {
		a, c := b.Sources[i], b.Sources[j]
		if math.Abs(a.Seconds()-c.Seconds()) > sameTime*max(a.Seconds(), c.Seconds()) {
			return a.Seconds() > c.Seconds()
		}
		if a.Name != c.Name {
			return a.Name < c.Name
		}
		return a.Op
	})
	return b
}

// attribute finds the op or tensor an instruction's name is scoped under:
// the longest dot-bounded prefix naming one. A kernel prefers an op of
// that name and a collective a tensor, since an op and a tensor may share
// a name.
func attribute(name string, ops map[string]ir.OpKind, tensors map[string]bool, comm bool) Source {
	for p := name; p != ""; {
		kind, isOp := ops[p]
		isTensor := tensors[p]
		switch {
		case isOp && (!comm || !isTensor):
			return Source{Name: p, Op: true, OpKind: kind}
		case isTensor:
			return Source{Name: p}
		}
		dot := strings.LastIndexByte(p, '.')
		if dot < 0 {
			break
		}
		p = p[:dot]
	}
	return Source{Name: name}
}
