package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hap/ir"
	"hap/torchref"
)

// importWithReference runs hap import FILE.py:FACTORY --reference on a
// factory (a file of examples/torch, or a path from here) and returns the
// graph and the reference directory.
func importWithReference(t *testing.T, py, factory string) (graph, ref string) {
	t.Helper()
	dir := t.TempDir()
	file, fn, _ := strings.Cut(factory, ":")
	if !strings.Contains(file, "/") {
		file = filepath.Join("../../examples/torch", file)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	graph, ref = filepath.Join(dir, "model.json"), filepath.Join(dir, "ref")
	code, _, errs := runCLI("import", abs+":"+fn, "--python", py, "-o", graph, "--reference", ref)
	if code != 0 {
		t.Fatalf("import --reference: exit %d: %s", code, errs)
	}
	return graph, ref
}

// countKind reads an imported graph and counts its ops of kind k.
func countKind(t *testing.T, graph string, k ir.OpKind) int {
	t.Helper()
	data, err := os.ReadFile(graph)
	if err != nil {
		t.Fatal(err)
	}
	g, err := ir.DecodeJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", graph, err)
	}
	n := 0
	for i := range g.Ops {
		if g.Ops[i].Kind == k {
			n++
		}
	}
	return n
}

// checkAgainstTorch runs hap verify --against-torch --json and returns the
// exit code, the report and stderr.
func checkAgainstTorch(t *testing.T, graph, ref string) (int, *torchref.Report, string) {
	t.Helper()
	code, out, errs := runCLI("verify", "--against-torch", ref, "--model", graph, "--json")
	if out == "" {
		return code, nil, errs
	}
	var rep torchref.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify --json: %v: %s", err, out)
	}
	return code, &rep, errs
}

// hap's single-device float64 step on each imported example, from
// PyTorch's weights and batch, gives PyTorch's loss and gradients. The
// examples with silu(a)·b import it as swiglu ops, and no other does.
func TestAgainstTorchEndToEnd(t *testing.T) {
	py := torchPython(t)
	swiglus := map[string]int{
		"testdata/torchref/ops.py:mobile": 1, // silu(bn(h)) · hardsigmoid(h)
		"testdata/torchref/ops.py:swiglu": 1,
		"llama.py:tiny":                   2, // one a layer
	}
	for _, c := range []struct {
		factory  string
		grads    int // parameter tensors
		dropouts int // dropout ops run at rate 0
	}{
		{"mlp.py:model", 6, 1},
		{"vgg_cifar.py:narrow", 22, 2},
		{"transformer_encoder.py:model", 51, 9}, // in_proj_weight and in_proj_bias: 3 pieces each
		{"testdata/torchref/ops.py:mixed", 41, 6},
		{"testdata/torchref/ops.py:cnn", 5, 0},
		{"testdata/torchref/ops.py:folded", 2, 0},
		{"testdata/torchref/ops.py:llama_attention", 10, 0}, // per layer wq, wk, wv, wo; head 2
		{"testdata/torchref/ops.py:rotary_gqa", 10, 0},
		{"testdata/torchref/ops.py:mobile", 10, 0}, // batch norm (one without affine), depthwise and grouped convs, hard activations
		{"testdata/torchref/ops.py:swiglu", 7, 0},
		{"matmul_attention.py:model", 20, 0},           // per layer c_attn cut in three (6) and c_proj (2); layer norm 2, head 2
		{"matmul_attention.py:selected", 20, 0},        // the same, q, k and v picked by index as torch 2.x does
		{"testdata/torchref/ops.py:arith", 8, 0},       // broadcasting products and quotients, powers, roots, var, amax, written-out RMSNorm
		{"testdata/torchref/ops.py:class_token", 8, 0}, // ViT's expanded class token
		{"testdata/torchref/ops.py:masked", 8, 0},
		// torch.gather by int64 buffers along dim 1 (repeated positions) and the last dim
		{"testdata/torchref/ops.py:gathering", 4, 0},
		{"testdata/torchref/ops.py:indexing", 4, 0}, // index_select by a buffer (embedding into the activation), a literal list (slices)      // bool mask buffers: masked_fill(−∞) fused into attention, where with a number on either side
		{"llama.py:tiny", 21, 0},                    // RMSNorm, SwiGLU, rotary, grouped-query attention, 2 layers
		{"torchvision_models.py:mobilenet_v3_small", 142, 1},
		{"torchvision_models.py:vit_narrow", 40, 0},
		{"torchvision_models.py:resnet18", 62, 0},
		{"torchvision_models.py:resnet50_check", 161, 0},
		{"torchvision_models.py:convnext_tiny_cifar", 182, 0},
	} {
		t.Run(filepath.Base(c.factory), func(t *testing.T) {
			graph, ref := importWithReference(t, py, c.factory)
			if n := countKind(t, graph, ir.OpSwiGLU); n != swiglus[c.factory] {
				t.Errorf("%d swiglu ops imported; want %d", n, swiglus[c.factory])
			}
			code, rep, errs := checkAgainstTorch(t, graph, ref)
			if code != 0 || rep == nil {
				t.Fatalf("verify --against-torch: exit %d: %s", code, errs)
			}
			if len(rep.Grads) != c.grads || rep.Dropouts != c.dropouts {
				t.Errorf("%d gradients, %d dropouts zeroed; want %d, %d", len(rep.Grads), rep.Dropouts, c.grads, c.dropouts)
			}
			if rep.Worst.Rel > torchref.Tolerance || rep.TorchLoss == 0 {
				t.Errorf("worst %+v, torch loss %v", rep.Worst, rep.TorchLoss)
			}
			t.Logf("%s: loss %.17g, worst %s rel %.3g", c.factory, rep.TorchLoss, rep.Worst.Name, rep.Worst.Rel)
		})
	}
}

// The check catches a change in the reference: a gradient perturbed in one
// element fails naming it, a weight perturbed fails, and a parameter
// missing, extra or misshapen is refused in one line naming it.
func TestAgainstTorchMutations(t *testing.T) {
	py := torchPython(t)
	graph, ref := importWithReference(t, py, "mlp.py:model")
	if code, _, errs := runCLI("verify", "--against-torch", ref, "--model", graph); code != 0 {
		t.Fatalf("unmutated: exit %d: %s", code, errs)
	}
	mutant := func(t *testing.T, edit func(dir string)) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "ref")
		copyDir(t, ref, dir)
		edit(dir)
		return dir
	}
	t.Run("gradient", func(t *testing.T) {
		dir := mutant(t, func(dir string) { scaleLargest(t, filepath.Join(dir, "grad.3.weight.bin"), 1+1e-6) })
		code, rep, errs := checkAgainstTorch(t, graph, dir)
		if code != 1 || rep == nil || rep.Worst.Name != "3.weight" || !strings.Contains(errs, "3.weight differs from PyTorch's") {
			t.Errorf("exit %d, report %+v, stderr %q; want a failure naming 3.weight", code, rep, errs)
		}
	})
	t.Run("weight", func(t *testing.T) {
		dir := mutant(t, func(dir string) { scaleLargest(t, filepath.Join(dir, "param.0.weight.bin"), 1.01) })
		code, _, errs := runCLI("verify", "--against-torch", dir, "--model", graph)
		if code != 1 || !strings.Contains(errs, "differs from PyTorch's") {
			t.Errorf("exit %d, stderr %q; want a failure", code, errs)
		}
	})
	for _, c := range []struct {
		name string
		edit func(m *torchref.ManifestDoc)
		want string
	}{
		{"missing", func(m *torchref.ManifestDoc) { entry(m, "param", "5.bias").Name = "5.bias.renamed" }, `has no param "5.bias"`},
		{"extra", func(m *torchref.ManifestDoc) {
			x := *entry(m, "param", "5.bias")
			x.Name = "extra.bias"
			m.Tensors = append(m.Tensors, x)
		}, `has param "extra.bias" [4], which graph mlp lacks`},
		{"misshapen", func(m *torchref.ManifestDoc) { entry(m, "param", "0.weight").Shape = []int{16, 32} }, `param "0.weight" is [16,32]; the graph's is [32,16]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := mutant(t, func(dir string) {
				path := filepath.Join(dir, torchref.Manifest)
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				var m torchref.ManifestDoc
				if err := json.Unmarshal(data, &m); err != nil {
					t.Fatal(err)
				}
				c.edit(&m)
				if data, err = json.Marshal(&m); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
			})
			code, _, errs := runCLI("verify", "--against-torch", dir, "--model", graph)
			if code != 1 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want one line with %q", code, errs, c.want)
			}
		})
	}
}

// entry is the manifest's entry of role and name.
func entry(m *torchref.ManifestDoc, role, name string) *torchref.Entry {
	for i := range m.Tensors {
		if e := &m.Tensors[i]; e.Role == role && e.Name == name {
			return e
		}
	}
	panic("no " + role + " " + name + " in the manifest")
}

// --against-torch takes a model and a directory, nothing about plans.
func TestAgainstTorchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"verify", "--against-torch", "ref"},
		{"verify", "--against-torch", "ref", "--model", "m.json", "--cluster", "paper-8"},
		{"verify", "--against-torch", "ref", "plan.json"},
		{"import", transformerTrace, "--reference", "ref"},
	} {
		if code, _, errs := runCLI(args...); code != 2 {
			t.Errorf("%v: exit %d (%s), want a usage error", args, code, errs)
		}
	}
	// A --reference that is some other directory is left alone.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine\n"), 0o644)
	code, _, errs := runCLI("import", "../../examples/torch/mlp.py:model", "--python", "/nonexistent/python", "--reference", dir, "-o", filepath.Join(t.TempDir(), "m.json"))
	if code != 1 || !strings.Contains(errs, "holds no manifest.json") {
		t.Errorf("exit %d, stderr %q; want a refusal of the directory", code, errs)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// scaleLargest multiplies the largest-magnitude element of a raw float64
// file by f.
func scaleLargest(t *testing.T, path string, f float64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for j := 0; j < len(data)/8; j++ {
		if math.Abs(math.Float64frombits(binary.LittleEndian.Uint64(data[8*j:]))) > math.Abs(math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))) {
			i = j
		}
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
	binary.LittleEndian.PutUint64(data[8*i:], math.Float64bits(v*f))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The other half of the chain: today's imported models, planned by hap on
// three mixed GPUs (one V100, two P100s: uneven shares), run as
// distributed programs on the CPU, equal single-device training
// (hap verify). With TestAgainstTorchEndToEnd, distributed program = hap
// single-device = PyTorch.
func TestImportedModelsVerifyDistributed(t *testing.T) {
	py := torchPython(t)
	for _, factory := range []string{
		"torchvision_models.py:resnet18:batch=6",
		"torchvision_models.py:resnet50_check:batch=3",
		"torchvision_models.py:mobilenet_v3_small:batch=5",
		"torchvision_models.py:convnext_tiny_cifar:batch=3",
		"torchvision_models.py:vit_narrow:batch=5",
		"llama.py:tiny:batch=5",
		"testdata/torchref/ops.py:masked",
		"testdata/torchref/ops.py:indexing",
		"testdata/torchref/ops.py:gathering",
	} {
		t.Run(strings.SplitN(filepath.Base(factory), ":", 3)[1], func(t *testing.T) {
			file, fn, _ := strings.Cut(factory, ":")
			if !strings.Contains(file, "/") {
				file = filepath.Join("../../examples/torch", file)
			}
			graph := filepath.Join(t.TempDir(), "model.json")
			if code, _, errs := runCLI("import", file+":"+fn, "--python", py, "-o", graph); code != 0 {
				t.Fatalf("import: exit %d: %s", code, errs)
			}
			code, out, errs := runCLI("verify", "--model", graph, "--cluster", "paper-8", "--devices", "0,2,3", "--json")
			if code != 0 || !strings.Contains(out, `"pass": true`) {
				t.Fatalf("verify: exit %d: %s%s", code, errs, out)
			}
		})
	}
}
