package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"hap/cpu"
	"hap/cuda"
	"hap/ir"
)

// opCase is one op under test: build emits it (as the graph's last op)
// from leaves it declares.
type opCase struct {
	name  string
	build func(b *ir.Builder) ir.TensorID
}

func prm(b *ir.Builder, name string, shape ...int) ir.TensorID { return b.Param(name, shape...) }

// opCases covers every operator kind the CUDA support table maps to a
// kernel, cuBLAS or a copy (TestOpSuiteCoversMappedKinds checks it).
var opCases = []opCase{
	{"relu", func(b *ir.Builder) ir.TensorID { return b.ReLU(prm(b, "x", 5, 7)) }},
	{"gelu", func(b *ir.Builder) ir.TensorID { return b.GELU(prm(b, "x", 5, 7)) }},
	{"sigmoid", func(b *ir.Builder) ir.TensorID { return b.Sigmoid(prm(b, "x", 5, 7)) }},
	{"tanh", func(b *ir.Builder) ir.TensorID { return b.Tanh(prm(b, "x", 5, 7)) }},
	{"relu_grad", emit2(ir.OpReLUGrad, ir.Attrs{}, 5, 7)},
	{"gelu_grad", emit2(ir.OpGELUGrad, ir.Attrs{}, 5, 7)},
	{"sigmoid_grad", emit2(ir.OpSigmoidGrad, ir.Attrs{}, 5, 7)},
	{"tanh_grad", emit2(ir.OpTanhGrad, ir.Attrs{}, 5, 7)},
	{"add", func(b *ir.Builder) ir.TensorID { return b.Add(prm(b, "a", 130), prm(b, "b", 130)) }},
	{"mul", func(b *ir.Builder) ir.TensorID { return b.Mul(prm(b, "a", 6, 5), prm(b, "b", 6, 5)) }},
	{"bias", func(b *ir.Builder) ir.TensorID { return b.Bias(prm(b, "x", 4, 6), prm(b, "b", 6)) }},
	{"bias/two-axes", func(b *ir.Builder) ir.TensorID { return b.Bias(prm(b, "x", 3, 4, 5), prm(b, "b", 3, 5), 0, 2) }},
	{"dropout", func(b *ir.Builder) ir.TensorID { return b.Dropout(prm(b, "x", 9, 13), 0.4) }},
	{"dropout/shard", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpDropout, ir.Attrs{Rate: 0.3, Seed: 12345, Offset: []int{2, 3}, Shape: []int{10, 8}}, prm(b, "x", 3, 5))[0]
	}},
	{"softmax", func(b *ir.Builder) ir.TensorID { return b.Softmax(prm(b, "x", 5, 37)) }},
	{"log_softmax", func(b *ir.Builder) ir.TensorID { return b.LogSoftmax(prm(b, "x", 2, 3, 37)) }},
	{"softmax_grad", emit2(ir.OpSoftmaxGrad, ir.Attrs{}, 5, 37)},
	{"log_softmax_grad", emit2(ir.OpLogSoftmaxGrad, ir.Attrs{}, 5, 37)},
	{"layer_norm", func(b *ir.Builder) ir.TensorID {
		return b.LayerNorm(prm(b, "x", 5, 37), prm(b, "g", 37), prm(b, "b", 37))
	}},
	{"layer_norm_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpLayerNormGrad, ir.Attrs{Eps: 1e-5}, prm(b, "x", 5, 37), prm(b, "g", 37), prm(b, "dy", 5, 37))[0]
	}},
	{"embedding", func(b *ir.Builder) ir.TensorID {
		return b.Embedding(b.Input("ids", ir.Int64, 4, 3), prm(b, "tab", 7, 5))
	}},
	{"embedding/partial", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpEmbedding, ir.Attrs{Partial: true, Offset: []int{3}}, b.Input("ids", ir.Int64, 4, 3), prm(b, "tab", 4, 5))[0]
	}},
	{"embedding_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpEmbeddingGrad, ir.Attrs{Shape: []int{7, 5}}, b.Input("ids", ir.Int64, 4, 3), prm(b, "dy", 4, 3, 5))[0]
	}},
	{"embedding_grad/partial", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpEmbeddingGrad, ir.Attrs{Shape: []int{4, 5}, Partial: true, Offset: []int{3}}, b.Input("ids", ir.Int64, 4, 3), prm(b, "dy", 4, 3, 5))[0]
	}},
	{"cross_entropy", func(b *ir.Builder) ir.TensorID { return b.CrossEntropy(prm(b, "x", 6, 9), b.Label("y", 6)) }},
	{"cross_entropy_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpCrossEntropyGrad, ir.Attrs{}, prm(b, "x", 6, 9), b.Label("y", 6), prm(b, "dl"))[0]
	}},
	{"nll_loss", func(b *ir.Builder) ir.TensorID { return b.NLLLoss(prm(b, "x", 6, 9), b.Label("y", 6)) }},
	{"nll_loss_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpNLLLossGrad, ir.Attrs{Shape: []int{6, 9}}, b.Label("y", 6), prm(b, "dl"))[0]
	}},
	{"reduce_sum/outer-inner", func(b *ir.Builder) ir.TensorID { return b.ReduceSum(prm(b, "x", 3, 4, 5), 0, 2) }},
	{"reduce_sum/middle", func(b *ir.Builder) ir.TensorID { return b.ReduceSum(prm(b, "x", 3, 4, 5), 1) }},
	{"reduce_sum/all", func(b *ir.Builder) ir.TensorID { return b.ReduceSum(prm(b, "x", 3, 4), 0, 1) }},
	{"fill_like", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpFillLike, ir.Attrs{Scale: 0.5}, prm(b, "x", 3, 4))[0]
	}},
	{"sgd_update", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpSGDUpdate, ir.Attrs{LR: 0.1}, prm(b, "p", 3, 4), prm(b, "g", 3, 4))[0]
	}},
	{"adam_update", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpAdamUpdate, ir.Attrs{LR: 0.01, Betas: []float64{0.9, 0.999}, Eps: 1e-8},
			prm(b, "p", 3, 4), prm(b, "g", 3, 4), prm(b, "m", 3, 4), prm(b, "v", 3, 4), prm(b, "step"))[0]
	}},
	{"permute", func(b *ir.Builder) ir.TensorID { return b.Permute(prm(b, "x", 2, 3, 4), 2, 0, 1) }},
	{"concat", func(b *ir.Builder) ir.TensorID { return b.Concat(1, prm(b, "a", 3, 2, 4), prm(b, "b", 3, 3, 4)) }},
	{"split", func(b *ir.Builder) ir.TensorID { return b.Split(prm(b, "x", 3, 5, 2), 1, 2, 3)[0] }},
	{"slice", func(b *ir.Builder) ir.TensorID { return b.Slice(prm(b, "x", 3, 5, 2), 1, 1, 4) }},
	{"pad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpPad, ir.Attrs{Axis: 1, Start: 1, Shape: []int{3, 6, 2}}, prm(b, "x", 3, 3, 2))[0]
	}},
	{"dynamic_slice", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpDynamicSlice, ir.Attrs{Axis: 0, Sizes: []int{2, 3, 1}, Rank: 1}, prm(b, "x", 6, 4))[0]
	}},
	{"reshape", func(b *ir.Builder) ir.TensorID { return b.Reshape(prm(b, "x", 3, 4), 12) }},
	{"reshape/int64", func(b *ir.Builder) ir.TensorID { return b.Reshape(b.Input("ids", ir.Int64, 3, 4), 12) }},
	{"replicate", func(b *ir.Builder) ir.TensorID { return b.Emit(ir.OpReplicate, ir.Attrs{}, prm(b, "x", 3, 4))[0] }},
	{"matmul", func(b *ir.Builder) ir.TensorID { return b.MatMul(prm(b, "x", 6, 4), prm(b, "w", 4, 5)) }},
	{"matmul/batched-weight", func(b *ir.Builder) ir.TensorID { return b.MatMul(prm(b, "x", 3, 6, 4), prm(b, "w", 4, 5)) }},
	{"matmul/trans-b", func(b *ir.Builder) ir.TensorID { return b.MatMulT(prm(b, "x", 6, 4), prm(b, "w", 5, 4), false, true) }},
	{"matmul/trans-a", func(b *ir.Builder) ir.TensorID { return b.MatMulT(prm(b, "x", 4, 6), prm(b, "w", 4, 5), true, false) }},
	{"matmul/same-rank", func(b *ir.Builder) ir.TensorID { return b.MatMul(prm(b, "x", 3, 6, 4), prm(b, "w", 3, 4, 5)) }},
	{"matmul/batched-trans-both", func(b *ir.Builder) ir.TensorID {
		return b.MatMulT(prm(b, "x", 2, 4, 6), prm(b, "w", 2, 5, 4), true, true)
	}},
}

// emit2 emits a two-input same-shape op.
func emit2(kind ir.OpKind, a ir.Attrs, shape ...int) func(b *ir.Builder) ir.TensorID {
	return func(b *ir.Builder) ir.TensorID {
		return b.Emit(kind, a, prm(b, "a", shape...), prm(b, "b", shape...))[0]
	}
}

// buildCase returns the graph holding the case's op as its last op.
func buildCase(t *testing.T, c opCase, dt ir.DType) (*ir.Graph, *ir.Op) {
	t.Helper()
	b := ir.NewBuilder(c.name, dt)
	c.build(b)
	g, err := b.Finish(ir.NoTensor)
	if err != nil {
		t.Fatalf("building %s: %v", c.name, err)
	}
	return g, &g.Ops[len(g.Ops)-1]
}

// feed makes a deterministic value for every input of op.
func feed[F cpu.Float](g *ir.Graph, op *ir.Op, seed uint64) []*cpu.Tensor[F] {
	rng := rand.New(rand.NewPCG(seed, 7))
	var ins []*cpu.Tensor[F]
	for i, id := range op.Inputs {
		t := g.Tensor(id)
		v := cpu.NewTensor[F](t.Shape, t.DType)
		if t.DType == ir.Int64 {
			// Ids and labels index the next input's last dim (logits,
			// tables); partial embeddings also get ids outside the shard.
			lim := 7
			switch op.Kind {
			case ir.OpCrossEntropy, ir.OpCrossEntropyGrad, ir.OpNLLLoss:
				lim = g.Tensor(op.Inputs[0]).Shape[1]
			case ir.OpNLLLossGrad:
				lim = op.Attrs.Shape[1]
			case ir.OpEmbedding, ir.OpEmbeddingGrad:
				lim = 7
				if op.Attrs.Partial {
					lim = 10
				}
			case ir.OpReshape:
				lim = 1 << 40
			}
			for j := range v.Ints {
				v.Ints[j] = int64(rng.IntN(lim))
			}
		} else {
			for j := range v.Data {
				v.Data[j] = F(rng.Float64()*4 - 2)
			}
			if op.Kind == ir.OpAdamUpdate && i == 3 {
				for j := range v.Data { // v ≥ 0
					v.Data[j] = F(math.Abs(float64(v.Data[j])))
				}
			}
			if op.Kind == ir.OpAdamUpdate && i == 4 {
				v.Data[0] = 3
			}
		}
		ins = append(ins, v)
	}
	return ins
}

func bytesOf[F cpu.Float](t *cpu.Tensor[F]) []byte {
	if t.Ints != nil {
		return cuda.Bytes(t.Ints)
	}
	return cuda.Bytes(t.Data)
}

// runOnDevice plans op, runs it on dev over copies of ins, and returns the
// outputs. Outputs start as all-ones bytes (NaN), so an element the plan
// never writes shows.
func runOnDevice[F cpu.Float](dev *cuda.Device, g *ir.Graph, op *ir.Op, ins []*cpu.Tensor[F], opt cuda.PlanOptions) ([]*cpu.Tensor[F], error) {
	var inT, outT []*ir.Tensor
	for _, id := range op.Inputs {
		inT = append(inT, g.Tensor(id))
	}
	for _, id := range op.Outputs {
		outT = append(outT, g.Tensor(id))
	}
	plan, err := cuda.PlanOp(op, inT, outT, opt)
	if err != nil {
		return nil, err
	}
	outs := make([]*cpu.Tensor[F], len(outT))
	for i, t := range outT {
		outs[i] = cpu.NewTensor[F](t.Shape, t.DType)
	}
	err = dev.Do(func(c *cuda.Ctx) error {
		var bufs cuda.Buffers
		var all []cuda.DevicePtr
		defer func() {
			for _, p := range all {
				c.Free(p)
			}
		}()
		alloc := func(n int) (cuda.DevicePtr, error) {
			p, err := c.Alloc(n)
			if err == nil {
				all = append(all, p)
			}
			return p, err
		}
		for _, v := range ins {
			b := bytesOf(v)
			p, err := alloc(len(b))
			if err != nil {
				return err
			}
			if err := c.CopyHtoD(p, b); err != nil {
				return err
			}
			bufs.In = append(bufs.In, p)
		}
		for _, v := range outs {
			b := bytesOf(v)
			p, err := alloc(len(b))
			if err != nil {
				return err
			}
			junk := make([]byte, len(b))
			for i := range junk {
				junk[i] = 0xff
			}
			if err := c.CopyHtoD(p, junk); err != nil {
				return err
			}
			bufs.Out = append(bufs.Out, p)
		}
		if plan.WorkBytes > 0 {
			p, err := alloc(int(plan.WorkBytes))
			if err != nil {
				return err
			}
			bufs.Work = p
		}
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		if err := c.Run(plan, bufs, s); err != nil {
			return err
		}
		if err := c.SyncStream(s); err != nil {
			return err
		}
		for i, v := range outs {
			if err := c.CopyDtoH(bytesOf(v), bufs.Out[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return outs, err
}

// compare checks got against the CPU reference want.
func compare[F cpu.Float](want, got *cpu.Tensor[F], tol float64) error {
	if want.Ints != nil {
		for i := range want.Ints {
			if want.Ints[i] != got.Ints[i] {
				return fmt.Errorf("int element %d: got %d, want %d", i, got.Ints[i], want.Ints[i])
			}
		}
		return nil
	}
	for i := range want.Data {
		w, g := float64(want.Data[i]), float64(got.Data[i])
		if math.IsNaN(g) != math.IsNaN(w) || math.Abs(w-g) > tol*(1+math.Abs(w)) {
			return fmt.Errorf("element %d of %d: got %v, want %v", i, len(want.Data), g, w)
		}
	}
	return nil
}

// runOpSuite runs every case in both float types on dev and compares
// with package cpu.
func runOpSuite(t *testing.T, dev *cuda.Device, opt cuda.PlanOptions) {
	for _, c := range opCases {
		t.Run(c.name+"/f32", func(t *testing.T) { runCase[float32](t, dev, c, ir.Float32, 1e-4, opt) })
		t.Run(c.name+"/f64", func(t *testing.T) { runCase[float64](t, dev, c, ir.Float64, 1e-10, opt) })
	}
}

func runCase[F cpu.Float](t *testing.T, dev *cuda.Device, c opCase, dt ir.DType, tol float64, opt cuda.PlanOptions) {
	g, op := buildCase(t, c, dt)
	ins := feed[F](g, op, 42)
	want := make([]*cpu.Tensor[F], len(op.Outputs))
	for i, id := range op.Outputs {
		want[i] = cpu.NewTensor[F](g.Tensor(id).Shape, g.Tensor(id).DType)
	}
	if err := cpu.Exec(nil, op, ins, want); err != nil {
		t.Fatalf("cpu reference: %v", err)
	}
	got, err := runOnDevice(dev, g, op, ins, opt)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if err := compare(want[i], got[i], tol); err != nil {
			t.Errorf("output %d (%s): %v", i, g.Tensor(op.Outputs[i]).Name, err)
		}
	}
}
