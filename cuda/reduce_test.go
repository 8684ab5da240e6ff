package cuda

import (
	"slices"
	"strings"
	"testing"

	"hap/ir"
)

// Which kernels a reduction plans, so that the op suite's long sums
// (TestFakeOpsMatchCPU, TestGPUOpsMatchCPU) reach every path: a thread per
// output for short sums, a block per output over the innermost dimension,
// and a split into row ranges added by a second pass.
func TestReductionPaths(t *testing.T) {
	cases := []struct {
		name    string
		shape   []int
		axes    []int
		kernels []string
		work    int64 // workspace bytes (float32)
	}{
		{"short", []int{3, 4, 5}, []int{1}, []string{"reduce_sum"}, 0},
		{"split-columns", []int{40, 37, 3}, []int{0, 1}, []string{"reduce_sum", "reduce_sum"}, 45 * 3 * 4},
		{"split-middle", []int{3, 70, 7}, []int{1}, []string{"reduce_sum", "reduce_sum"}, 2 * 21 * 4},
		{"rows", []int{5, 300}, []int{1}, []string{"reduce_sum_rows"}, 0},
		{"rows-outer-inner", []int{4, 3, 50}, []int{0, 2}, []string{"reduce_sum_rows"}, 0},
		// bert-base's bias gradient at batch 8: 1024 rows into 768 columns.
		{"bias-gradient", []int{8, 128, 768}, []int{0, 1}, []string{"reduce_sum", "reduce_sum"}, 32 * 768 * 4},
	}
	for _, c := range cases {
		b := ir.NewBuilder("r", ir.Float32)
		y := b.ReduceSum(b.Param("x", c.shape...), c.axes...)
		g, err := b.Finish(ir.NoTensor)
		if err != nil {
			t.Fatal(err)
		}
		op := &g.Ops[len(g.Ops)-1]
		plan, err := PlanOp(op, []*ir.Tensor{g.Tensor(op.Inputs[0])}, []*ir.Tensor{g.Tensor(y)}, PlanOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var kernels []string
		for _, s := range plan.Steps {
			kernels = append(kernels, strings.TrimSuffix(strings.TrimPrefix(s.Kernel, "hap_"), "_f32"))
		}
		if !slices.Equal(kernels, c.kernels) || plan.WorkBytes != c.work {
			t.Errorf("%s: kernels %v with %d workspace bytes, want %v with %d", c.name, kernels, plan.WorkBytes, c.kernels, c.work)
		}
	}
}

// reductionDims merges contiguous neighbours of one kind and drops
// dimensions of size 1.
func TestReductionDims(t *testing.T) {
	ks, kst, rs, rst, kr, rr := reductionDims(ir.Shape{8, 1, 128, 768}, []int{0, 2})
	if kr != 1 || rr != 1 || ks[0] != 768 || kst[0] != 1 || rs[0] != 1024 || rst[0] != 768 {
		t.Errorf("bias gradient: kept %v/%v (%d), reduced %v/%v (%d)", ks[:kr], kst[:kr], kr, rs[:rr], rst[:rr], rr)
	}
	ks, kst, rs, rst, kr, rr = reductionDims(ir.Shape{4, 3, 50}, []int{0, 2})
	if kr != 1 || rr != 2 || ks[0] != 3 || kst[0] != 50 || rs[0] != 4 || rst[0] != 150 || rs[1] != 50 || rst[1] != 1 {
		t.Errorf("outer and inner: kept %v/%v (%d), reduced %v/%v (%d)", ks[:kr], kst[:kr], kr, rs[:rr], rst[:rr], rr)
	}
}
