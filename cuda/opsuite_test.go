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

// opCases covers every operator kind the CUDA support table maps to
// kernels, cuBLAS or a copy (TestOpSuiteCoversMappedKinds checks it), with
// odd sizes so no loop divides evenly.
var opCases = []opCase{
	{"relu", func(b *ir.Builder) ir.TensorID { return b.ReLU(prm(b, "x", 5, 7)) }},
	{"gelu", func(b *ir.Builder) ir.TensorID { return b.GELU(prm(b, "x", 5, 7)) }},
	{"sigmoid", func(b *ir.Builder) ir.TensorID { return b.Sigmoid(prm(b, "x", 5, 7)) }},
	{"tanh", func(b *ir.Builder) ir.TensorID { return b.Tanh(prm(b, "x", 5, 7)) }},
	{"relu_grad", emit2(ir.OpReLUGrad, ir.Attrs{}, 5, 7)},
	{"gelu_grad", emit2(ir.OpGELUGrad, ir.Attrs{}, 5, 7)},
	{"sigmoid_grad", emit2(ir.OpSigmoidGrad, ir.Attrs{}, 5, 7)},
	{"tanh_grad", emit2(ir.OpTanhGrad, ir.Attrs{}, 5, 7)},
	{"silu", func(b *ir.Builder) ir.TensorID { return b.SiLU(prm(b, "x", 5, 7)) }},
	{"hardswish", func(b *ir.Builder) ir.TensorID { return b.HardSwish(prm(b, "x", 5, 7)) }},
	{"hardsigmoid", func(b *ir.Builder) ir.TensorID { return b.HardSigmoid(prm(b, "x", 5, 7)) }},
	{"silu_grad", emit2(ir.OpSiLUGrad, ir.Attrs{}, 5, 7)},
	{"swiglu", func(b *ir.Builder) ir.TensorID { return b.SwiGLU(prm(b, "gate", 5, 7), prm(b, "up", 5, 7)) }},
	{"swiglu/empty", func(b *ir.Builder) ir.TensorID { return b.SwiGLU(prm(b, "gate", 0, 7), prm(b, "up", 0, 7)) }},
	{"swiglu_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpSwiGLUGrad, ir.Attrs{}, prm(b, "gate", 3, 5, 7), prm(b, "up", 3, 5, 7), prm(b, "dy", 3, 5, 7))[0]
	}},
	{"swiglu_grad/empty", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpSwiGLUGrad, ir.Attrs{}, prm(b, "gate", 0, 7), prm(b, "up", 0, 7), prm(b, "dy", 0, 7))[0]
	}},
	{"hardswish_grad", emit2(ir.OpHardSwishGrad, ir.Attrs{}, 5, 7)},
	{"hardsigmoid_grad", emit2(ir.OpHardSigmoidGrad, ir.Attrs{}, 5, 7)},
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
	{"layer_norm_grad/tall", func(b *ir.Builder) ir.TensorID { // dgamma and dbeta split into row ranges
		return b.Emit(ir.OpLayerNormGrad, ir.Attrs{Eps: 1e-5}, prm(b, "x", 75, 5), prm(b, "g", 5), prm(b, "dy", 75, 5))[0]
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
	{"gather/middle", func(b *ir.Builder) ir.TensorID {
		return b.Gather(prm(b, "x", 3, 5, 4), 1, b.Input("idx", ir.Int64, 3, 7, 4))
	}},
	{"gather/first", func(b *ir.Builder) ir.TensorID { return b.Gather(prm(b, "x", 5, 3), 0, b.Input("idx", ir.Int64, 2, 3)) }},
	{"gather/last", func(b *ir.Builder) ir.TensorID {
		return b.Gather(prm(b, "x", 3, 4, 5), 2, b.Input("idx", ir.Int64, 3, 4, 9))
	}},
	{"gather_grad/middle", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpGatherGrad, ir.Attrs{Axis: 1, Shape: []int{3, 5, 4}}, b.Input("idx", ir.Int64, 3, 7, 4), prm(b, "dy", 3, 7, 4))[0]
	}},
	{"gather_grad/last", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpGatherGrad, ir.Attrs{Axis: 2, Shape: []int{3, 4, 5}}, b.Input("idx", ir.Int64, 3, 4, 9), prm(b, "dy", 3, 4, 9))[0]
	}},
	{"gather_grad/few-positions", func(b *ir.Builder) ir.TensorID { // rows of dx no position names stay zero
		return b.Emit(ir.OpGatherGrad, ir.Attrs{Axis: 0, Shape: []int{9, 2}}, b.Input("idx", ir.Int64, 2, 2), prm(b, "dy", 2, 2))[0]
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
	// Long sums take the split (column) and block-per-output (row) paths:
	// a bias gradient's two outer dimensions merged and split into 45
	// ranges of 33 rows; a middle dimension split in two; the innermost
	// dimension a block per output, alone and with an outer one.
	{"reduce_sum/split-columns", func(b *ir.Builder) ir.TensorID { return b.ReduceSum(prm(b, "x", 40, 37, 3), 0, 1) }},
	{"reduce_sum/split-middle", func(b *ir.Builder) ir.TensorID { return b.ReduceSum(prm(b, "x", 3, 70, 7), 1) }},
	{"reduce_sum/rows", func(b *ir.Builder) ir.TensorID { return b.ReduceSum(prm(b, "x", 5, 300), 1) }},
	{"reduce_sum/rows-outer-inner", func(b *ir.Builder) ir.TensorID { return b.ReduceSum(prm(b, "x", 4, 3, 50), 0, 2) }},
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
	{"attention", func(b *ir.Builder) ir.TensorID {
		return b.Attention(prm(b, "q", 2, 3, 5, 4), prm(b, "k", 2, 3, 7, 4), prm(b, "v", 2, 3, 7, 6), false)
	}},
	{"attention/causal", func(b *ir.Builder) ir.TensorID {
		return b.Attention(prm(b, "q", 3, 6, 4), prm(b, "k", 3, 6, 4), prm(b, "v", 3, 6, 5), true)
	}},
	{"attention/no-keys", func(b *ir.Builder) ir.TensorID {
		return b.Attention(prm(b, "q", 2, 3, 4), prm(b, "k", 2, 0, 4), prm(b, "v", 2, 0, 5), false)
	}},
	{"attention_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpAttentionGrad, ir.Attrs{Scale: 0.5}, prm(b, "q", 2, 3, 5, 4), prm(b, "k", 2, 3, 7, 4),
			prm(b, "v", 2, 3, 7, 6), prm(b, "dy", 2, 3, 5, 6))[0]
	}},
	{"attention_grad/causal", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpAttentionGrad, ir.Attrs{Scale: 0.4, Causal: true}, prm(b, "q", 3, 6, 4), prm(b, "k", 3, 6, 4),
			prm(b, "v", 3, 6, 5), prm(b, "dy", 3, 6, 5))[0]
	}},
	{"attention_grad/no-queries", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpAttentionGrad, ir.Attrs{Scale: 0.4}, prm(b, "q", 2, 0, 4), prm(b, "k", 2, 3, 4),
			prm(b, "v", 2, 3, 5), prm(b, "dy", 2, 0, 5))[0]
	}},
	{"attention/mask", func(b *ir.Builder) ir.TensorID {
		return b.AttentionWith(prm(b, "q", 2, 3, 5, 4), prm(b, "k", 2, 3, 7, 4), prm(b, "v", 2, 3, 7, 6), prm(b, "m", 5, 7), false, 1)
	}},
	{"attention/gqa-causal-mask", func(b *ir.Builder) ir.TensorID {
		return b.AttentionWith(prm(b, "q", 2, 6, 5, 4), prm(b, "k", 2, 2, 5, 4), prm(b, "v", 2, 2, 5, 3), prm(b, "m", 5, 5), true, 3)
	}},
	{"attention/gqa", func(b *ir.Builder) ir.TensorID {
		return b.AttentionWith(prm(b, "q", 3, 4, 5, 4), prm(b, "k", 3, 2, 7, 4), prm(b, "v", 3, 2, 7, 3), ir.NoTensor, false, 2)
	}},
	{"attention_grad/gqa-mask", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpAttentionGrad, ir.Attrs{Scale: 0.5, KVGroup: 3, Causal: true}, prm(b, "q", 2, 6, 5, 4), prm(b, "k", 2, 2, 5, 4),
			prm(b, "v", 2, 2, 5, 3), prm(b, "dy", 2, 6, 5, 3), prm(b, "m", 5, 5))[0]
	}},
	{"rotary", func(b *ir.Builder) ir.TensorID {
		return b.Rotary(prm(b, "x", 2, 3, 5, 6), prm(b, "cos", 5, 3), prm(b, "sin", 5, 3))
	}},
	{"rotary/full-table", func(b *ir.Builder) ir.TensorID {
		return b.Rotary(prm(b, "x", 3, 7, 4), prm(b, "cos", 7, 4), prm(b, "sin", 7, 4))
	}},
	{"rotary_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpRotaryGrad, ir.Attrs{}, prm(b, "dy", 2, 3, 5, 6), prm(b, "cos", 5, 6), prm(b, "sin", 5, 6))[0]
	}},
	{"conv2d", func(b *ir.Builder) ir.TensorID {
		return b.Conv2D(prm(b, "x", 3, 2, 7, 6), prm(b, "w", 4, 2, 3, 3), 2, 1)
	}},
	{"conv2d/unpadded", func(b *ir.Builder) ir.TensorID {
		return b.Conv2D(prm(b, "x", 2, 3, 5, 5), prm(b, "w", 2, 3, 3, 2), 1, 0)
	}},
	{"conv2d/pointwise", func(b *ir.Builder) ir.TensorID {
		return b.Conv2D(prm(b, "x", 2, 3, 4, 5), prm(b, "w", 4, 3, 1, 1), 1, 0)
	}},
	{"conv2d_grad_input", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpConv2DGradInput, ir.Attrs{Stride: 2, Pad: 1, Shape: []int{3, 2, 7, 6}}, prm(b, "dy", 3, 4, 4, 3), prm(b, "w", 4, 2, 3, 3))[0]
	}},
	{"conv2d_grad_input/pointwise", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpConv2DGradInput, ir.Attrs{Stride: 1, Shape: []int{2, 3, 4, 5}}, prm(b, "dy", 2, 4, 4, 5), prm(b, "w", 4, 3, 1, 1))[0]
	}},
	{"conv2d_grad_weight", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpConv2DGradWeight, ir.Attrs{Stride: 2, Pad: 1, Shape: []int{4, 2, 3, 3}}, prm(b, "x", 3, 2, 7, 6), prm(b, "dy", 3, 4, 4, 3))[0]
	}},
	{"conv2d_grad_weight/one-output", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpConv2DGradWeight, ir.Attrs{Stride: 1, Shape: []int{1, 3, 3, 2}}, prm(b, "x", 2, 3, 5, 5), prm(b, "dy", 2, 1, 3, 4))[0]
	}},
	{"conv2d/grouped", func(b *ir.Builder) ir.TensorID {
		return b.GroupedConv2D(prm(b, "x", 3, 4, 7, 6), prm(b, "w", 6, 2, 3, 3), 2, 1, 2)
	}},
	{"conv2d/depthwise", func(b *ir.Builder) ir.TensorID {
		return b.GroupedConv2D(prm(b, "x", 2, 3, 5, 5), prm(b, "w", 3, 1, 3, 3), 1, 1, 3)
	}},
	{"conv2d/empty-shard", func(b *ir.Builder) ir.TensorID {
		return b.GroupedConv2D(prm(b, "x", 2, 0, 5, 5), prm(b, "w", 0, 1, 3, 3), 1, 1, 3)
	}},
	{"conv2d_grad_input/grouped", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpConv2DGradInput, ir.Attrs{Stride: 2, Pad: 1, Groups: 2, Shape: []int{3, 4, 7, 6}}, prm(b, "dy", 3, 6, 4, 3), prm(b, "w", 6, 2, 3, 3))[0]
	}},
	{"conv2d_grad_input/depthwise", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpConv2DGradInput, ir.Attrs{Stride: 1, Pad: 1, Groups: 3, Shape: []int{2, 3, 5, 5}}, prm(b, "dy", 2, 3, 5, 5), prm(b, "w", 3, 1, 3, 3))[0]
	}},
	{"conv2d_grad_weight/grouped", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpConv2DGradWeight, ir.Attrs{Stride: 2, Pad: 1, Groups: 2, Shape: []int{6, 2, 3, 3}}, prm(b, "x", 3, 4, 7, 6), prm(b, "dy", 3, 6, 4, 3))[0]
	}},
	{"conv2d_grad_weight/depthwise", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpConv2DGradWeight, ir.Attrs{Stride: 1, Pad: 1, Groups: 3, Shape: []int{3, 1, 3, 3}}, prm(b, "x", 2, 3, 5, 5), prm(b, "dy", 2, 3, 5, 5))[0]
	}},
	{"batch_norm", bnCase(ir.OpBatchNorm, 3, 5, 4, 3)},
	{"batch_norm/2d", bnCase(ir.OpBatchNorm, 7, 3)},
	{"batch_norm_grad", bnCase(ir.OpBatchNormGrad, 3, 5, 4, 3)},
	{"batch_norm_grad/long", bnCase(ir.OpBatchNormGrad, 9, 2, 11)}, // more elements per channel than threads
	{"batch_norm_grad/empty-batch", bnCase(ir.OpBatchNormGrad, 0, 4, 3)},
	{"batch_norm_running", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpBatchNormRunning, ir.Attrs{Scale: 0.25, Momentum: 0.1}, prm(b, "rm", 5), prm(b, "rv", 5), prm(b, "s", 5), prm(b, "q", 5))[0]
	}},
	{"max_pool2d/padded", func(b *ir.Builder) ir.TensorID { return b.MaxPool2DPadded(prm(b, "x", 2, 3, 7, 6), 3, 2, 1) }},
	{"max_pool2d_grad/padded", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpMaxPool2DGrad, ir.Attrs{Kernel: 3, Stride: 2, Pad: 1}, prm(b, "x", 2, 3, 7, 6), prm(b, "dy", 2, 3, 4, 3))[0]
	}},
	{"avg_pool2d", func(b *ir.Builder) ir.TensorID { return b.AvgPool2D(prm(b, "x", 2, 3, 7, 6), 3, 2, 1) }},
	{"avg_pool2d/tiled", func(b *ir.Builder) ir.TensorID { return b.AvgPool2D(prm(b, "x", 2, 3, 4, 6), 2, 2, 0) }},
	{"avg_pool2d_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpAvgPool2DGrad, ir.Attrs{Kernel: 3, Stride: 2, Pad: 1, Shape: []int{2, 3, 7, 6}}, prm(b, "dy", 2, 3, 4, 3))[0]
	}},
	{"max_pool2d", func(b *ir.Builder) ir.TensorID { return b.MaxPool2D(prm(b, "x", 2, 3, 7, 6), 3, 2) }},
	{"max_pool2d/tiled", func(b *ir.Builder) ir.TensorID { return b.MaxPool2D(prm(b, "x", 2, 3, 4, 6), 2, 2) }},
	{"max_pool2d_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpMaxPool2DGrad, ir.Attrs{Kernel: 3, Stride: 2}, prm(b, "x", 2, 3, 7, 6), prm(b, "dy", 2, 3, 3, 2))[0]
	}},
	{"max_pool2d_grad/overlap-stride1", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpMaxPool2DGrad, ir.Attrs{Kernel: 2, Stride: 1}, prm(b, "x", 1, 2, 4, 5), prm(b, "dy", 1, 2, 3, 4))[0]
	}},
	{"adaptive_avg_pool2d", func(b *ir.Builder) ir.TensorID { return b.AdaptiveAvgPool2D(prm(b, "x", 2, 3, 7, 5), 3, 4) }},
	{"adaptive_avg_pool2d/upsample", func(b *ir.Builder) ir.TensorID { return b.AdaptiveAvgPool2D(prm(b, "x", 1, 2, 2, 3), 3, 5) }},
	{"adaptive_avg_pool2d_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpAdaptiveAvgPool2DGrad, ir.Attrs{Shape: []int{2, 3, 7, 5}}, prm(b, "dy", 2, 3, 3, 4))[0]
	}},
	{"adaptive_avg_pool2d_grad/upsample", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpAdaptiveAvgPool2DGrad, ir.Attrs{Shape: []int{1, 2, 2, 3}}, prm(b, "dy", 1, 2, 3, 5))[0]
	}},
	{"top2_gate", func(b *ir.Builder) ir.TensorID { c, _ := b.Top2Gate(prm(b, "x", 11, 4), 3); return c }},
	{"top2_gate/roomy", func(b *ir.Builder) ir.TensorID { c, _ := b.Top2Gate(prm(b, "x", 7, 3), 8); return c }},
	{"top2_gate/grouped", func(b *ir.Builder) ir.TensorID { c, _ := b.Top2Gate(prm(b, "x", 3, 5, 4), 2); return c }},
	{"top2_gate_grad/grouped", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpTop2GateGrad, ir.Attrs{Capacity: 2}, prm(b, "x", 3, 5, 4), prm(b, "dc", 3, 5, 4, 2))[0]
	}},
	{"top2_gate_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpTop2GateGrad, ir.Attrs{Capacity: 3}, prm(b, "x", 11, 4), prm(b, "dc", 11, 4, 3))[0]
	}},
	{"einsum/dispatch", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("tec,td->ecd", prm(b, "m", 6, 3, 2), prm(b, "x", 6, 5))
	}},
	{"einsum/combine", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("tec,ecd->td", prm(b, "c", 6, 3, 2), prm(b, "y", 3, 2, 5))
	}},
	{"einsum/batched-no-permute", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("bij,bjk->bik", prm(b, "x", 3, 4, 5), prm(b, "y", 3, 5, 2))
	}},
	{"einsum/transposed-out", func(b *ir.Builder) ir.TensorID { return b.Einsum("ij,jk->ki", prm(b, "x", 4, 5), prm(b, "y", 5, 3)) }},
	{"einsum/batch-inside", func(b *ir.Builder) ir.TensorID {
		return b.Einsum("abc,cb->ab", prm(b, "x", 4, 3, 5), prm(b, "y", 5, 3))
	}},
	{"einsum/elementwise", func(b *ir.Builder) ir.TensorID { return b.Einsum("ij,ij->ij", prm(b, "x", 4, 5), prm(b, "y", 4, 5)) }},
	// ir/arith.go: broadcasting binary ops (stretched size-1 dims, missing
	// leading dims, on either side), unary maps, scalar forms, keep-dims
	// reductions over one, several and all axes, and the bare norms.
	{"add/broadcast", func(b *ir.Builder) ir.TensorID { return b.Add(prm(b, "a", 3, 1, 5), prm(b, "b", 4, 1)) }},
	{"add/broadcast-bias", func(b *ir.Builder) ir.TensorID { return b.Add(prm(b, "a", 2, 3, 7), prm(b, "b", 7)) }},
	{"add/broadcast-empty", func(b *ir.Builder) ir.TensorID { return b.Add(prm(b, "a", 0, 5), prm(b, "b", 1, 5)) }},
	{"mul/broadcast", func(b *ir.Builder) ir.TensorID { return b.Mul(prm(b, "a", 5, 1), prm(b, "b", 1, 6)) }},
	{"mul/broadcast-inner", func(b *ir.Builder) ir.TensorID { return b.Mul(prm(b, "a", 2, 3, 4, 5), prm(b, "b", 3, 1, 1)) }},
	{"sub", func(b *ir.Builder) ir.TensorID { return b.Sub(prm(b, "a", 5, 7), prm(b, "b", 5, 7)) }},
	{"sub/broadcast", func(b *ir.Builder) ir.TensorID { return b.Sub(prm(b, "a", 4, 1), prm(b, "b", 3, 4, 5)) }},
	{"sub/broadcast-both", func(b *ir.Builder) ir.TensorID { return b.Sub(prm(b, "a", 2, 1, 3), prm(b, "b", 2, 4, 1)) }},
	{"div", func(b *ir.Builder) ir.TensorID { return b.Div(prm(b, "a", 5, 7), prm(b, "b", 5, 7)) }},
	{"div/broadcast", func(b *ir.Builder) ir.TensorID { return b.Div(prm(b, "a", 3, 4, 5), prm(b, "b", 3, 1, 5)) }},
	{"div/broadcast-scalar", func(b *ir.Builder) ir.TensorID { return b.Div(prm(b, "a"), prm(b, "b", 3, 4)) }},
	{"masked_fill", func(b *ir.Builder) ir.TensorID { return b.MaskedFill(prm(b, "x", 5, 7), prm(b, "m", 5, 7), -1e9) }},
	{"masked_fill/attention-mask", func(b *ir.Builder) ir.TensorID {
		return b.MaskedFill(prm(b, "x", 2, 3, 4, 5), prm(b, "m", 4, 5), math.Inf(-1))
	}},
	{"masked_fill/middle", func(b *ir.Builder) ir.TensorID {
		return b.MaskedFill(prm(b, "x", 2, 3, 4, 5), prm(b, "m", 2, 1, 4, 1), 0.25)
	}},
	{"neg", func(b *ir.Builder) ir.TensorID { return b.Neg(prm(b, "x", 5, 7)) }},
	{"exp", func(b *ir.Builder) ir.TensorID { return b.Exp(prm(b, "x", 5, 7)) }},
	{"log", func(b *ir.Builder) ir.TensorID { return b.Log(prm(b, "x", 5, 7)) }},
	{"sqrt", func(b *ir.Builder) ir.TensorID { return b.Sqrt(prm(b, "x", 5, 7)) }},
	{"rsqrt", func(b *ir.Builder) ir.TensorID { return b.Rsqrt(prm(b, "x", 5, 7)) }},
	{"reciprocal", func(b *ir.Builder) ir.TensorID { return b.Reciprocal(prm(b, "x", 5, 7)) }},
	{"pow_scalar/cube", func(b *ir.Builder) ir.TensorID { return b.PowScalar(prm(b, "x", 5, 7), 3) }},
	{"pow_scalar/inverse-square", func(b *ir.Builder) ir.TensorID { return b.PowScalar(prm(b, "x", 5, 7), -2) }},
	{"pow_scalar/zero", func(b *ir.Builder) ir.TensorID { return b.PowScalar(prm(b, "x", 5, 7), 0) }},
	{"pow_scalar/fraction", func(b *ir.Builder) ir.TensorID { return b.PowScalar(prm(b, "x", 5, 7), 1.5) }},
	{"add_scalar", func(b *ir.Builder) ir.TensorID { return b.AddScalar(prm(b, "x", 5, 7), 0.3) }},
	{"mul_scalar", func(b *ir.Builder) ir.TensorID { return b.MulScalar(prm(b, "x", 5, 7), -1.7) }},
	{"mean/last-keep", func(b *ir.Builder) ir.TensorID { return b.Mean(prm(b, "x", 3, 4, 37), true, 2) }},
	{"mean/outer-inner", func(b *ir.Builder) ir.TensorID { return b.Mean(prm(b, "x", 3, 4, 5), false, 0, 2) }},
	{"mean/middle-keep", func(b *ir.Builder) ir.TensorID { return b.Mean(prm(b, "x", 3, 4, 5), true, 1) }},
	{"mean/all", func(b *ir.Builder) ir.TensorID { return b.Mean(prm(b, "x", 3, 4), false, 0, 1) }},
	{"mean/shard", func(b *ir.Builder) ir.TensorID { // a shard of the reduced dim divides by the whole count
		return b.Emit(ir.OpMean, ir.Attrs{Axes: []int{0, 2}, KeepDims: true, Shape: []int{6, 4, 10}}, prm(b, "x", 3, 4, 5))[0]
	}},
	{"var/unbiased-last", func(b *ir.Builder) ir.TensorID { return b.Var(prm(b, "x", 3, 4, 37), 1, true, 2) }},
	{"var/population-outer-inner", func(b *ir.Builder) ir.TensorID { return b.Var(prm(b, "x", 3, 4, 5), 0, false, 0, 2) }},
	{"var/all", func(b *ir.Builder) ir.TensorID { return b.Var(prm(b, "x", 3, 4), 1, false, 0, 1) }},
	{"amax/last-keep", func(b *ir.Builder) ir.TensorID { return b.Amax(prm(b, "x", 3, 4, 37), true, 2) }},
	{"amax/outer-inner", func(b *ir.Builder) ir.TensorID { return b.Amax(prm(b, "x", 3, 4, 5), false, 0, 2) }},
	{"amax/middle", func(b *ir.Builder) ir.TensorID { return b.Amax(prm(b, "x", 3, 4, 5), false, 1) }},
	{"amax_grad/last-keep", amaxGradCase(true, []int{3, 4, 7}, 2)},
	{"amax_grad/outer-inner", amaxGradCase(false, []int{3, 4, 5}, 0, 2)},
	{"amax_grad/middle-keep", amaxGradCase(true, []int{3, 4, 5}, 1)},
	{"amax_grad/all", amaxGradCase(false, []int{3, 4}, 0, 1)},
	{"rms_norm", func(b *ir.Builder) ir.TensorID { return b.RMSNorm(prm(b, "x", 5, 37), prm(b, "w", 37), 1e-6) }},
	{"rms_norm/3d", func(b *ir.Builder) ir.TensorID { return b.RMSNorm(prm(b, "x", 2, 3, 17), prm(b, "w", 17), 1e-5) }},
	{"rms_norm_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpRMSNormGrad, ir.Attrs{Eps: 1e-6}, prm(b, "x", 5, 37), prm(b, "w", 37), prm(b, "dy", 5, 37))[0]
	}},
	{"rms_norm_grad/tall", func(b *ir.Builder) ir.TensorID { // dw split into row ranges
		return b.Emit(ir.OpRMSNormGrad, ir.Attrs{Eps: 1e-6}, prm(b, "x", 75, 5), prm(b, "w", 5), prm(b, "dy", 75, 5))[0]
	}},
	{"rms_norm_grad/empty-rows", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpRMSNormGrad, ir.Attrs{Eps: 1e-6}, prm(b, "x", 0, 5), prm(b, "w", 5), prm(b, "dy", 0, 5))[0]
	}},
	{"layer_norm_bare", func(b *ir.Builder) ir.TensorID { return b.LayerNormBare(prm(b, "x", 5, 37), 1e-5) }},
	{"layer_norm_bare/3d", func(b *ir.Builder) ir.TensorID { return b.LayerNormBare(prm(b, "x", 2, 3, 17), 1e-6) }},
	{"layer_norm_bare_grad", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpLayerNormBareGrad, ir.Attrs{Eps: 1e-5}, prm(b, "x", 5, 37), prm(b, "dy", 5, 37))[0]
	}},
	{"layer_norm_bare_grad/3d", func(b *ir.Builder) ir.TensorID {
		return b.Emit(ir.OpLayerNormBareGrad, ir.Attrs{Eps: 1e-6}, prm(b, "x", 2, 3, 17), prm(b, "dy", 2, 3, 17))[0]
	}},
}

// amaxGradCase is amax_grad over axes of x; feed gives x many ties and
// y its true maxima.
func amaxGradCase(keep bool, shape []int, axes ...int) func(b *ir.Builder) ir.TensorID {
	return func(b *ir.Builder) ir.TensorID {
		a := ir.Attrs{Axes: axes, KeepDims: keep}
		x := prm(b, "x", shape...)
		y := b.Emit(ir.OpAmax, a, x)[0]
		return b.Emit(ir.OpAmaxGrad, a, x, prm(b, "y", b.Shape(y)...), prm(b, "dy", b.Shape(y)...))[0]
	}
}

// emit2 emits a two-input same-shape op.
// bnCase is a batch norm kind on x of the given shape; feed makes its
// sumsq input large enough for a positive variance.
func bnCase(kind ir.OpKind, shape ...int) func(b *ir.Builder) ir.TensorID {
	return func(b *ir.Builder) ir.TensorID {
		c := shape[1]
		per := max(1, ir.Shape(shape).Numel()/c)
		a := ir.Attrs{Eps: 1e-5, Scale: 1 / float64(per)}
		x, s1, s2, g := prm(b, "x", shape...), prm(b, "sum", c), prm(b, "sumsq", c), prm(b, "g", c)
		last := prm(b, "b", c)
		if kind == ir.OpBatchNormGrad {
			last = prm(b, "dy", shape...)
		}
		return b.Emit(kind, a, x, s1, s2, g, last)[0]
	}
}

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
			case ir.OpGather:
				lim = g.Tensor(op.Inputs[0]).Shape[op.Attrs.Axis]
			case ir.OpGatherGrad:
				lim = op.Attrs.Shape[op.Attrs.Axis]
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
			switch op.Kind {
			case ir.OpBatchNorm, ir.OpBatchNormGrad:
				if i == 2 { // sumsq: var = sumsq·k − (sum·k)² ≥ 2k − 4k²
					for j := range v.Data {
						v.Data[j] = F(math.Abs(float64(v.Data[j])) + 4)
					}
				}
			case ir.OpHardSwish, ir.OpHardSigmoid, ir.OpHardSwishGrad, ir.OpHardSigmoidGrad:
				if i == 0 { // both sides of the kinks at ±3
					for j := range v.Data {
						v.Data[j] *= 3
					}
				}
			}
			switch op.Kind {
			case ir.OpLog, ir.OpSqrt, ir.OpRsqrt, ir.OpPowScalar:
				if op.Kind != ir.OpPowScalar || op.Attrs.Value != math.Trunc(op.Attrs.Value) {
					for j := range v.Data { // positive
						v.Data[j] = F(math.Abs(float64(v.Data[j])) + 0.1)
					}
				}
			case ir.OpMaskedFill:
				if i == 1 { // a mask of zeros and ones
					for j := range v.Data {
						v.Data[j] = F(rng.IntN(2))
					}
				}
			case ir.OpAmax:
				if i == 0 && len(v.Data) > 0 { // a NaN propagates to its output
					v.Data[len(v.Data)/2] = F(math.NaN())
				}
			case ir.OpAmaxGrad:
				if i == 0 { // few distinct values: ties
					for j := range v.Data {
						v.Data[j] = F(math.Round(float64(v.Data[j])))
					}
				}
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
	if op.Kind == ir.OpAmaxGrad { // y = amax(x), so the maxima match
		fwd := ir.Op{Kind: ir.OpAmax, Attrs: op.Attrs}
		if err := cpu.Exec(nil, &fwd, ins[:1], ins[1:2]); err != nil {
			panic(err)
		}
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

// TestOpSuiteCoversMappedKinds: every kind that runs on CUDA outside NCCL
// has at least one case in the suite.
func TestOpSuiteCoversMappedKinds(t *testing.T) {
	covered := map[ir.OpKind]bool{}
	for _, c := range opCases {
		_, op := buildCase(t, c, ir.Float32)
		covered[op.Kind] = true
	}
	for _, k := range ir.Kinds() {
		s, ok := cuda.OpSupport(k)
		if !ok || s.Via == cuda.ViaNCCL {
			continue
		}
		if !covered[k] {
			t.Errorf("%s runs on CUDA via %s but no op-suite case covers it", k, s.Via)
		}
	}
}
