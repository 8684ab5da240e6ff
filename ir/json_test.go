package ir_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"hap/ir"
	"hap/models"
)

func export(t testing.TB, g *ir.Graph) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := ir.EncodeJSON(&buf, g); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zooGraph(t testing.TB, name string, batch int) *ir.Graph {
	t.Helper()
	cfg, err := models.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	if batch > 0 {
		cfg.Batch = batch
	}
	g, err := models.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestJSONRoundTripIsExact(t *testing.T) {
	for _, name := range models.Names() {
		t.Run(name, func(t *testing.T) {
			g := zooGraph(t, name, 2)
			data := export(t, g)
			back, err := ir.DecodeJSON(data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(g, back) {
				t.Fatalf("round trip changed the graph")
			}
			if again := export(t, back); !bytes.Equal(data, again) {
				t.Fatalf("re-encoding changed the bytes")
			}
		})
	}
}

// A parameter cut out of a packed one keeps its place through JSON.
func TestJSONKeepsParameterParts(t *testing.T) {
	b := ir.NewBuilder("parts", ir.Float32)
	x := b.Input("x", ir.Float32, 2, 4)
	w := b.Leaf(ir.Param, "w[4:8]", ir.Float32, ir.Shape{4, 4}, "")
	g, err := b.Finish(b.ReduceSum(b.MatMul(x, w), 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	g.Tensors[w].Part = ir.Part{Of: "w", Axis: 0, Start: 4, End: 8}
	back, err := ir.DecodeJSON(export(t, g))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, back) {
		t.Fatalf("round trip lost the part: %+v", back.Tensors[w].Part)
	}
}

func TestJSONAcceptsUndeclaredActivationsAndAnyOpOrder(t *testing.T) {
	doc := `{"format":"hap.graph","version":1,"name":"two",
	  "tensors":[{"name":"x","kind":"input","dtype":"float64","shape":[2,3]},
	             {"name":"w","kind":"param","dtype":"float64","shape":[3,4]},
	             {"name":"y","kind":"label","dtype":"int64","shape":[2]}],
	  "ops":[{"name":"loss","kind":"cross_entropy","inputs":["h","y"],"outputs":["loss"]},
	         {"name":"h","kind":"matmul","inputs":["x","w"],"outputs":["h"]}],
	  "loss":"loss"}`
	g, err := ir.DecodeJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Ops) != 2 || g.Ops[0].Name != "h" {
		t.Fatalf("ops not topologically ordered: %+v", g.Ops)
	}
	if s := g.Tensor(g.Ops[0].Outputs[0]).Shape; !s.Equal(ir.Shape{2, 4}) {
		t.Fatalf("inferred shape %v, want [2,4]", s)
	}
}

// Each malformed document must fail with one error that names the problem.
func TestJSONMalformedInputsNameTheProblem(t *testing.T) {
	base := func(tensors, ops, loss string) string {
		return `{"format":"hap.graph","version":1,"name":"m","tensors":[` + tensors + `],"ops":[` + ops + `],"loss":"` + loss + `"}`
	}
	x := `{"name":"x","kind":"input","dtype":"float32","shape":[2,3]}`
	w := `{"name":"w","kind":"param","dtype":"float32","shape":[3,4]}`
	cases := []struct{ name, doc, want string }{
		{"syntax", "{\n\"format\": \"hap.graph\",\n\"version\": 1,,\n}", "line 3"},
		{"empty", "", "empty document"},
		{"wrong type", `{"format":"hap.graph","version":"one"}`, `field "version"`},
		{"unknown field", `{"format":"hap.graph","version":1,"colour":1}`, `unknown field "colour"`},
		{"format", `{"format":"onnx","version":1}`, `field "format"`},
		{"version", `{"format":"hap.graph","version":9}`, `is 9`},
		{"dtype", base(`{"name":"x","kind":"input","dtype":"float16","shape":[2]}`, ``, ``), `tensors[0] ("x"): field "dtype"`},
		{"kind", base(`{"name":"x","kind":"weight","dtype":"float32","shape":[2]}`, ``, ``), `field "kind"`},
		{"shape missing", base(`{"name":"x","kind":"input","dtype":"float32"}`, ``, ``), `field "shape" is missing`},
		{"shape zero", base(`{"name":"x","kind":"input","dtype":"float32","shape":[2,0]}`, ``, ``), `non-positive`},
		{"duplicate", base(x+`,`+x, ``, ``), `declared twice`},
		{"part of an input", base(`{"name":"x","kind":"input","dtype":"float32","shape":[2],"part_of":{"name":"w","axis":0,"start":0,"end":2}}`, ``, ``), `only a param can be part`},
		{"part too long", base(`{"name":"x","kind":"param","dtype":"float32","shape":[2],"part_of":{"name":"w","axis":0,"start":0,"end":3}}`, ``, ``), `is not 2 long`},
		{"part axis", base(`{"name":"x","kind":"param","dtype":"float32","shape":[2],"part_of":{"name":"w","axis":1,"start":0,"end":2}}`, ``, ``), `axis 1 is outside`},
		{"unknown op", base(x, `{"name":"o","kind":"frobnicate","inputs":["x"],"outputs":["y"]}`, ``), `unknown op kind "frobnicate"`},
		{"shape mismatch", base(x+`,`+`{"name":"w","kind":"param","dtype":"float32","shape":[5,4]}`, `{"name":"mm","kind":"matmul","inputs":["x","w"],"outputs":["y"]}`, ``), `ops[0] ("mm", matmul): shape mismatch`},
		{"dangling input", base(x, `{"name":"r","kind":"relu","inputs":["nope"],"outputs":["y"]}`, ``), `input "nope" is neither declared`},
		{"dangling activation", base(x+`,{"name":"h","kind":"activation","dtype":"float32","shape":[2,3]}`, `{"name":"r","kind":"relu","inputs":["h"],"outputs":["y"]}`, ``), `dangling`},
		{"cycle", base(x, `{"name":"a","kind":"add","inputs":["x","b"],"outputs":["a"]},{"name":"b","kind":"relu","inputs":["a"],"outputs":["b"]}`, ``), `cycle`},
		{"writes a param", base(x+`,`+w, `{"name":"r","kind":"relu","inputs":["x"],"outputs":["w"]}`, ``), `declared as param`},
		{"bad attr", base(x, `{"name":"p","kind":"permute","inputs":["x"],"outputs":["y"],"attrs":{"perm":[0,0]}}`, ``), `not a permutation`},
		{"arity", base(x, `{"name":"mm","kind":"matmul","inputs":["x"],"outputs":["y"]}`, ``), `takes 2 inputs`},
		{"declared output shape", base(x+`,{"name":"y","kind":"activation","dtype":"float32","shape":[3,2]}`, `{"name":"r","kind":"relu","inputs":["x"],"outputs":["y"]}`, ``), `declared float32[3,2] but the op computes float32[2,3]`},
		{"loss missing", base(x, ``, `nope`), `field "loss": no tensor named "nope"`},
		{"loss not scalar", base(x, ``, `x`), `must be a float scalar`},
		{"trailing", `{"format":"hap.graph","version":1,"name":"m","tensors":[],"ops":[]} {}`, `trailing data`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ir.DecodeJSON([]byte(c.doc))
			if err == nil {
				t.Fatal("accepted a malformed document")
			}
			if !errors.Is(err, ir.ErrBadGraphJSON) {
				t.Errorf("error does not wrap ErrBadGraphJSON: %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error spans several lines: %q", err)
			}
		})
	}
}

// FuzzDecodeJSON: the decoder never panics, and whatever it accepts
// round-trips exactly.
func FuzzDecodeJSON(f *testing.F) {
	for _, n := range []string{"mlp-tiny", "bert-base-tiny", "vgg19-tiny", "bert-moe-tiny"} {
		f.Add(export(f, zooGraph(f, n, 0)))
	}
	f.Add([]byte(`{"format":"hap.graph","version":1,"name":"m","tensors":[{"name":"x","kind":"input","dtype":"float32","shape":[2,3]}],"ops":[{"name":"r","kind":"relu","inputs":["x"],"outputs":["y"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ir.DecodeJSON(data)
		if err != nil {
			return
		}
		out := export(t, g)
		back, err := ir.DecodeJSON(out)
		if err != nil {
			t.Fatalf("re-decoding an accepted graph failed: %v", err)
		}
		if !bytes.Equal(export(t, back), out) {
			t.Fatal("accepted graph does not round-trip")
		}
	})
}
