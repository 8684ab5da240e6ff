package encode

import (
	"math/rand/v2"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/ir"
	"hap/models"
	"hap/spmd"
)

// Evaluate adds the timeline's and the memory model's terms through flat
// indices (flatTerms, memoryTerms). With random per-class values, each
// flat sum equals, bit for bit, the terms added up the readable way — by
// bucket, block, atom and class for the timeline, and block by block over
// each block's tensor classes for the memory sweep — on every zoo model.
func TestFlatTermsAddUpAsTheTerms(t *testing.T) {
	cl, err := cluster.Load("paper-8")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(cl, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, name := range models.Names() {
		g, err := models.Load(name, models.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := Encode(g, []spmd.Segment{{Name: "batch", Units: g.Tensors[g.TensorsOfKind(ir.Input)[0]].Shape[0]}}, m, EncodeOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var a floatArena
		tt := e.newTimelineTerms(&a)
		for i := range tt.all {
			tt.all[i] = rng.Float64()
		}
		got := e.bucketSums(&tt, &a)
		values := [...][]float64{atomFwd: tt.fwd, atomBwd: tt.bwd, atomComm: tt.comm, atomAdj: tt.adj, atomGrad: tt.grad, atomW: tt.wtail, atomPadF: tt.padF, atomPadB: tt.padB, atomSum: tt.sum}
		var want [numBuckets][]float64
		for b := range want {
			want[b] = make([]float64, len(e.blocks))
		}
		e.blockTerms(func(k int, b bucket, at atom, class int, n float64) {
			want[b][k] += n * values[at][class]
		})
		for b := range want {
			for k := range want[b] {
				if got[b][k] != want[b][k] {
					t.Fatalf("%s: bucket %d block %d: flat sum %v, terms %v", name, b, k, got[b][k], want[b][k])
				}
			}
		}

		// The memory sweep's rows from per-class shares.
		nb, nt := len(e.blocks), len(e.Tensors)
		shares := make([]float64, 2*nt)
		for i := range shares {
			shares[i] = rng.Float64()
		}
		flat := make([]float64, 3*nb)
		for _, ft := range e.memFlat {
			flat[ft.dst] += ft.n * shares[ft.src]
		}
		held, heldGrad, grad := make([]float64, nb), make([]float64, nb), make([]float64, nb)
		for k, bl := range e.blocks {
			for _, tc := range bl.tensors {
				tn := &e.Tensors[tc.class]
				held[k] += float64(tc.n) * tn.Bytes * shares[tc.class]
				if tn.ReqGrad && tn.Kind != ir.Param {
					heldGrad[k] += float64(tc.n) * tn.Bytes * shares[tc.class]
				}
				if tn.Kind == ir.Param {
					grad[k] += float64(tc.n) * tn.Bytes * shares[nt+tc.class]
				}
			}
		}
		for k := range nb {
			if flat[k] != held[k] || flat[nb+k] != heldGrad[k] || flat[2*nb+k] != grad[k] {
				t.Fatalf("%s: block %d: flat memory rows %v %v %v, terms %v %v %v", name, k, flat[k], flat[nb+k], flat[2*nb+k], held[k], heldGrad[k], grad[k])
			}
		}
	}
}
