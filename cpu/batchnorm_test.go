package cpu

import (
	"math"
	"testing"

	"hap/ir"
)

// A training step updates batch norm's running statistics as PyTorch
// does: r' = (1 − m)·r + m·stat, the variance unbiased; the next step
// starts from the new values.
func TestBatchNormRunningStatistics(t *testing.T) {
	b := ir.NewBuilder("bn", ir.Float64)
	x := b.Param("x", 4, 2, 3)
	rm, rv := b.Leaf(ir.State, "rm", ir.Float64, ir.Shape{2}, ""), b.Leaf(ir.State, "rv", ir.Float64, ir.Shape{2}, "")
	y := b.BatchNorm(x, b.ParamInit("g", ir.InitOnes, 2), b.ParamInit("b", ir.InitZeros, 2), rm, rv, 1e-5, 0.1)
	g, err := b.Finish(b.ReduceSum(b.Mul(y, y), 0, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	step, err := ir.BuildTrainStep(g, ir.SGD(0))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTrainer[float64](step, 1)
	if err != nil {
		t.Fatal(err)
	}
	xv := tr.Value(x).Clone()
	rm0, rv0 := []float64{0.5, -1}, []float64{2, 3}
	tr.SetValue(rm, &Tensor[float64]{Shape: ir.Shape{2}, Data: append([]float64{}, rm0...)})
	tr.SetValue(rv, &Tensor[float64]{Shape: ir.Shape{2}, Data: append([]float64{}, rv0...)})
	for s := 0; s < 2; s++ {
		if _, err := tr.Step(nil, nil); err != nil {
			t.Fatal(err)
		}
		for c := 0; c < 2; c++ {
			var vals []float64
			for n := 0; n < 4; n++ {
				for i := 0; i < 3; i++ {
					vals = append(vals, xv.Data[(n*2+c)*3+i])
				}
			}
			var mean, ss float64
			for _, v := range vals {
				mean += v
			}
			mean /= float64(len(vals))
			for _, v := range vals {
				ss += (v - mean) * (v - mean)
			}
			rm0[c] = 0.9*rm0[c] + 0.1*mean
			rv0[c] = 0.9*rv0[c] + 0.1*ss/float64(len(vals)-1)
			if got := tr.Value(rm).Data[c]; math.Abs(got-rm0[c]) > 1e-12 {
				t.Errorf("step %d: running mean[%d] = %v, want %v", s+1, c, got, rm0[c])
			}
			if got := tr.Value(rv).Data[c]; math.Abs(got-rv0[c]) > 1e-12 {
				t.Errorf("step %d: running var[%d] = %v, want %v", s+1, c, got, rv0[c])
			}
		}
	}
}
