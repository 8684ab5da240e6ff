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
	// ViaCopy: a device-to-device copy (the bytes do not change).
	ViaCopy Via = "copy"
	// ViaNCCL: a collective, run by package nccl.
	ViaNCCL Via = "nccl"
	// ViaUnsupported: not on CUDA yet; the CPU backend runs it.
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
	{ir.OpAdd, ViaKernel, []string{"add"}, ""},
	{ir.OpMul, ViaKernel, []string{"mul"}, ""},
	{ir.OpBias, ViaKernel, []string{"bias_last", "bias_axes"}, "bias_last when the bias lies along the last axis"},
	{ir.OpReLU, ViaKernel, []string{"relu"}, ""},
	{ir.OpGELU, ViaKernel, []string{"gelu"}, "exact (erf) GELU"},
	{ir.OpSigmoid, ViaKernel, []string{"sigmoid"}, ""},
	{ir.OpTanh, ViaKernel, []string{"tanh"}, ""},
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
	{ir.OpAttention, ViaUnsupported, nil, "to build from batched GEMMs and the softmax kernels (or a fused kernel)"},
	{ir.OpConv2D, ViaUnsupported, nil, "needs cuDNN or an im2col kernel plus GEMM"},
	{ir.OpMaxPool2D, ViaUnsupported, nil, ""},
	{ir.OpAdaptiveAvgPool2D, ViaUnsupported, nil, ""},
	{ir.OpCrossEntropy, ViaKernel, []string{"ce_rows", "sum_to_scalar"}, "labels outside the classes give NaN"},
	{ir.OpNLLLoss, ViaKernel, []string{"nll_rows", "sum_to_scalar"}, "labels outside the classes give NaN"},
	{ir.OpTop2Gate, ViaUnsupported, nil, "MoE gating"},
	{ir.OpEinsum, ViaUnsupported, nil, "to map onto batched GEMMs with permutes"},
	{ir.OpReduceSum, ViaKernel, []string{"reduce_sum"}, "one thread per output element, deterministic"},
	{ir.OpFillLike, ViaKernel, []string{"fill"}, ""},
	{ir.OpReLUGrad, ViaKernel, []string{"relu_grad"}, ""},
	{ir.OpGELUGrad, ViaKernel, []string{"gelu_grad"}, ""},
	{ir.OpSigmoidGrad, ViaKernel, []string{"sigmoid_grad"}, ""},
	{ir.OpTanhGrad, ViaKernel, []string{"tanh_grad"}, ""},
	{ir.OpSoftmaxGrad, ViaKernel, []string{"softmax_grad"}, ""},
	{ir.OpLogSoftmaxGrad, ViaKernel, []string{"softmax_grad"}, "softmax_grad in log space"},
	{ir.OpLayerNormGrad, ViaKernel, []string{"layer_norm_grad_dx", "layer_norm_grad_gb"}, "row statistics pass through the workspace"},
	{ir.OpEmbeddingGrad, ViaKernel, []string{"embedding_grad"}, "atomicAdd: last bits vary between runs"},
	{ir.OpPad, ViaKernel, []string{"axis_copy"}, "after zeroing the output"},
	{ir.OpAttentionGrad, ViaUnsupported, nil, ""},
	{ir.OpConv2DGradInput, ViaUnsupported, nil, ""},
	{ir.OpConv2DGradWeight, ViaUnsupported, nil, ""},
	{ir.OpMaxPool2DGrad, ViaUnsupported, nil, ""},
	{ir.OpAdaptiveAvgPool2DGrad, ViaUnsupported, nil, ""},
	{ir.OpCrossEntropyGrad, ViaKernel, []string{"ce_grad"}, ""},
	{ir.OpNLLLossGrad, ViaKernel, []string{"nll_grad"}, ""},
	{ir.OpTop2GateGrad, ViaUnsupported, nil, ""},
	{ir.OpSGDUpdate, ViaKernel, []string{"sgd"}, ""},
	{ir.OpAdamUpdate, ViaKernel, []string{"adam"}, "in double precision, as the CPU backend"},
	{ir.OpAllGather, ViaNCCL, nil, "nccl: ncclAllGather (padded) or one ncclBroadcast per root (grouped)"},
	{ir.OpReduceScatter, ViaNCCL, nil, "nccl: ncclReduceScatter (padded) or one ncclReduce per root (grouped)"},
	{ir.OpAllReduce, ViaNCCL, nil, "nccl: ncclAllReduce"},
	{ir.OpAllToAll, ViaNCCL, nil, "nccl: grouped ncclSend/ncclRecv"},
	{ir.OpDynamicSlice, ViaKernel, []string{"axis_copy"}, ""},
	{ir.OpReplicate, ViaCopy, nil, ""},
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

// Unsupported lists the kinds that do not run on CUDA yet, sorted.
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
