package cpu_test

import (
	"math"
	"testing"

	"hap/cpu"
	"hap/ir"
	"hap/models"
)

func trainStep(t *testing.T, name string, dt ir.DType, opt ir.Optimizer) *ir.Graph {
	t.Helper()
	fwd, err := models.Load(name, models.Options{DType: dt})
	if err != nil {
		t.Fatal(err)
	}
	g, err := ir.BuildTrainStep(fwd, opt)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The acceptance check: 50 steps of bert-base-tiny on a fixed
// synthetic batch lower the loss.
func TestBertBaseTinyLossFalls(t *testing.T) {
	g := trainStep(t, "bert-base-tiny", ir.Float32, ir.Adam(1e-2))
	tr, err := cpu.NewTrainer[float32](g, 1)
	if err != nil {
		t.Fatal(err)
	}
	batch := cpu.SyntheticBatch[float32](g, 2)
	var first, last float64
	for i := 0; i < 50; i++ {
		res, err := tr.Step(nil, batch)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = res.Loss
		}
		last = res.Loss
	}
	if !(last < 0.5*first) {
		t.Fatalf("loss went from %.4g to %.4g in 50 steps; want it at least halved", first, last)
	}
}

// Every tiny zoo model trains a few steps in both precisions, and float32
// tracks the float64 reference.
func TestZooTinyModelsTrainAndPrecisionsAgree(t *testing.T) {
	// float32Tolerance bounds the relative loss difference between float32
	// and float64 runs after three SGD steps: float32 rounding (~1e-7)
	// amplified through a few hundred ops.
	const float32Tolerance = 1e-4
	for _, name := range models.Names() {
		if len(name) < 5 || name[len(name)-5:] != "-tiny" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			g64 := trainStep(t, name, ir.Float64, ir.SGD(1e-3))
			g32 := trainStep(t, name, ir.Float32, ir.SGD(1e-3))
			t64, _ := cpu.NewTrainer[float64](g64, 3)
			t32, _ := cpu.NewTrainer[float32](g32, 3)
			b64 := cpu.SyntheticBatch[float64](g64, 4)
			b32 := cpu.SyntheticBatch[float32](g32, 4)
			for i := 0; i < 3; i++ {
				r64, err := t64.Step(nil, b64)
				if err != nil {
					t.Fatal(err)
				}
				r32, err := t32.Step(nil, b32)
				if err != nil {
					t.Fatal(err)
				}
				if rel := math.Abs(r64.Loss-r32.Loss) / math.Abs(r64.Loss); rel > float32Tolerance {
					t.Fatalf("step %d: float32 loss %.8g vs float64 %.8g (rel %.2g)", i, r32.Loss, r64.Loss, rel)
				}
			}
		})
	}
}

// Whole-model gradient check: autodiff through every tiny zoo model agrees
// with finite differences on a sample of parameter entries.
func TestZooTinyGradientsMatchFiniteDifferences(t *testing.T) {
	const (
		h      = 1e-6
		relTol = 1e-5 // looser than per-op: errors compound over ~60 ops
		probes = 6    // parameter entries probed per parameter tensor
	)
	for _, name := range []string{"mlp-tiny", "bert-base-tiny", "vit-tiny", "vgg19-tiny", "bert-moe-tiny", "gpt2-tiny"} {
		t.Run(name, func(t *testing.T) {
			fwd, err := models.Load(name, models.Options{DType: ir.Float64})
			if err != nil {
				t.Fatal(err)
			}
			g, err := ir.BuildTrainStep(fwd, ir.SGD(0))
			if err != nil {
				t.Fatal(err)
			}
			tr, _ := cpu.NewTrainer[float64](g, 5)
			batch := cpu.SyntheticBatch[float64](g, 6)
			feeds := map[ir.TensorID]*cpu.Tensor[float64]{}
			for k, v := range batch {
				feeds[k] = v
			}
			// Move every parameter off its initial value: zero biases feeding
			// dead ReLUs would otherwise sit exactly on the ReLU's kink, where
			// finite differences see half the slope.
			noise := cpu.SyntheticBatch[float64](noiseGraph(g), 9)
			for i, p := range g.Train.Params {
				v := tr.Value(p.Param).Clone()
				for j := range v.Data {
					// Vectors (biases, norms) get small absolute noise; matrices
					// relative noise, so activations keep their scale and the
					// loss's rounding error stays far below h times its slope.
					if len(v.Shape) == 1 {
						v.Data[j] += 0.05 * noise[ir.TensorID(i)].Data[j]
					} else {
						v.Data[j] *= 1 + 0.3*noise[ir.TensorID(i)].Data[j]
					}
				}
				tr.SetValue(p.Param, v)
				feeds[p.Param] = v.Clone()
			}
			res, err := tr.Step(nil, batch)
			if err != nil {
				t.Fatal(err)
			}
			loss := func() float64 {
				v, err := cpu.Run(nil, fwd, feeds, []ir.TensorID{fwd.Loss})
				if err != nil {
					t.Fatal(err)
				}
				return v[fwd.Loss].Data[0]
			}
			for _, p := range g.Train.Params {
				x := feeds[p.Param]
				for j := 0; j < probes; j++ {
					i := (j*7919 + 13) % len(x.Data)
					orig := x.Data[i]
					x.Data[i] = orig + h
					up := loss()
					x.Data[i] = orig - h
					down := loss()
					x.Data[i] = orig
					num := (up - down) / (2 * h)
					ana := res.Grads[p.Param].Data[i]
					if math.Abs(num-ana) > relTol*math.Max(1, math.Abs(num)) {
						t.Errorf("%s[%d]: autodiff %.9g, finite difference %.9g", g.Tensors[p.Param].Name, i, ana, num)
					}
				}
			}
		})
	}
}

// noiseGraph declares one input per parameter of g (same shapes), so
// SyntheticBatch draws N(0,1) noise for each, keyed by slot index.
func noiseGraph(g *ir.Graph) *ir.Graph {
	n := &ir.Graph{}
	for i, p := range g.Train.Params {
		t := g.Tensors[p.Param]
		n.Tensors = append(n.Tensors, ir.Tensor{ID: ir.TensorID(i), Name: t.Name, Shape: t.Shape, DType: ir.Float64, Kind: ir.Input})
	}
	return n
}
