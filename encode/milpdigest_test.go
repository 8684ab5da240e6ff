package encode_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/encode"
	"hap/milp"
	"hap/models"
	"hap/solve"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// milpDigest is a hash of every column and row of m, in order, bit for
// bit: two models with the same digest are the same program to a solver.
func milpDigest(m *milp.Model) string {
	h := sha256.New()
	f := func(x float64) { _ = binary.Write(h, binary.LittleEndian, math.Float64bits(x)) }
	fmt.Fprintf(h, "sense %d const ", m.Sense)
	f(m.ObjConst)
	for _, c := range m.Cols {
		fmt.Fprintf(h, "col %q %t ", c.Name, c.Integer)
		f(c.Lower)
		f(c.Upper)
		f(c.Obj)
	}
	for _, r := range m.Rows {
		fmt.Fprintf(h, "row %q %d ", r.Name, len(r.Coefs))
		f(r.Lower)
		f(r.Upper)
		for _, c := range r.Coefs {
			_ = binary.Write(h, binary.LittleEndian, int64(c.Col))
			f(c.Val)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil))[:16]
}

// TestMILPIsWhatItWas pins the MILP's every column and row, for the forms
// the solver builds (MILPBelow with and without a step bound, the
// transport MILP and its lean LP, with and without memory rows, in the
// streams' order and in any order), on encodings that exercise every row
// family: device groups of several sizes (paper-29), all-to-alls and
// gradient sums (bert-moe-tiny), a tied embedding spread over blocks
// (gpt2-tiny), convolutions and pads (vgg19-tiny), and memory that may
// bind. A change to how the model is built that is meant to be pure
// structure must leave every digest as it is; one that changes the model
// shows up here as a diff of testdata/milp-digests.golden (go test
// -update rewrites it).
func TestMILPIsWhatItWas(t *testing.T) {
	cases := []struct {
		model, cluster string
		batch          int
		memory         float64 // EncodeOptions.MemoryFraction
	}{
		{"mlp-tiny", "paper-29", 8, 1e6},
		{"bert-moe-tiny", "paper-8", 8, 1e6},
		{"gpt2-tiny", "paper-16", 6, 1e6},
		{"vgg19-tiny", "paper-8", 8, 1e6},
		{"vit-tiny", "modern-24", 8, 1e6},
		{"bert-base-tiny", "paper-8", 8, 1e-6},
		{"bert-moe-tiny", "paper-29", 8, 3e-7},
	}
	var got strings.Builder
	binds := 0
	for _, c := range cases {
		g, err := models.Load(c.model, models.Options{Batch: c.batch})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := cluster.Load(c.cluster)
		if err != nil {
			t.Fatal(err)
		}
		cm, err := cost.New(cl, cost.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := encode.Encode(g, solve.CandidateSegments(g), cm, encode.EncodeOptions{MemoryFraction: c.memory})
		if err != nil {
			t.Fatal(err)
		}
		if e.MemoryMayBind() {
			binds++
		}
		name := fmt.Sprintf("%s/%s/b%d/m%g", c.model, c.cluster, c.batch, c.memory)
		const limit = 0.5 // seconds: a step bound far above these models' steps
		forms := []struct {
			name string
			m    func() *milp.Model
		}{
			{"milp", func() *milp.Model { m, _ := e.MILP(); return m }},
			{"milp-below", func() *milp.Model { m, _ := e.MILPBelow(limit); return m }},
			{"transport", func() *milp.Model { m, _ := e.TransportMILP(0, encode.BoundOptions{Memory: true}); return m }},
			{"transport-any-order", func() *milp.Model {
				m, _ := e.TransportMILP(limit, encode.BoundOptions{AnyOrder: true})
				return m
			}},
			{"lp", func() *milp.Model { m, _ := e.TransportLP(limit, encode.BoundOptions{Memory: true}); return m }},
			{"lp-unbounded", func() *milp.Model { m, _ := e.TransportLP(0, encode.BoundOptions{}); return m }},
		}
		for _, f := range forms {
			m := f.m()
			fmt.Fprintf(&got, "%s %s cols=%d rows=%d %s\n", name, f.name, len(m.Cols), len(m.Rows), milpDigest(m))
		}
	}
	if binds < 2 {
		t.Fatalf("only %d cases may bind memory: the memory families go unchecked", binds)
	}
	path := filepath.Join("testdata", "milp-digests.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestMILPIsWhatItWas -update writes it)", err)
	}
	if string(want) != got.String() {
		w, g := bufio.NewScanner(strings.NewReader(string(want))), bufio.NewScanner(strings.NewReader(got.String()))
		for w.Scan() {
			g.Scan()
			if w.Text() != g.Text() {
				t.Errorf("MILP changed:\n got %s\nwant %s", g.Text(), w.Text())
			}
		}
		t.Fatalf("the MILP differs from %s (go test -update rewrites it, if the change is meant)", path)
	}
}
