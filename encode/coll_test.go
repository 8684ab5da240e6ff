package encode

import (
	"strings"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/ir"
	"hap/models"
	"hap/spmd"
)

// A collective the cost model refuses is an error naming the collective
// and the reason, not a coefficient of 0 (a free collective the MILP
// would make the most of): here the encoding of eight devices priced on a
// model of two, where its group names devices the model lacks. Encode
// wraps that error with the tensor and the layout.
func TestCollectiveCoefficientsRefuseARefusedCall(t *testing.T) {
	g, err := models.Load("mlp-tiny", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	model := func(name string) *cost.Model {
		c, err := cluster.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cost.New(c, cost.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	segs := []spmd.Segment{{Name: "batch", Units: g.Tensors[g.TensorsOfKind(ir.Input)[0]].Shape[0]}}
	e, err := Encode(g, segs, model("paper-8"), EncodeOptions{Optimizer: ir.Adam(1e-3)})
	if err != nil {
		t.Fatal(err)
	}
	tc := &e.Tensors[0]
	if _, err := e.computeColl(tc, spmd.I); err != nil {
		t.Fatalf("priced on its own model: %v", err)
	}
	e.model = model("../plan/testdata/duo.yaml") // two devices
	_, err = e.computeColl(tc, spmd.I)
	if err == nil || !strings.Contains(err.Error(), "all-reduce") || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("priced on a two-device model: %v, want the all-reduce refused for a device out of range", err)
	}
}
