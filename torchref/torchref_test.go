package torchref

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hap/cpu"
	"hap/importer"
	"hap/ir"
)

// mlpGraph is the imported MLP example (its trace is in importer's
// testdata, so no torch is needed).
func mlpGraph(t *testing.T) *ir.Graph {
	t.Helper()
	data, err := os.ReadFile("../importer/testdata/mlp.aten.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := importer.Import(data)
	if err != nil {
		t.Fatal(err)
	}
	return res.Graph
}

// writeSelfReference writes a reference for g computed by hap itself:
// hap's initial parameters, a synthetic batch, and the loss and gradients
// of one step with dropout at rate 0.
func writeSelfReference(t *testing.T, g *ir.Graph, dir string) {
	t.Helper()
	h := g.Clone()
	for i := range h.Ops {
		if h.Ops[i].Kind == ir.OpDropout {
			h.Ops[i].Attrs.Rate = 0
		}
	}
	step, err := ir.BuildTrainStep(h, ir.SGD(0))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cpu.NewTrainer[float64](step, 7)
	if err != nil {
		t.Fatal(err)
	}
	m := ManifestDoc{Format: Format, Version: Version, Name: g.Name, Torch: "none"}
	write := func(role, name string, v *cpu.Tensor[float64]) {
		e := Entry{Role: role, Name: name, DType: "float64", Shape: v.Shape, File: role + "." + name + ".bin"}
		var buf []byte
		if v.Ints != nil {
			e.DType = "int64"
			for _, x := range v.Ints {
				buf = binary.LittleEndian.AppendUint64(buf, uint64(x))
			}
		} else {
			for _, x := range v.Data {
				buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(x))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, e.File), buf, 0o644); err != nil {
			t.Fatal(err)
		}
		m.Tensors = append(m.Tensors, e)
	}
	batch := cpu.SyntheticBatch[float64](g, 8)
	for i := range g.Tensors {
		x := &g.Tensors[i]
		switch x.Kind {
		case ir.Param:
			write("param", x.Name, tr.Value(x.ID))
		case ir.Input, ir.Label:
			write("input", x.Name, batch[x.ID])
		}
	}
	res, err := tr.Step(nil, batch)
	if err != nil {
		t.Fatal(err)
	}
	m.Loss = res.Loss
	for _, ps := range step.Train.Params {
		write("grad", g.Tensors[ps.Param].Name, res.Grads[ps.Param])
	}
	data, err := json.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, Manifest), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A reference hap wrote itself matches exactly, the graph is left as it
// was, and a perturbed gradient is the worst tensor.
func TestCheckSelfReference(t *testing.T) {
	g := mlpGraph(t)
	dir := t.TempDir()
	writeSelfReference(t, g, dir)
	ref, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Check(g, ref)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Worst.Rel != 0 || len(rep.Grads) != 6 || rep.Dropouts != 1 || !rep.Pass(Tolerance) {
		t.Errorf("report %+v: want an exact match over 6 gradients and 1 dropout", rep)
	}
	for i := range g.Ops {
		if g.Ops[i].Kind == ir.OpDropout && g.Ops[i].Attrs.Rate == 0 {
			t.Errorf("Check zeroed the caller's dropout %s", g.Ops[i].Name)
		}
	}
	w := ref.Grads["5.weight"].Floats
	w[3] += 1e-6 * math.Max(1, math.Abs(w[3]))
	if rep, err = Check(g, ref); err != nil {
		t.Fatal(err)
	}
	if rep.Worst.Name != "5.weight" || rep.Pass(Tolerance) {
		t.Errorf("worst %+v: want 5.weight over the tolerance", rep.Worst)
	}
}

// Read refuses a directory that is not a reference, and a file whose size
// does not fit its shape, naming it.
func TestReadRefuses(t *testing.T) {
	g := mlpGraph(t)
	dir := t.TempDir()
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), Manifest) {
		t.Errorf("empty directory: %v", err)
	}
	writeSelfReference(t, g, dir)
	if err := os.WriteFile(filepath.Join(dir, "grad.0.bias.bin"), make([]byte, 12), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "grad.0.bias.bin: 12 bytes") {
		t.Errorf("short file: %v", err)
	}
}

// A gradient zero in exact arithmetic holds rounding noise on both sides:
// measured against the largest gradient's floor it passes, while an error
// past Tolerance of that floor in the same gradient still fails.
func TestZeroGradientsAreMeasuredAgainstAFloor(t *testing.T) {
	grads := []Diff{
		diff("w", []float64{1, 2}, []float64{1, 2}),
		diff("k.bias", []float64{3.7e-17}, []float64{-1e-17}),
	}
	floorGradients(grads)
	if grads[1].Rel > Tolerance {
		t.Errorf("noise on a zero gradient: rel %g; want ≤ %g", grads[1].Rel, Tolerance)
	}
	wrong := []Diff{
		diff("w", []float64{1, 2}, []float64{1, 2}),
		diff("k.bias", []float64{2 * 2 * zeroGradientFloor * Tolerance}, []float64{0}),
	}
	floorGradients(wrong)
	if wrong[1].Rel <= Tolerance {
		t.Errorf("an error of 2·Tolerance against the floor: rel %g passes", wrong[1].Rel)
	}
}
