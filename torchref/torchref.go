// Package torchref is the reference check of an imported model: it reads
// what `hap import --reference DIR` wrote (PyTorch's float64 weights, one
// batch, PyTorch's loss and every parameter gradient for that batch), runs
// hap's single-device CPU step on the imported graph from those weights and
// that batch in float64, and compares hap's loss and gradients with
// PyTorch's. docs/import.md ("The reference check") describes the directory.
//
// torchref imports ir and cpu; the command line (hap verify
// --against-torch) sits above it.
package torchref

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"hap/cpu"
	"hap/ir"
)

// Format and Version identify the manifest the Python exporter writes
// (python/hap_torch/export.py, export_reference).
const (
	Format   = "hap.reference"
	Version  = 1
	Manifest = "manifest.json"
)

// Tolerance is the largest relative difference (see Diff.Rel) the check
// accepts between hap's and PyTorch's loss or any gradient. Both sides
// compute in float64 from the same weights and batch, so what remains is
// summation order: ~1e-15 per op, amplified through a few dozen layers.
const Tolerance = 1e-9

// tiny keeps the relative difference of an all-zero reference tensor
// finite: any difference from zero then counts as huge.
const tiny = 1e-300

// Entry is one tensor of the manifest.
type Entry struct {
	// Role is param, buffer, input or grad.
	Role  string `json:"role"`
	Name  string `json:"name"`
	DType string `json:"dtype"` // float64 or int64
	Shape []int  `json:"shape"`
	// File is the raw little-endian data, relative to the directory.
	File string `json:"file"`
}

// ManifestDoc is manifest.json.
type ManifestDoc struct {
	Format  string  `json:"format"`
	Version int     `json:"version"`
	Name    string  `json:"name"`
	Torch   string  `json:"torch"`
	Seed    int64   `json:"seed"`
	Loss    float64 `json:"loss"`
	// DropoutZeroed names the modules whose dropout the exporter set to 0.
	DropoutZeroed []string `json:"dropout_zeroed"`
	Tensors       []Entry  `json:"tensors"`
}

// Array is one tensor's values: Floats for float64, Ints for int64.
type Array struct {
	Shape  ir.Shape
	Floats []float64
	Ints   []int64
}

// Reference is a read reference directory.
type Reference struct {
	Dir string
	ManifestDoc
	// By role, then name.
	Params, Buffers, Inputs, Grads map[string]*Array
}

// Read reads dir's manifest and every tensor it lists.
func Read(dir string) (*Reference, error) {
	data, err := os.ReadFile(filepath.Join(dir, Manifest))
	if err != nil {
		return nil, fmt.Errorf("reading the reference: %w", err)
	}
	r := &Reference{Dir: dir, Params: map[string]*Array{}, Buffers: map[string]*Array{}, Inputs: map[string]*Array{}, Grads: map[string]*Array{}}
	if err := json.Unmarshal(data, &r.ManifestDoc); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, Manifest), err)
	}
	if r.Format != Format || r.Version != Version {
		return nil, fmt.Errorf("%s: format %q version %d; want %q version %d (written by hap import --reference)", filepath.Join(dir, Manifest), r.Format, r.Version, Format, Version)
	}
	for _, e := range r.Tensors {
		var m map[string]*Array
		switch e.Role {
		case "param":
			m = r.Params
		case "buffer":
			m = r.Buffers
		case "input":
			m = r.Inputs
		case "grad":
			m = r.Grads
		default:
			return nil, fmt.Errorf("reference %s: tensor %q has unknown role %q", dir, e.Name, e.Role)
		}
		if _, dup := m[e.Name]; dup {
			return nil, fmt.Errorf("reference %s: %s %q listed twice", dir, e.Role, e.Name)
		}
		a, err := readArray(dir, e)
		if err != nil {
			return nil, err
		}
		m[e.Name] = a
	}
	return r, nil
}

func readArray(dir string, e Entry) (*Array, error) {
	if e.File == "" || filepath.IsAbs(e.File) || strings.Contains(e.File, "..") {
		return nil, fmt.Errorf("reference %s: %s %q: file %q must be a name inside the directory", dir, e.Role, e.Name, e.File)
	}
	shape := ir.Shape(e.Shape)
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("reference %s: %s %q has shape %v", dir, e.Role, e.Name, e.Shape)
		}
	}
	path := filepath.Join(dir, e.File)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s %q: %w", e.Role, e.Name, err)
	}
	n := shape.Numel()
	if len(data) != 8*n {
		return nil, fmt.Errorf("%s: %d bytes; %s %q %v needs %d (8 per element)", path, len(data), e.Role, e.Name, e.Shape, 8*n)
	}
	a := &Array{Shape: shape.Clone()}
	switch e.DType {
	case "float64":
		a.Floats = make([]float64, n)
		for i := range a.Floats {
			a.Floats[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
	case "int64":
		a.Ints = make([]int64, n)
		for i := range a.Ints {
			a.Ints[i] = int64(binary.LittleEndian.Uint64(data[8*i:]))
		}
	default:
		return nil, fmt.Errorf("reference %s: %s %q is %s; want float64 or int64", dir, e.Role, e.Name, e.DType)
	}
	return a, nil
}

// Diff is how far hap's value of one tensor (the loss, or a parameter's
// gradient) is from PyTorch's.
type Diff struct {
	Name string `json:"name"`
	// MaxAbs is max|hap − torch| over the tensor's elements.
	MaxAbs float64 `json:"max_abs"`
	// Scale is max|torch| over the tensor.
	Scale float64 `json:"scale"`
	// Rel is MaxAbs / max(Scale, tiny): normwise, so that entries near
	// zero do not inflate it; for a gradient, the scale is at least
	// zeroGradientFloor of the largest gradient's.
	Rel float64 `json:"rel"`
}

func diff(name string, got, want []float64) Diff {
	d := Diff{Name: name}
	for i := range want {
		d.Scale = math.Max(d.Scale, math.Abs(want[i]))
		e := math.Abs(got[i] - want[i])
		if math.IsNaN(e) {
			e = math.Inf(1)
		}
		d.MaxAbs = math.Max(d.MaxAbs, e)
	}
	if d.MaxAbs > 0 {
		d.Rel = d.MaxAbs / math.Max(d.Scale, tiny)
	}
	return d
}

// zeroGradientFloor is the smallest scale, as a share of the largest
// gradient's, that a gradient's difference is measured against. Some
// gradients are zero in exact arithmetic (a key projection's bias: softmax
// ignores a shift shared by all keys), and both sides then hold rounding
// noise — about 1e-17 in float64 — whose relative difference is of order
// 1. Against a millionth of the largest gradient that noise is ~1e-11,
// far under Tolerance, while an error of Tolerance in a gradient of that
// size still fails.
const zeroGradientFloor = 1e-6

// floorGradients re-measures each gradient's Rel against at least
// zeroGradientFloor of the largest gradient's scale.
func floorGradients(grads []Diff) {
	var largest float64
	for _, d := range grads {
		largest = math.Max(largest, d.Scale)
	}
	for i := range grads {
		if d := &grads[i]; d.MaxAbs > 0 {
			d.Rel = d.MaxAbs / math.Max(math.Max(d.Scale, zeroGradientFloor*largest), tiny)
		}
	}
}

// Report is the outcome of Check.
type Report struct {
	Model string `json:"model"`
	// Loss is hap's loss against PyTorch's; Grads every parameter's
	// gradient, in the graph's parameter order.
	Loss  Diff   `json:"loss"`
	Grads []Diff `json:"grads"`
	// Worst is the entry (the loss or a gradient) with the largest Rel.
	Worst Diff `json:"worst"`
	// HapLoss and TorchLoss are the two losses.
	HapLoss   float64 `json:"hap_loss"`
	TorchLoss float64 `json:"torch_loss"`
	// Dropouts is how many dropout ops of the graph ran at rate 0.
	Dropouts int `json:"dropouts_zeroed"`
	// Params is the number of parameter elements set from the reference.
	Params int64 `json:"params"`
}

// Pass reports whether every difference is within tol.
func (r *Report) Pass(tol float64) bool { return r.Worst.Rel <= tol }

// Check runs one single-device float64 training step of the forward graph
// g on the CPU, its parameters and state tensors set from ref by name and
// its inputs and labels fed from ref's batch, with every dropout at rate 0
// (PyTorch's ran at p = 0 too), and compares hap's loss and parameter
// gradients (before any update) with ref's. g is not modified. A
// parameter, state tensor or input missing from ref, one ref holds that g
// lacks, or a shape that differs is an error naming it.
func Check(g *ir.Graph, ref *Reference) (*Report, error) {
	g = g.Clone()
	rep := &Report{Model: g.Name, TorchLoss: ref.Loss}
	for i := range g.Ops {
		if op := &g.Ops[i]; op.Kind == ir.OpDropout {
			op.Attrs.Rate = 0
			rep.Dropouts++
		}
	}
	step, err := ir.BuildTrainStep(g, ir.SGD(0))
	if err != nil {
		return nil, fmt.Errorf("the training step of %s: %w", g.Name, err)
	}
	tr, err := cpu.NewTrainer[float64](step, 0)
	if err != nil {
		return nil, err
	}
	batch := map[ir.TensorID]*cpu.Tensor[float64]{}
	seen := map[string]map[string]bool{"param": {}, "buffer": {}, "input": {}}
	for i := range g.Tensors {
		t := &g.Tensors[i]
		var role string
		var from map[string]*Array
		switch t.Kind {
		case ir.Param:
			role, from = "param", ref.Params
		case ir.State:
			role, from = "buffer", ref.Buffers
		case ir.Input, ir.Label:
			role, from = "input", ref.Inputs
		default:
			continue
		}
		a, name, err := lookup(from, t)
		if err != nil {
			return nil, fmt.Errorf("the reference %s: %w", ref.Dir, err)
		}
		if a == nil {
			return nil, fmt.Errorf("the reference %s has no %s %q (%s%v) of graph %s", ref.Dir, role, name, t.DType, t.Shape, g.Name)
		}
		seen[role][name] = true
		v, err := value(role, t, a)
		if err != nil {
			return nil, fmt.Errorf("reference %s: %w", ref.Dir, err)
		}
		if role == "input" {
			batch[t.ID] = v
		} else {
			tr.SetValue(t.ID, v)
		}
		if role == "param" {
			rep.Params += int64(t.Shape.Numel())
		}
	}
	// A parameter or input the graph lacks means the graph is not the
	// model the reference ran; a buffer it never reads is harmless (the
	// importer declares leaves on first use).
	for _, m := range []struct {
		role string
		of   map[string]*Array
	}{{"param", ref.Params}, {"input", ref.Inputs}} {
		for _, name := range sortedNames(m.of) {
			if !seen[m.role][name] {
				return nil, fmt.Errorf("the reference %s has %s %q %v, which graph %s lacks (is it the graph imported from the same factory?)", ref.Dir, m.role, name, m.of[name].Shape, g.Name)
			}
		}
	}
	res, err := tr.Step(nil, batch)
	if err != nil {
		return nil, fmt.Errorf("hap's step on %s: %w", g.Name, err)
	}
	rep.HapLoss = res.Loss
	rep.Loss = diff("loss", []float64{res.Loss}, []float64{ref.Loss})
	rep.Worst = rep.Loss
	for _, ps := range step.Train.Params {
		t := &g.Tensors[ps.Param]
		want, name, err := lookup(ref.Grads, t)
		if err != nil {
			return nil, fmt.Errorf("the reference %s: the gradient of %w", ref.Dir, err)
		}
		if want == nil {
			return nil, fmt.Errorf("the reference %s has no gradient of parameter %q (PyTorch computed none: requires_grad off, or the loss does not reach it)", ref.Dir, name)
		}
		if !want.Shape.Equal(t.Shape) || want.Floats == nil {
			return nil, fmt.Errorf("the reference %s: the gradient of %q is %s%v; want float64%v", ref.Dir, t.Name, dtypeOf(want), want.Shape, t.Shape)
		}
		got := res.Grads[ps.Param]
		rep.Grads = append(rep.Grads, diff(t.Name, got.Data, want.Floats))
	}
	floorGradients(rep.Grads)
	for _, d := range rep.Grads {
		if d.Rel > rep.Worst.Rel {
			rep.Worst = d
		}
	}
	return rep, nil
}

// lookup finds graph tensor t's array in m by name, or, for a parameter the
// importer cut out of a packed one (t.Part), the piece of the packed
// array; name is the name looked up. A nil array means m has none.
func lookup(m map[string]*Array, t *ir.Tensor) (a *Array, name string, err error) {
	if t.Part.IsZero() {
		return m[t.Name], t.Name, nil
	}
	p := t.Part
	whole := m[p.Of]
	if whole == nil {
		return nil, p.Of, nil
	}
	if p.Axis >= len(whole.Shape) || p.End > whole.Shape[p.Axis] || p.Start < 0 || p.Start > p.End {
		return nil, p.Of, fmt.Errorf("%q is %v, which has no [%d, %d) along axis %d for piece %q", p.Of, whole.Shape, p.Start, p.End, p.Axis, t.Name)
	}
	return slice(whole, p.Axis, p.Start, p.End), p.Of, nil
}

// slice is a's indices [start, end) along axis.
func slice(a *Array, axis, start, end int) *Array {
	outer, inner := 1, 1
	for i, d := range a.Shape {
		switch {
		case i < axis:
			outer *= d
		case i > axis:
			inner *= d
		}
	}
	shape := a.Shape.Clone()
	shape[axis] = end - start
	out := &Array{Shape: shape}
	size := a.Shape[axis]
	for o := 0; o < outer; o++ {
		lo, hi := (o*size+start)*inner, (o*size+end)*inner
		if a.Ints != nil {
			out.Ints = append(out.Ints, a.Ints[lo:hi]...)
		} else {
			out.Floats = append(out.Floats, a.Floats[lo:hi]...)
		}
	}
	return out
}

// value is the tensor of a for graph tensor t, refused when its shape or
// kind of element differs.
func value(role string, t *ir.Tensor, a *Array) (*cpu.Tensor[float64], error) {
	if !a.Shape.Equal(t.Shape) {
		return nil, fmt.Errorf("%s %q is %v; the graph's is %v", role, t.Name, a.Shape, t.Shape)
	}
	if (t.DType == ir.Int64) != (a.Ints != nil) {
		return nil, fmt.Errorf("%s %q is %s; the graph's is %s", role, t.Name, dtypeOf(a), t.DType)
	}
	if a.Ints != nil {
		return &cpu.Tensor[float64]{Shape: a.Shape.Clone(), Ints: append([]int64{}, a.Ints...)}, nil
	}
	return &cpu.Tensor[float64]{Shape: a.Shape.Clone(), Data: append([]float64{}, a.Floats...)}, nil
}

func dtypeOf(a *Array) string {
	if a.Ints != nil {
		return "int64"
	}
	return "float64"
}

func sortedNames(m map[string]*Array) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
