package cuda

import (
	"sort"

	"hap/ir"
)

// Via says how the CUDA backend executes an operator kind.
type Via string

const (
	// ViaKernel: one or more of this package's NVRTC kernels.
	ViaKernel Via = "kernel"
	// ViaCUBLAS: a cuBLAS GEMM.
	ViaCUBLAS Via = "cublas"
	// ViaCUBLASKernel: cuBLAS GEMMs with this package's kernels around
	// them (layout changes, row passes).
	ViaCUBLASKernel Via = "cublas+kernel"
	// ViaCopy: a device-to-device copy (the bytes do not change).
	ViaCopy Via = "copy"
	// ViaNCCL: a collective, run by package nccl.
	ViaNCCL Via = "nccl"
	// ViaUnsupported: not on CUDA (PlanOp refuses it, naming the gap).
	// Every ir operator has a CUDA path today; a new operator is listed
	// so until it gets one.
	ViaUnsupported Via = "unsupported"
)

// Support is how one operator kind runs on CUDA.
type Support struct {
	Kind    ir.OpKind
	Via     Via
	Kernels []string // kernel base names (KernelName adds the type suffix)
	Note    string
}

// support is the table; every ir kind must appear (a test checks it).
var support = []Support{
	{ir.OpMatMul, ViaCUBLAS, nil, "cublasGemmEx, or cublas[SD]gemmStridedBatched for batches; row-major via the transposed product"},
	{ir.OpAdd, ViaKernel, []string{"add", "broadcast"}, "broadcast: other shapes, one thread per output, operands indexed by strides (0 along stretched dims)"},
	{ir.OpMul, ViaKernel, []string{"mul", "broadcast"}, "broadcast: other shapes, one thread per output, operands indexed by strides (0 along stretched dims)"},
	{ir.OpBias, ViaKernel, []string{"bias_last", "bias_axes"}, "bias_last when the bias lies along the last axis"},
	{ir.OpReLU, ViaKernel, []string{"relu"}, ""},
	{ir.OpGELU, ViaKernel, []string{"gelu"}, "exact (erf) GELU"},
	{ir.OpSigmoid, ViaKernel, []string{"sigmoid"}, ""},
	{ir.OpTanh, ViaKernel, []string{"tanh"}, ""},
	{ir.OpSiLU, ViaKernel, []string{"silu"}, ""},
	{ir.OpSwiGLU, ViaKernel, []string{"swiglu"}, "silu(gate)·up in one pass"},
	{ir.OpHardSwish, ViaKernel, []string{"hardswish"}, ""},
	{ir.OpHardSigmoid, ViaKernel, []string{"hardsigmoid"}, ""},
	{ir.OpDropout, ViaKernel, []string{"dropout"}, "the same splitmix64 mask as cpu.DropoutKeep, by global index"},
	{ir.OpSoftmax, ViaKernel, []string{"softmax"}, ""},
	{ir.OpLogSoftmax, ViaKernel, []string{"softmax"}, "softmax kernel in log space"},
	{ir.OpLayerNorm, ViaKernel, []string{"layer_norm"}, ""},
	{ir.OpEmbedding, ViaKernel, []string{"embedding"}, "ids outside the vocabulary give NaN rows (the CPU returns an error)"},
	{ir.OpReshape, ViaCopy, nil, ""},
	{ir.OpPermute, ViaKernel, []string{"permute"}, ""},
	{ir.OpConcat, ViaKernel, []string{"axis_copy"}, "one copy per input"},
	{ir.OpSplit, ViaKernel, []string{"axis_copy"}, "one copy per output"},
	{ir.OpSlice, ViaKernel, []string{"axis_copy"}, ""},
	{ir.OpAttention, ViaCUBLASKernel, []string{"attn_softmax", "attn_mask_softmax"}, "scores and output by strided-batched GEMMs, masked row softmax in between (scores in the workspace); grouped-query heads as g·S query rows per key/value head"},
	{ir.OpRotary, ViaKernel, []string{"rotary"}, "one thread per pair of rotated elements"},
	{ir.OpConv2D, ViaCUBLASKernel, []string{"im2col", "gconv"}, "im2col into the workspace (a bounded band of images at a time), then one strided-batched GEMM per band; groups > 1: gconv, one thread per output"},
	{ir.OpBatchNorm, ViaKernel, []string{"bn_apply"}, "statistics from the sums, one thread per element"},
	{ir.OpBatchNormGrad, ViaKernel, []string{"bn_grad_dx", "bn_grad_stats"}, "dx per element; one block per channel for the four per-channel gradients"},
	{ir.OpBatchNormRunning, ViaKernel, []string{"bn_running"}, ""},
	{ir.OpAvgPool2D, ViaKernel, []string{"avg_pool"}, "one thread per output; padding counts as zeros (count_include_pad)"},
	{ir.OpAvgPool2DGrad, ViaKernel, []string{"avg_pool_grad"}, "gather over the windows holding each element (deterministic)"},
	{ir.OpMaxPool2D, ViaKernel, []string{"max_pool", "max_pool_pad"}, "one thread per output; first maximum, NaN propagates; padded: max_pool_pad, over the window's elements inside the image"},
	{ir.OpAdaptiveAvgPool2D, ViaKernel, []string{"adaptive_avg_pool"}, "one thread per output, sums in double"},
	{ir.OpCrossEntropy, ViaKernel, []string{"ce_rows", "sum_to_scalar"}, "labels outside the classes give NaN"},
	{ir.OpNLLLoss, ViaKernel, []string{"nll_rows", "sum_to_scalar"}, "labels outside the classes give NaN"},
	{ir.OpTop2Gate, ViaKernel, []string{"top2_route", "top2_slots", "top2_write"}, "per-token choices, per-expert slot assignment in token order (deterministic)"},
	{ir.OpEinsum, ViaCUBLASKernel, []string{"permute"}, "operands permuted to [batch, m, k] and [batch, k, n], one strided-batched GEMM, result permuted to the output order"},
	{ir.OpReduceSum, ViaKernel, []string{"reduce_sum", "reduce_sum_rows"}, "a block per output over the innermost dimension, else a thread per output and row range (a second pass adds the ranges); deterministic"},
	{ir.OpFillLike, ViaKernel, []string{"fill"}, ""},
	{ir.OpReLUGrad, ViaKernel, []string{"relu_grad"}, ""},
	{ir.OpGELUGrad, ViaKernel, []string{"gelu_grad"}, ""},
	{ir.OpSigmoidGrad, ViaKernel, []string{"sigmoid_grad"}, ""},
	{ir.OpTanhGrad, ViaKernel, []string{"tanh_grad"}, ""},
	{ir.OpSiLUGrad, ViaKernel, []string{"silu_grad"}, ""},
	{ir.OpSwiGLUGrad, ViaKernel, []string{"swiglu_grad"}, "both gradients in one pass, σ recomputed"},
	{ir.OpHardSwishGrad, ViaKernel, []string{"hardswish_grad"}, "PyTorch's slope at ±3"},
	{ir.OpHardSigmoidGrad, ViaKernel, []string{"hardsigmoid_grad"}, "zero at ±3, as PyTorch"},
	{ir.OpSoftmaxGrad, ViaKernel, []string{"softmax_grad"}, ""},
	{ir.OpLogSoftmaxGrad, ViaKernel, []string{"softmax_grad"}, "softmax_grad in log space"},
	{ir.OpLayerNormGrad, ViaKernel, []string{"layer_norm_grad_dx", "layer_norm_grad_gb"}, "row statistics pass through the workspace"},
	{ir.OpEmbeddingGrad, ViaKernel, []string{"embedding_grad"}, "atomicAdd: last bits vary between runs"},
	{ir.OpPad, ViaKernel, []string{"axis_copy"}, "after zeroing the output"},
	{ir.OpAttentionGrad, ViaCUBLASKernel, []string{"attn_softmax", "attn_mask_softmax", "attn_softmax_grad"}, "probabilities recomputed; five strided-batched GEMMs"},
	{ir.OpRotaryGrad, ViaKernel, []string{"rotary"}, "the rotary kernel's adjoint mode"},
	{ir.OpConv2DGradInput, ViaCUBLASKernel, []string{"col2im", "gconv_grad_input"}, "Wᵀ·dy per image (strided-batched GEMM), then col2im as a gather (deterministic); groups > 1: gconv_grad_input, a gather per element"},
	{ir.OpConv2DGradWeight, ViaCUBLASKernel, []string{"im2col", "permute", "gconv_grad_weight"}, "dy permuted to [O, images·pixels], one GEMM against the band's columns, bands accumulated (β = 1); groups > 1: gconv_grad_weight, a thread per weight"},
	{ir.OpMaxPool2DGrad, ViaKernel, []string{"max_pool_grad", "max_pool_pad_grad"}, "gather: each input element sums the windows whose argmax it is (deterministic)"},
	{ir.OpAdaptiveAvgPool2DGrad, ViaKernel, []string{"adaptive_avg_pool_grad"}, "gather over the bins holding each element (deterministic)"},
	{ir.OpCrossEntropyGrad, ViaKernel, []string{"ce_grad"}, ""},
	{ir.OpNLLLossGrad, ViaKernel, []string{"nll_grad"}, ""},
	{ir.OpTop2GateGrad, ViaKernel, []string{"top2_route", "top2_slots", "top2_grad"}, "routing recomputed, then one thread per token"},
	{ir.OpSGDUpdate, ViaKernel, []string{"sgd"}, ""},
	{ir.OpAdamUpdate, ViaKernel, []string{"adam"}, "in double precision, as the CPU backend"},
	{ir.OpAllGather, ViaNCCL, nil, "nccl: ncclAllGather (padded) or one ncclBroadcast per root (grouped)"},
	{ir.OpReduceScatter, ViaNCCL, nil, "nccl: ncclReduceScatter (padded) or one ncclReduce per root (grouped)"},
	{ir.OpAllReduce, ViaNCCL, nil, "nccl: ncclAllReduce"},
	{ir.OpAllToAll, ViaNCCL, nil, "nccl: grouped ncclSend/ncclRecv"},
	{ir.OpDynamicSlice, ViaKernel, []string{"axis_copy"}, ""},
	{ir.OpReplicate, ViaCopy, nil, ""},
	{ir.OpSub, ViaKernel, []string{"sub", "broadcast"}, "broadcast: other shapes, one thread per output, operands indexed by strides (0 along stretched dims)"},
	{ir.OpDiv, ViaKernel, []string{"div", "broadcast"}, "broadcast: other shapes, one thread per output, operands indexed by strides (0 along stretched dims)"},
	{ir.OpNeg, ViaKernel, []string{"neg"}, ""},
	{ir.OpExp, ViaKernel, []string{"exp"}, ""},
	{ir.OpLog, ViaKernel, []string{"log"}, ""},
	{ir.OpSqrt, ViaKernel, []string{"sqrt"}, ""},
	{ir.OpRsqrt, ViaKernel, []string{"rsqrt"}, "1/sqrt, not the approximate rsqrt"},
	{ir.OpReciprocal, ViaKernel, []string{"reciprocal"}, ""},
	{ir.OpPowScalar, ViaKernel, []string{"pow_scalar"}, "integer exponents by repeated multiplication (ir.PowExact)"},
	{ir.OpAddScalar, ViaKernel, []string{"add_scalar"}, ""},
	{ir.OpMulScalar, ViaKernel, []string{"mul_scalar"}, ""},
	{ir.OpMaskedFill, ViaKernel, []string{"broadcast"}, "the mask broadcast by strides"},
	{ir.OpMean, ViaKernel, []string{"mean"}, "one thread per output, sums in double, divided by the unsharded count"},
	{ir.OpVar, ViaKernel, []string{"var"}, "one thread per output, two passes in double"},
	{ir.OpAmax, ViaKernel, []string{"amax"}, "one thread per output; NaN propagates"},
	{ir.OpAmaxGrad, ViaKernel, []string{"amax_grad"}, "one thread per output writes its group: dy shared among the maxima"},
	{ir.OpRMSNorm, ViaKernel, []string{"rms_norm"}, ""},
	{ir.OpRMSNormGrad, ViaKernel, []string{"rms_norm_grad_dx", "rms_norm_grad_w"}, "row 1/rms through the workspace; dw split into row ranges as layer_norm_grad's"},
	{ir.OpLayerNormBare, ViaKernel, []string{"layer_norm_bare"}, ""},
	{ir.OpLayerNormBareGrad, ViaKernel, []string{"layer_norm_bare_grad"}, ""},
	{ir.OpGather, ViaKernel, []string{"gather"}, "one thread per output; positions outside the axis give NaN (the CPU returns an error)"},
	{ir.OpGatherGrad, ViaKernel, []string{"gather_grad"}, "the scatter-add as a gather: one thread per dx element sums its column's matching dy in order (deterministic, no atomics)"},
}

// OpSupport says how kind runs on CUDA; ok is false for a kind the table
// does not know (a new ir operator nobody has mapped yet).
func OpSupport(kind ir.OpKind) (Support, bool) {
	for _, s := range support {
		if s.Kind == kind {
			return s, true
		}
	}
	return Support{Kind: kind}, false
}

// Unsupported lists the kinds that do not run on CUDA, sorted (none today).
func Unsupported() []ir.OpKind {
	var out []ir.OpKind
	for _, s := range support {
		if s.Via == ViaUnsupported {
			out = append(out, s.Kind)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
