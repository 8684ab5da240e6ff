package importer

import (
	"os"
	"path/filepath"
	"testing"

	"hap/ir"
)

func importFixture(t *testing.T, name string) *Result {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Import(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := r.Graph.Check(); err != nil {
		t.Fatalf("%s: imported graph does not check: %v", name, err)
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

func TestImportDebug(t *testing.T) {
	for _, f := range []string{"mlp.aten.json", "vgg11_cifar.aten.json", "transformer_encoder.aten.json"} {
		r := importFixture(t, f)
		t.Logf("%s: %v notes=%d params=%d", f, kinds(r.Graph), len(r.Notes), r.Graph.ParamCount())
	}
}
