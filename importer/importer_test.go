package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"hap/ir"
)

var update = flag.Bool("update", false, "re-export the testdata traces with torch instead of comparing them")

// fixtures are the traces under testdata and the example factories that
// make them (examples/torch).
var fixtures = []struct{ file, factory string }{
	{"mlp.aten.json", "mlp.py:model"},
	{"vgg11_cifar.aten.json", "vgg_cifar.py:model"},
	{"transformer_encoder.aten.json", "transformer_encoder.py:model"},
	{"matmul_attention.aten.json", "matmul_attention.py:model"},
	{"matmul_attention_select.aten.json", "matmul_attention.py:selected"},
	{"bert_moe_tiny.aten.json", "paper_models.py:bert_moe_tiny"},
	{"llama_attention.aten.json", "llama.py:attention_block"},
	{"llama_tiny.aten.json", "llama.py:tiny"},
	{"masked.aten.json", "../../cmd/hap/testdata/torchref/ops.py:masked"},
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func importFixture(t *testing.T, name string) *Result {
	t.Helper()
	r, err := Import(readFixture(t, name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := r.Graph.Check(); err != nil {
		t.Fatalf("%s: imported graph does not check: %v", name, err)
	}
	// The graph survives hap's own format: what `hap import` writes, `hap
	// plan` reads.
	var buf bytes.Buffer
	if err := ir.EncodeJSON(&buf, r.Graph); err != nil {
		t.Fatal(err)
	}
	if _, err := ir.DecodeJSON(buf.Bytes()); err != nil {
		t.Fatalf("%s: the imported graph does not read back: %v", name, err)
	}
	return r
}

func kinds(g *ir.Graph) map[ir.OpKind]int {
	m := map[ir.OpKind]int{}
	for i := range g.Ops {
		m[g.Ops[i].Kind]++
	}
	return m
}

func tensor(t *testing.T, g *ir.Graph, name string) *ir.Tensor {
	t.Helper()
	id, ok := g.TensorByName(name)
	if !ok {
		t.Fatalf("no tensor %q", name)
	}
	return g.Tensor(id)
}

func TestImportMLP(t *testing.T) {
	g := importFixture(t, "mlp.aten.json").Graph
	want := map[ir.OpKind]int{ir.OpMatMul: 3, ir.OpBias: 3, ir.OpReLU: 1, ir.OpGELU: 1, ir.OpDropout: 1, ir.OpCrossEntropy: 1}
	if got := kinds(g); !equalCounts(got, want) {
		t.Errorf("ops %v, want %v", got, want)
	}
	for i := range g.Ops {
		if op := &g.Ops[i]; op.Kind == ir.OpMatMul && !op.Attrs.TransB {
			t.Errorf("%s: a linear layer's matmul should read the [out, in] weight with trans_b", op.Name)
		}
		if op := &g.Ops[i]; op.Kind == ir.OpDropout && op.Attrs.Rate != 0.1 {
			t.Errorf("%s: rate %v, want 0.1", op.Name, op.Attrs.Rate)
		}
	}
	if w := tensor(t, g, "0.weight"); w.Kind != ir.Param || !w.Shape.Equal(ir.Shape{32, 16}) {
		t.Errorf("0.weight is %s %v; want the state_dict's param [32 16]", w.Kind, w.Shape)
	}
	if y := tensor(t, g, "y"); y.Kind != ir.Label {
		t.Errorf("y is %s; the cross-entropy target should be a label", y.Kind)
	}
	if x := tensor(t, g, "x"); x.Kind != ir.Input {
		t.Errorf("x is %s; want input", x.Kind)
	}
	if p := g.ParamCount(); p != 16*32+32+32*32+32+32*4+4 {
		t.Errorf("%d parameters", p)
	}
}

func TestImportVGG11(t *testing.T) {
	g := importFixture(t, "vgg11_cifar.aten.json").Graph
	want := map[ir.OpKind]int{ir.OpConv2D: 8, ir.OpMaxPool2D: 5, ir.OpReLU: 10, ir.OpAdaptiveAvgPool2D: 1, ir.OpReshape: 1,
		ir.OpMatMul: 3, ir.OpBias: 11, ir.OpDropout: 2, ir.OpCrossEntropy: 1}
	if got := kinds(g); !equalCounts(got, want) {
		t.Errorf("ops %v, want %v", got, want)
	}
	if w := tensor(t, g, "features.0.weight"); !w.Shape.Equal(ir.Shape{64, 3, 3, 3}) {
		t.Errorf("features.0.weight %v", w.Shape)
	}
	if x := tensor(t, g, "images"); !x.Shape.Equal(ir.Shape{32, 3, 32, 32}) {
		t.Errorf("images %v", x.Shape)
	}
	for i := range g.Ops {
		if op := &g.Ops[i]; op.Kind == ir.OpConv2D && (op.Attrs.Stride != 1 || op.Attrs.Pad != 1) {
			t.Errorf("%s: stride %d pad %d, want 1 and 1", op.Name, op.Attrs.Stride, op.Attrs.Pad)
		}
	}
}

func TestImportTransformerEncoder(t *testing.T) {
	r := importFixture(t, "transformer_encoder.aten.json")
	g := r.Graph
	got := kinds(g)
	const layers = 3
	for k, n := range map[ir.OpKind]int{ir.OpAttention: layers, ir.OpLayerNorm: 2 * layers, ir.OpMatMul: 6*layers + 1,
		ir.OpDropout: 3 * layers, ir.OpEmbedding: 1, ir.OpCrossEntropy: 1, ir.OpReLU: layers} {
		if got[k] != n {
			t.Errorf("%d %s ops, want %d (all ops: %v)", got[k], k, n, got)
		}
	}
	// No pieces of attention left: its bmms, scale and softmax are one op.
	for _, k := range []ir.OpKind{ir.OpSoftmax, ir.OpLogSoftmax, ir.OpMul, ir.OpFillLike, ir.OpNLLLoss} {
		if got[k] != 0 {
			t.Errorf("%d %s ops left: %v", got[k], k, got)
		}
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Kind == ir.OpMatMul && len(g.Tensor(op.Inputs[1]).Shape) != 2 {
			t.Errorf("%s: a batched matmul is left (attention's bmm?)", op.Name)
		}
		if op.Kind == ir.OpAttention && (op.Attrs.Scale < 0.3535 || op.Attrs.Scale > 0.3536 || op.Attrs.Causal) {
			t.Errorf("%s: scale %v causal %v, want 1/√8 unmasked", op.Name, op.Attrs.Scale, op.Attrs.Causal)
		}
		if op.Kind == ir.OpAttention && !strings.HasPrefix(op.Name, "encoder.layers.") {
			t.Errorf("attention op %q is not named after its module", op.Name)
		}
	}
	if n := tensor(t, g, "encoder.layers.2.norm1.weight"); n.Kind != ir.Param || n.Init != ir.InitOnes {
		t.Errorf("norm1.weight is %s init %q; want a param starting at ones", n.Kind, n.Init)
	}
	if n := tensor(t, g, "encoder.layers.2.norm1.bias"); n.Init != ir.InitZeros {
		t.Errorf("norm1.bias init %q; want zeros", n.Init)
	}
	if ids := tensor(t, g, "ids"); ids.Kind != ir.Input || ids.DType != ir.Int64 {
		t.Errorf("ids is %s %s; want int64 input", ids.Kind, ids.DType)
	}
	if l := tensor(t, g, "labels"); l.Kind != ir.Label {
		t.Errorf("labels is %s", l.Kind)
	}
	if len(r.Notes) != 2 || !strings.Contains(r.Notes[0], "attention dropout 0.1 dropped") || !strings.Contains(r.Notes[1], "packed projection split into 3") {
		t.Errorf("notes %q; want one about the dropped attention dropout, one about the split in_proj", r.Notes)
	}
	// The packed in_proj is three parameters, each knowing its place.
	for i, name := range []string{"[0:32]", "[32:64]", "[64:96]"} {
		w := tensor(t, g, "encoder.layers.1.self_attn.in_proj_weight"+name)
		want := ir.Part{Of: "encoder.layers.1.self_attn.in_proj_weight", Axis: 0, Start: 32 * i, End: 32 * (i + 1)}
		if w.Part != want || !w.Shape.Equal(ir.Shape{32, 32}) {
			t.Errorf("%s: part %+v shape %v; want %+v [32 32]", w.Name, w.Part, w.Shape, want)
		}
	}
	// Batch and heads stay apart: attention sees [B, H, S, d], and no
	// linear layer's rows merge the sequence with the batch.
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Kind == ir.OpAttention && !g.Tensor(op.Inputs[0]).Shape.Equal(ir.Shape{4, 4, 16, 8}) {
			t.Errorf("%s: q is %v; want [4 4 16 8]", op.Name, g.Tensor(op.Inputs[0]).Shape)
		}
		if op.Kind == ir.OpMatMul && strings.HasPrefix(op.Name, "encoder.") && len(g.Tensor(op.Inputs[0]).Shape) != 3 {
			t.Errorf("%s: rows %v; want [S B E] kept apart", op.Name, g.Tensor(op.Inputs[0]).Shape)
		}
	}
}

// Attention written with 4-D matmuls over a packed projection (nanoGPT's
// way) imports as one attention op per layer on [B, H, S, d], whether the
// projection is split (torch 1.13's nn.MultiheadAttention) or picked apart
// by index (torch 2.x's).
func TestImportMatmulAttention(t *testing.T) {
	for _, f := range []string{"matmul_attention.aten.json", "matmul_attention_select.aten.json"} {
		t.Run(f, func(t *testing.T) { checkMatmulAttention(t, importFixture(t, f).Graph) })
	}
}

func checkMatmulAttention(t *testing.T, g *ir.Graph) {
	got := kinds(g)
	const layers = 2
	for k, n := range map[ir.OpKind]int{ir.OpAttention: layers, ir.OpMatMul: 4*layers + 1, ir.OpSoftmax: 0, ir.OpMul: 0, ir.OpFillLike: 0} {
		if got[k] != n {
			t.Errorf("%d %s ops, want %d (all ops: %v)", got[k], k, n, got)
		}
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Kind != ir.OpAttention {
			continue
		}
		if !strings.HasPrefix(op.Name, "h.") || !strings.HasSuffix(op.Name, ".attention") {
			t.Errorf("attention op %q is not named after its module", op.Name)
		}
		for j, want := range []ir.Shape{{2, 2, 4, 8}, {2, 2, 4, 8}, {2, 2, 4, 8}} {
			if s := g.Tensor(op.Inputs[j]).Shape; !s.Equal(want) {
				t.Errorf("%s input %d is %v; want %v", op.Name, j, s, want)
			}
		}
		if op.Attrs.Scale < 0.3535 || op.Attrs.Scale > 0.3536 {
			t.Errorf("%s: scale %v, want 1/√8", op.Name, op.Attrs.Scale)
		}
	}
}

// hap_torch's own operators import as hap's: the MoE gate as top2_gate,
// torch.einsum as einsum.
func TestImportMoE(t *testing.T) {
	g := importFixture(t, "bert_moe_tiny.aten.json").Graph
	got := kinds(g)
	for k, n := range map[ir.OpKind]int{ir.OpTop2Gate: 1, ir.OpEinsum: 4, ir.OpAttention: 2} {
		if got[k] != n {
			t.Errorf("%d %s ops, want %d (all ops: %v)", got[k], k, n, got)
		}
	}
	var eqs []string
	for i := range g.Ops {
		if op := &g.Ops[i]; op.Kind == ir.OpEinsum {
			eqs = append(eqs, op.Attrs.Equation)
		} else if op.Kind == ir.OpTop2Gate && op.Attrs.Capacity != 5 {
			t.Errorf("%s: capacity %d; want ceil(1.25·2·8/4) = 5", op.Name, op.Attrs.Capacity)
		}
	}
	if want := []string{"gsec,gsd->egcd", "egcd,edf->egcf", "egcf,efd->egcd", "gsec,egcd->gsd"}; !slices.Equal(eqs, want) {
		t.Errorf("einsums %q; want %q", eqs, want)
	}
}

func equalCounts(a, b map[ir.OpKind]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, n := range a {
		if b[k] != n {
			return false
		}
	}
	return true
}

// An op outside the table: one line naming the op, the module path and
// docs/import.md.
func TestImportUnknownOpIsOneLine(t *testing.T) {
	data := bytes.Replace(readFixture(t, "transformer_encoder.aten.json"), []byte(`"aten.relu.default"`), []byte(`"aten.frobnicate.default"`), 1)
	_, err := Import(data)
	var u *UnsupportedError
	if !errors.As(err, &u) {
		t.Fatalf("err %v; want an *UnsupportedError", err)
	}
	msg := err.Error()
	for _, want := range []string{"aten.frobnicate.default", "module encoder.layers.0", "docs/import.md"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("%q is more than one line", msg)
	}
}

// What hap cannot represent is refused at the node, with its module.
func TestImportRefusesWhatItCannotRepresent(t *testing.T) {
	cases := []struct{ from, to, want string }{
		{`"aten.nll_loss_forward.default","args":[{"t":"_log_softmax"},{"t":"y"},null,2`, `"aten.nll_loss_forward.default","args":[{"t":"_log_softmax"},{"t":"y"},null,1`, "reduction='sum'"},
		{`"approximate":"none"`, `"approximate":"tanh"`, "exact"},
		{`"name":"x","kind":"input","dtype":"float32"`, `"name":"x","kind":"input","dtype":"bfloat16"`, "bfloat16"},
	}
	for _, c := range cases {
		data := readFixture(t, "mlp.aten.json")
		if !bytes.Contains(data, []byte(c.from)) {
			t.Fatalf("fixture lacks %s", c.from)
		}
		_, err := Import(bytes.Replace(data, []byte(c.from), []byte(c.to), 1))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err %v; want one line with %q", c.to, err, c.want)
		}
	}
}

// docs/import.md's table is Table: every entry, with what it becomes, and
// nothing else.
func TestDocListsTheTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/import.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `((?:aten|hap)\\.[^`]+)` \\| (.*) \\|$")
	inDoc := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		inDoc[m[1]] = m[2]
	}
	prev := ""
	for _, e := range Table() {
		if e.Op <= prev {
			t.Errorf("Table is not sorted: %s after %s", e.Op, prev)
		}
		prev = e.Op
		got, ok := inDoc[e.Op]
		switch {
		case !ok:
			t.Errorf("docs/import.md lacks the row: | `%s` | %s |", e.Op, e.Becomes)
		case got != e.Becomes:
			t.Errorf("docs/import.md says %s becomes %q; the table says %q", e.Op, got, e.Becomes)
		}
		delete(inDoc, e.Op)
	}
	for op := range inDoc {
		t.Errorf("docs/import.md lists %s, which Table lacks", op)
	}
}

// python finds an interpreter with torch and torchvision, or says why not.
func python(t *testing.T) string {
	t.Helper()
	py := os.Getenv("HAP_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, "-c", "import torch, torchvision; print(torch.__version__)").CombinedOutput(); err != nil {
		t.Skipf("skipping: %s has no torch and torchvision (set $HAP_PYTHON): %s", py, lastLine(string(out)))
	}
	return py
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// The fixtures are what the exporter writes today: re-export them with
// torch and compare (go test -update rewrites them).
func TestImportFixturesMatchTheExporter(t *testing.T) {
	py := python(t)
	dir := t.TempDir()
	for _, f := range fixtures {
		out := filepath.Join(dir, f.file)
		cmd := exec.Command(py, "-m", "hap_torch", filepath.Join("..", "examples", "torch", f.factory), "-o", out)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join("..", "python"))
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("exporting %s: %v: %s", f.factory, err, msg)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(filepath.Join("testdata", f.file), got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want := readFixture(t, f.file)
		gv, wv := torchOf(t, got), torchOf(t, want)
		if gv != wv {
			t.Logf("%s was traced by torch %s, this is torch %s: comparing anyway", f.file, wv, gv)
		}
		if !bytes.Equal(stripTorch(got), stripTorch(want)) {
			t.Errorf("testdata/%s drifted from what %s exports now (run go test ./importer -run Fixtures -update to accept)", f.file, f.factory)
		}
	}
}

func torchOf(t *testing.T, data []byte) string {
	var d struct{ Torch string }
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d.Torch
}

var torchField = regexp.MustCompile(`"torch":"[^"]*",`)

func stripTorch(data []byte) []byte { return torchField.ReplaceAll(data, nil) }

// Boolean mask buffers: masked_fill(−∞) over the scores becomes an
// additive mask the attention op takes; where with a number on either
// side, masked_fill (the number second: of 1 − mask). A mask the step
// computes is refused at its node.
func TestImportMasks(t *testing.T) {
	data := readFixture(t, "masked.aten.json")
	g := importFixture(t, "masked.aten.json").Graph
	got := kinds(g)
	for k, n := range map[ir.OpKind]int{ir.OpAttention: 1, ir.OpSoftmax: 0, ir.OpMaskedFill: 3, ir.OpSub: 1} {
		if got[k] != n {
			t.Errorf("%d %s ops, want %d (all ops: %v)", got[k], k, n, got)
		}
	}
	for i := range g.Ops {
		if op := &g.Ops[i]; op.Kind == ir.OpMaskedFill && math.IsInf(op.Attrs.Value, 0) {
			t.Errorf("%s fills %v: graph JSON has no infinities", op.Name, op.Attrs.Value)
		}
	}
	from := []byte(`"op":"aten.where.self","args":[{"t":"keep"}`)
	if !bytes.Contains(data, from) {
		t.Fatalf("fixture lacks %s", from)
	}
	_, err := Import(bytes.Replace(data, from, []byte(`"op":"aten.where.self","args":[{"t":"_unsafe_view_1"}`), 1))
	if err == nil || !strings.Contains(err.Error(), "computed by the step") || strings.Contains(err.Error(), "\n") {
		t.Errorf("err %v; want one line saying the mask is computed by the step", err)
	}
}

// repeat_interleave by a number of repeats (as torch 2.x traces it):
// x with a size-1 dim after dim, g copies concatenated there, merged
// back — the form grouped-query attention's repeated heads take — and,
// without a dim, of the flattened x.
func TestImportRepeatInterleave(t *testing.T) {
	doc := func(args string, out string) []byte {
		return []byte(`{"format":"hap.aten","version":1,"name":"ri","torch":"2.1.0",
"placeholders":[{"name":"w","kind":"param","dtype":"float32","shape":[2,3,4]}],
"nodes":[{"name":"ri","op":"aten.repeat_interleave.self_int","args":[{"t":"w"},` + args + `],"outputs":[{"dtype":"float32","shape":` + out + `}],"module":"attn"},
{"name":"th","op":"aten.tanh.default","args":[{"t":"ri"}],"outputs":[{"dtype":"float32","shape":` + out + `}],"module":""},
{"name":"s","op":"aten.sum.default","args":[{"t":"th"}],"outputs":[{"dtype":"float32","shape":[]}],"module":""}],
"loss":"s"}`)
	}
	for _, c := range []struct {
		args, out string
		unsq      ir.Shape
		axis      int
	}{
		{`2,1`, `[2,6,4]`, ir.Shape{2, 3, 1, 4}, 2},
		{`3,-1`, `[2,3,12]`, ir.Shape{2, 3, 4, 1}, 3},
		{`2,null`, `[48]`, ir.Shape{24, 1}, 1},
	} {
		r, err := Import(doc(c.args, c.out))
		if err != nil {
			t.Fatalf("repeat_interleave(w, %s): %v", c.args, err)
		}
		g := r.Graph
		var cat *ir.Op
		for i := range g.Ops {
			if g.Ops[i].Kind == ir.OpConcat {
				cat = &g.Ops[i]
			}
		}
		if cat == nil || cat.Attrs.Axis != c.axis || !g.Tensors[cat.Inputs[0]].Shape.Equal(c.unsq) || slices.ContainsFunc(cat.Inputs, func(t ir.TensorID) bool { return t != cat.Inputs[0] }) {
			t.Fatalf("repeat_interleave(w, %s): concat %+v; want copies of one %v tensor along %d", c.args, cat, c.unsq, c.axis)
		}
		if out := g.Tensors[g.Ops[len(g.Ops)-2].Outputs[0]].Shape; out.Numel() != g.Tensors[cat.Outputs[0]].Shape.Numel() {
			t.Errorf("repeat_interleave(w, %s): tanh of %v", c.args, out)
		}
	}
	if _, err := Import(doc(`{"t":"w"},1`, `[2,6,4]`)); err == nil || !strings.Contains(err.Error(), "number of repeats") {
		t.Errorf("repeats as a tensor: err %v; want it refused", err)
	}
}

// gather by an int64 buffer of x's rank: one gather op on the normalised
// dim, the buffer a state tensor; sparse_grad, a float index and an index
// smaller than x off the gathered dim are refused naming the problem.
func TestImportGather(t *testing.T) {
	doc := func(args, ishape, out string) []byte {
		return []byte(`{"format":"hap.aten","version":1,"name":"ga","torch":"1.13.1",
"placeholders":[{"name":"w","kind":"param","dtype":"float32","shape":[2,3,4]},{"name":"pick","kind":"buffer","dtype":"int64","shape":` + ishape + `}],
"nodes":[{"name":"ga","op":"aten.gather.default","args":[{"t":"w"},` + args + `],"outputs":[{"dtype":"float32","shape":` + out + `}],"module":""},
{"name":"s","op":"aten.sum.default","args":[{"t":"ga"}],"outputs":[{"dtype":"float32","shape":[]}],"module":""}],
"loss":"s"}`)
	}
	r, err := Import(doc(`-2,{"t":"pick"}`, `[2,5,4]`, `[2,5,4]`))
	if err != nil {
		t.Fatal(err)
	}
	g := r.Graph
	var gat *ir.Op
	for i := range g.Ops {
		if g.Ops[i].Kind == ir.OpGather {
			gat = &g.Ops[i]
		}
	}
	if gat == nil || gat.Attrs.Axis != 1 || g.Tensors[gat.Inputs[1]].Kind != ir.State || !g.Tensors[gat.Outputs[0]].Shape.Equal(ir.Shape{2, 5, 4}) {
		t.Fatalf("gather %+v; want one gather along dim 1 by the state tensor pick", gat)
	}
	for _, c := range []struct{ args, ishape, out, want string }{
		{`1,{"t":"pick"},true`, `[2,5,4]`, `[2,5,4]`, "sparse_grad"},
		{`1,{"t":"pick"}`, `[2,5,3]`, `[2,5,3]`, "differs from x [2,3,4] on dim 2"},
		{`1,{"t":"pick"}`, `[2,5]`, `[2,5]`, "rank 2; want x's rank 3"},
		{`3,{"t":"pick"}`, `[2,5,4]`, `[2,5,4]`, "dim 3 out of range"},
	} {
		if _, err := Import(doc(c.args, c.ishape, c.out)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gather(w, %s) by %s: err %v; want %q", c.args, c.ishape, err, c.want)
		}
	}
}
