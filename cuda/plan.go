package cuda

import (
	"fmt"
	"math"
	"reflect"

	"hap/ir"
)

// An OpPlan is how one ir op runs on a GPU: a short list of kernel
// launches, GEMMs, memsets and copies over the op's buffers. Planning is
// pure Go (no GPU, no driver): the executor plans each op once, then runs
// the plan every step with Ctx.Run.

// BufKind says which of an op's buffers a BufRef names.
type BufKind uint8

const (
	BufIn   BufKind = iota // the op's Index-th input
	BufOut                 // the op's Index-th output
	BufWork                // the op's workspace (OpPlan.WorkBytes)
)

// BufRef is an address inside one of an op's buffers.
type BufRef struct {
	Kind   BufKind
	Index  int
	Offset int64 // bytes
}

func in(i int) BufRef     { return BufRef{Kind: BufIn, Index: i} }
func out(i int) BufRef    { return BufRef{Kind: BufOut, Index: i} }
func work(o int64) BufRef { return BufRef{Kind: BufWork, Offset: o} }

// StepKind is what a Step does.
type StepKind uint8

const (
	StepKernel StepKind = iota // launch Kernel from DType's module
	StepGemm                   // a cuBLAS GEMM
	StepMemset                 // zero Bytes at Dst
	StepCopy                   // copy Bytes from Src to Dst
)

// Step is one action of an OpPlan.
type Step struct {
	Kind StepKind

	// StepKernel: the full kernel name, its module's element type, the
	// launch shape, and the arguments: BufRef for every pointer parameter,
	// otherwise the Go value Launch takes.
	Kernel      string
	DType       ir.DType
	Grid, Block Dim3
	Args        []any

	// StepGemm: the product with A, B and C left zero, the buffers they
	// live in, and whether it is float64.
	Gemm    Gemm
	GemmBuf [3]BufRef
	F64     bool

	// StepMemset, StepCopy.
	Dst, Src BufRef
	Bytes    int64
}

// OpPlan is the plan of one op.
type OpPlan struct {
	Kind      ir.OpKind
	Steps     []Step
	WorkBytes int64
	// TF32 lets float32 GEMMs use TF32 tensor cores (faster, ~10 bits of
	// mantissa); off by default so results track the CPU reference.
	TF32 bool
}

// PlanOptions tune planning.
type PlanOptions struct {
	// Block is the threads per block: a power of two, 32 to 1024
	// (default 256).
	Block int
	// MaxGrid caps blocks per launch (default 65535); loops stride over
	// the rest.
	MaxGrid int
	// TF32 allows TF32 tensor cores for float32 GEMMs.
	TF32 bool
	// MaxColumnElems caps the elements of a convolution's column matrix
	// in the workspace (default 1<<24); larger batches are processed a
	// band of images at a time.
	MaxColumnElems int64
}

func (o PlanOptions) norm() (PlanOptions, error) {
	if o.Block == 0 {
		o.Block = 256
	}
	if o.MaxGrid == 0 {
		o.MaxGrid = 65535
	}
	if o.MaxColumnElems == 0 {
		o.MaxColumnElems = 1 << 24
	}
	if o.Block < 1 || o.Block > 1024 || o.Block&(o.Block-1) != 0 {
		return o, fmt.Errorf("block size %d is not a power of two in [1,1024]", o.Block)
	}
	return o, nil
}

// planner accumulates one op's steps.
type planner struct {
	opt  PlanOptions
	plan *OpPlan
}

func (p *planner) elemGrid(n int64) Dim3 {
	g := (n + int64(p.opt.Block) - 1) / int64(p.opt.Block)
	return D1(int(min(max(g, 1), int64(p.opt.MaxGrid))))
}

func (p *planner) rowGrid(rows int64) Dim3 { return D1(int(min(max(rows, 1), int64(p.opt.MaxGrid)))) }

// launch appends a kernel step after checking args against the kernel's
// signature, so a planning mistake fails here, not on a GPU.
func (p *planner) launch(base string, dt ir.DType, grid Dim3, args ...any) error {
	sig, ok := sigOf(base)
	if !ok {
		return fmt.Errorf("no kernel %q", base)
	}
	if len(args) != len(sig.Params) {
		return fmt.Errorf("kernel %s takes %d arguments, got %d", base, len(sig.Params), len(args))
	}
	for i, k := range sig.Params {
		if err := checkArg(k, dt, args[i]); err != nil {
			return fmt.Errorf("kernel %s argument %d: %w", base, i, err)
		}
	}
	p.plan.Steps = append(p.plan.Steps, Step{Kind: StepKernel, Kernel: KernelName(base, dt), DType: dt,
		Grid: grid, Block: D1(p.opt.Block), Args: args})
	return nil
}

// checkArg reports whether Go value v fits parameter kind k of dt's module.
func checkArg(k ParamKind, dt ir.DType, v any) error {
	var want reflect.Type
	switch k {
	case PConstT, PT, PConstA, PA, PConstB, PB, PConstI64, PI64Buf, PConstF64, PF64Buf:
		want = reflect.TypeFor[BufRef]()
	case PValT:
		want = reflect.TypeFor[float64]()
		if dt == ir.Float32 {
			want = reflect.TypeFor[float32]()
		}
	case PI32:
		want = reflect.TypeFor[int32]()
	case PI64:
		want = reflect.TypeFor[int64]()
	case PU64:
		want = reflect.TypeFor[uint64]()
	case PF64:
		want = reflect.TypeFor[float64]()
	case PDims:
		want = reflect.TypeFor[Dims]()
	default:
		return fmt.Errorf("unknown parameter kind %q", k)
	}
	if reflect.TypeOf(v) != want {
		return fmt.Errorf("parameter %s wants a %v, got %T", k, want, v)
	}
	return nil
}

// valT converts x to the module's element type.
func valT(dt ir.DType, x float64) any {
	if dt == ir.Float32 {
		return float32(x)
	}
	return x
}

func accSize(dt ir.DType) int64 {
	if dt == ir.Float32 {
		return 4
	}
	return 8
}

func dims(v []int) (Dims, error) {
	var d Dims
	if len(v) > MaxRank {
		return d, fmt.Errorf("rank %d exceeds the kernels' limit of %d", len(v), MaxRank)
	}
	for i, x := range v {
		d[i] = int64(x)
	}
	return d, nil
}

func numel(t *ir.Tensor) int64 { return int64(t.Shape.Numel()) }

// rowsOf splits a shape into rows × last dim, as the CPU backend does.
func rowsOf(s ir.Shape) (rows, n int64) {
	if len(s) == 0 {
		return 1, 1
	}
	n = int64(s[len(s)-1])
	if n == 0 {
		return 0, 0
	}
	return int64(s.Numel()) / n, n
}

func outerInner(s ir.Shape, axis int) (outer, inner int64) {
	outer, inner = 1, 1
	for d := 0; d < axis; d++ {
		outer *= int64(s[d])
	}
	for d := axis + 1; d < len(s); d++ {
		inner *= int64(s[d])
	}
	return outer, inner
}

// PlanOp plans op, whose operands are in and out (the graph's tensors, in
// op order). Collectives are not planned here (package nccl runs them);
// kinds listed as unsupported return an error naming the gap.
func PlanOp(op *ir.Op, ins, outs []*ir.Tensor, opt PlanOptions) (*OpPlan, error) {
	opt, err := opt.norm()
	if err != nil {
		return nil, err
	}
	p := &planner{opt: opt, plan: &OpPlan{Kind: op.Kind, TF32: opt.TF32}}
	if err := p.op(op, ins, outs); err != nil {
		return nil, fmt.Errorf("planning %s %q for CUDA: %w", op.Kind, op.Name, err)
	}
	return p.plan, nil
}

func (p *planner) op(op *ir.Op, ins, outs []*ir.Tensor) error {
	a := &op.Attrs
	sup, known := OpSupport(op.Kind)
	if !known {
		return fmt.Errorf("operator kind %q is not in the CUDA support table", op.Kind)
	}
	switch sup.Via {
	case ViaUnsupported:
		return fmt.Errorf("%s does not run on CUDA yet (%s)", op.Kind, sup.Note)
	case ViaNCCL:
		return fmt.Errorf("%s is a collective: package nccl runs it", op.Kind)
	}
	if len(outs) == 0 {
		return fmt.Errorf("no outputs")
	}
	y := outs[0]
	dt := y.DType
	n := numel(y)
	unary := func(base string) error {
		if n == 0 {
			return nil
		}
		return p.launch(base, dt, p.elemGrid(n), in(0), out(0), n)
	}
	binary := func(base string) error {
		if n == 0 {
			return nil
		}
		return p.launch(base, dt, p.elemGrid(n), in(0), in(1), out(0), n)
	}
	switch op.Kind {
	case ir.OpReLU, ir.OpGELU, ir.OpSigmoid, ir.OpTanh, ir.OpSiLU, ir.OpHardSwish, ir.OpHardSigmoid:
		return unary(string(op.Kind))
	case ir.OpReLUGrad, ir.OpGELUGrad, ir.OpSigmoidGrad, ir.OpTanhGrad,
		ir.OpSiLUGrad, ir.OpHardSwishGrad, ir.OpHardSigmoidGrad, ir.OpSwiGLU:
		return binary(string(op.Kind))
	case ir.OpSwiGLUGrad:
		if n == 0 {
			return nil
		}
		return p.launch("swiglu_grad", dt, p.elemGrid(n), in(0), in(1), in(2), out(0), out(1), n)
	case ir.OpAdd, ir.OpMul, ir.OpSub, ir.OpDiv, ir.OpMaskedFill, ir.OpNeg, ir.OpExp, ir.OpLog, ir.OpSqrt,
		ir.OpRsqrt, ir.OpReciprocal, ir.OpPowScalar, ir.OpAddScalar, ir.OpMulScalar, ir.OpMean, ir.OpVar,
		ir.OpAmax, ir.OpAmaxGrad, ir.OpRMSNorm, ir.OpRMSNormGrad, ir.OpLayerNormBare, ir.OpLayerNormBareGrad:
		return p.arith(op, ins, outs)
	case ir.OpBias:
		return p.bias(a, ins[0], ins[1], dt, n)
	case ir.OpDropout:
		return p.dropout(a, ins[0], dt, n)
	case ir.OpFillLike:
		if n == 0 {
			return nil
		}
		return p.launch("fill", dt, p.elemGrid(n), out(0), n, valT(dt, a.Scale))
	case ir.OpSGDUpdate:
		if n == 0 {
			return nil
		}
		return p.launch("sgd", dt, p.elemGrid(n), in(0), in(1), out(0), n, valT(dt, a.LR))
	case ir.OpAdamUpdate:
		if len(a.Betas) != 2 {
			return fmt.Errorf("adam wants betas [β1, β2], got %v", a.Betas)
		}
		if n == 0 {
			return nil
		}
		return p.launch("adam", dt, p.elemGrid(n), in(0), in(1), in(2), in(3), in(4), out(0), out(1), out(2),
			n, a.LR, a.Betas[0], a.Betas[1], a.Eps)
	case ir.OpEmbedding, ir.OpEmbeddingGrad:
		return p.embedding(op, a, ins, y, dt)
	case ir.OpGather, ir.OpGatherGrad:
		return p.gather(op, a, ins, y, dt)
	case ir.OpSoftmax, ir.OpLogSoftmax:
		rows, cols := rowsOf(y.Shape)
		if rows == 0 {
			return nil
		}
		return p.launch("softmax", dt, p.rowGrid(rows), in(0), out(0), rows, cols, b2i(op.Kind == ir.OpLogSoftmax))
	case ir.OpSoftmaxGrad, ir.OpLogSoftmaxGrad:
		rows, cols := rowsOf(y.Shape)
		if rows == 0 {
			return nil
		}
		return p.launch("softmax_grad", dt, p.rowGrid(rows), in(0), in(1), out(0), rows, cols, b2i(op.Kind == ir.OpLogSoftmaxGrad))
	case ir.OpLayerNorm:
		rows, cols := rowsOf(y.Shape)
		if rows == 0 {
			return nil
		}
		return p.launch("layer_norm", dt, p.rowGrid(rows), in(0), in(1), in(2), out(0), rows, cols, a.Eps)
	case ir.OpLayerNormGrad:
		rows, cols := rowsOf(ins[0].Shape)
		if cols == 0 {
			return nil
		}
		if rows == 0 {
			// No rows: dgamma and dbeta are zero.
			p.memset(out(1), numel(outs[1])*int64(dt.Size()))
			p.memset(out(2), numel(outs[2])*int64(dt.Size()))
			return nil
		}
		stats := 2 * rows * accSize(dt)
		p.plan.WorkBytes = stats
		if err := p.launch("layer_norm_grad_dx", dt, p.rowGrid(rows), in(0), in(1), in(2), out(0), work(0), rows, cols, a.Eps); err != nil {
			return err
		}
		// dgamma and dbeta are column sums over the rows: split as reduce_sum's.
		chunk, nsplit := splitReduction(cols, rows)
		if nsplit == 1 {
			return p.launch("layer_norm_grad_gb", dt, p.elemGrid(cols), in(0), in(2), work(0), out(1), out(2), rows, cols, rows, int64(1))
		}
		part := nsplit * cols * int64(dt.Size())
		dg, db := work(stats), work(stats+part)
		p.plan.WorkBytes = stats + 2*part
		if err := p.launch("layer_norm_grad_gb", dt, p.elemGrid(cols*nsplit), in(0), in(2), work(0), dg, db, rows, cols, chunk, nsplit); err != nil {
			return err
		}
		if err := p.sumRanges(dg, out(1), dt, cols, nsplit); err != nil {
			return err
		}
		return p.sumRanges(db, out(2), dt, cols, nsplit)
	case ir.OpCrossEntropy, ir.OpNLLLoss:
		rows, cols := rowsOf(ins[0].Shape)
		if rows == 0 {
			p.memset(out(0), int64(dt.Size()))
			return nil
		}
		p.plan.WorkBytes = rows * accSize(dt)
		var err error
		if op.Kind == ir.OpCrossEntropy {
			err = p.launch("ce_rows", dt, p.rowGrid(rows), in(0), in(1), work(0), rows, cols)
		} else {
			err = p.launch("nll_rows", dt, p.elemGrid(rows), in(0), in(1), work(0), rows, cols)
		}
		if err != nil {
			return err
		}
		return p.launch("sum_to_scalar", dt, D1(1), work(0), out(0), rows)
	case ir.OpCrossEntropyGrad:
		rows, cols := rowsOf(y.Shape)
		if rows == 0 {
			return nil
		}
		return p.launch("ce_grad", dt, p.rowGrid(rows), in(0), in(1), in(2), out(0), rows, cols)
	case ir.OpNLLLossGrad:
		rows, cols := rowsOf(y.Shape)
		if rows == 0 {
			return nil
		}
		return p.launch("nll_grad", dt, p.elemGrid(rows*cols), in(0), in(1), out(0), rows, cols)
	case ir.OpReduceSum:
		return p.reduceSum(a.Axes, ins[0], dt, n)
	case ir.OpPermute:
		return p.permute(a.Perm, ins[0], y)
	case ir.OpConcat:
		outer, inner := outerInner(y.Shape, a.Axis)
		row := int64(y.Shape[a.Axis]) * inner
		var off int64
		for i, x := range ins {
			w := int64(x.Shape[a.Axis]) * inner
			if err := p.axisCopy(y.DType, out(0), in(i), outer, w, w, 0, row, off); err != nil {
				return err
			}
			off += w
		}
		return nil
	case ir.OpSplit:
		x := ins[0]
		outer, inner := outerInner(x.Shape, a.Axis)
		row := int64(x.Shape[a.Axis]) * inner
		var off int64
		for i, o := range outs {
			w := int64(o.Shape[a.Axis]) * inner
			if err := p.axisCopy(o.DType, out(i), in(0), outer, w, row, off, w, 0); err != nil {
				return err
			}
			off += w
		}
		return nil
	case ir.OpSlice:
		return p.slice(ins[0], y, a.Axis, int64(a.Start))
	case ir.OpDynamicSlice:
		if a.Rank < 0 || a.Rank >= len(a.Sizes) {
			return fmt.Errorf("rank %d outside sizes %v", a.Rank, a.Sizes)
		}
		start := 0
		for _, s := range a.Sizes[:a.Rank] {
			start += s
		}
		return p.slice(ins[0], y, a.Axis, int64(start))
	case ir.OpPad:
		x := ins[0]
		p.memset(out(0), numel(y)*int64(y.DType.Size()))
		outer, inner := outerInner(y.Shape, a.Axis)
		w := int64(x.Shape[a.Axis]) * inner
		return p.axisCopy(y.DType, out(0), in(0), outer, w, w, 0, int64(y.Shape[a.Axis])*inner, int64(a.Start)*inner)
	case ir.OpReshape, ir.OpReplicate:
		if b := numel(y) * int64(y.DType.Size()); b > 0 {
			p.plan.Steps = append(p.plan.Steps, Step{Kind: StepCopy, Dst: out(0), Src: in(0), Bytes: b})
		}
		return nil
	case ir.OpMatMul:
		return p.matmul(a, ins[0], ins[1], y)
	case ir.OpAttention:
		return p.attention(a, ins[0], ins[1], ins[2], nil, maskInput(ins, 3), outs)
	case ir.OpAttentionGrad:
		return p.attention(a, ins[0], ins[1], ins[2], ins[3], maskInput(ins, 4), outs)
	case ir.OpRotary, ir.OpRotaryGrad:
		return p.rotary(op.Kind == ir.OpRotaryGrad, ins)
	case ir.OpBatchNorm, ir.OpBatchNormGrad, ir.OpBatchNormRunning:
		return p.batchNorm(op, ins, outs, dt)
	case ir.OpAvgPool2D:
		return p.avgPool(a, ins[0].Shape, false, dt)
	case ir.OpAvgPool2DGrad:
		return p.avgPool(a, a.Shape, true, dt)
	case ir.OpConv2D, ir.OpConv2DGradInput, ir.OpConv2DGradWeight:
		switch {
		case ir.ConvGroups(a) > 1:
			return p.gconv(op.Kind, a, ins, dt)
		case op.Kind == ir.OpConv2D:
			return p.conv2d(a, ins[0].Shape, ins[1].Shape, dt)
		case op.Kind == ir.OpConv2DGradInput:
			return p.conv2dGradInput(a, ins[1].Shape, dt)
		}
		return p.conv2dGradWeight(a, ins[0].Shape, dt)
	case ir.OpMaxPool2D, ir.OpMaxPool2DGrad:
		if a.Pad > 0 {
			return p.maxPoolPadded(a, ins[0].Shape, op.Kind == ir.OpMaxPool2DGrad, dt)
		}
		return p.maxPool(a, ins[0].Shape, op.Kind == ir.OpMaxPool2DGrad, dt)
	case ir.OpAdaptiveAvgPool2D:
		return p.adaptivePool(ins[0].Shape, a.Shape, false, dt)
	case ir.OpAdaptiveAvgPool2DGrad:
		return p.adaptivePool(a.Shape, ins[0].Shape[2:], true, dt)
	case ir.OpTop2Gate, ir.OpTop2GateGrad:
		return p.top2(op.Kind, a, ins[0].Shape, dt)
	case ir.OpEinsum:
		return p.einsum(a, ins[0], ins[1], y)
	}
	return fmt.Errorf("the support table maps %s to %s but the planner has no case for it", op.Kind, sup.Via)
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

func (p *planner) memset(dst BufRef, bytes int64) {
	if bytes > 0 {
		p.plan.Steps = append(p.plan.Steps, Step{Kind: StepMemset, Dst: dst, Bytes: bytes})
	}
}

func (p *planner) axisCopy(dt ir.DType, dst, src BufRef, outer, w, srcRow, srcOff, dstRow, dstOff int64) error {
	if outer*w == 0 {
		return nil
	}
	return p.launch("axis_copy", dt, p.elemGrid(outer*w), dst, src, outer, w, srcRow, srcOff, dstRow, dstOff)
}

func (p *planner) slice(x, y *ir.Tensor, axis int, start int64) error {
	outer, inner := outerInner(x.Shape, axis)
	w := int64(y.Shape[axis]) * inner
	return p.axisCopy(y.DType, out(0), in(0), outer, w, int64(x.Shape[axis])*inner, start*inner, w, 0)
}

func (p *planner) bias(a *ir.Attrs, x, b *ir.Tensor, dt ir.DType, n int64) error {
	if n == 0 {
		return nil
	}
	axes := a.Axes
	if len(axes) == 1 && axes[0] == len(x.Shape)-1 {
		return p.launch("bias_last", dt, p.elemGrid(n), in(0), in(1), out(0), n, numel(b))
	}
	if len(axes) > MaxRank {
		return fmt.Errorf("%d bias axes exceed %d", len(axes), MaxRank)
	}
	xs := x.Shape.Strides()
	var st, sz, bs Dims
	acc := int64(1)
	for i := len(axes) - 1; i >= 0; i-- {
		ax := axes[i]
		if ax < 0 || ax >= len(x.Shape) {
			return fmt.Errorf("bias axis %d outside rank %d", ax, len(x.Shape))
		}
		st[i], sz[i], bs[i] = int64(xs[ax]), int64(x.Shape[ax]), acc
		acc *= int64(x.Shape[ax])
	}
	return p.launch("bias_axes", dt, p.elemGrid(n), in(0), in(1), out(0), n, int32(len(axes)), st, sz, bs)
}

func (p *planner) dropout(a *ir.Attrs, x *ir.Tensor, dt ir.DType, n int64) error {
	if n == 0 {
		return nil
	}
	// The CPU computes the scale in the element type: F(1/(1−rate)).
	scale := valT(dt, 1/(1-a.Rate))
	var rank int32
	var ls, off, gst Dims
	if len(a.Offset) > 0 {
		if len(a.Offset) != len(x.Shape) || len(a.Shape) != len(x.Shape) {
			return fmt.Errorf("dropout offset %v and global shape %v do not match the shard's rank %d", a.Offset, a.Shape, len(x.Shape))
		}
		var err error
		if ls, err = dims(x.Shape); err != nil {
			return err
		}
		if off, err = dims(a.Offset); err != nil {
			return err
		}
		if gst, err = dims(ir.Shape(a.Shape).Strides()); err != nil {
			return err
		}
		rank = int32(len(x.Shape))
	}
	return p.launch("dropout", dt, p.elemGrid(n), in(0), out(0), n, a.Seed, a.Rate, scale, rank, ls, off, gst)
}

func (p *planner) embedding(op *ir.Op, a *ir.Attrs, ins []*ir.Tensor, y *ir.Tensor, dt ir.DType) error {
	ids := ins[0]
	var v, d int64
	if op.Kind == ir.OpEmbedding {
		tab := ins[1]
		v, d = int64(tab.Shape[0]), int64(tab.Shape[1])
	} else {
		v, d = int64(y.Shape[0]), int64(y.Shape[1])
		p.memset(out(0), numel(y)*int64(dt.Size()))
	}
	var off0 int64
	if a.Partial {
		if len(a.Offset) < 1 {
			return fmt.Errorf("a partial embedding needs Offset[0], the first local row")
		}
		off0 = int64(a.Offset[0])
	}
	nids := numel(ids)
	if nids*d == 0 {
		return nil
	}
	base := "embedding"
	if op.Kind == ir.OpEmbeddingGrad {
		base = "embedding_grad"
	}
	return p.launch(base, dt, p.elemGrid(nids*d), in(0), in(1), out(0), nids, d, v, b2i(a.Partial), off0)
}

// gather plans gather (in: x, index; out: y) or gather_grad (in: index,
// dy; out: dx, x's shape). Both kernels write every output element, so
// dx needs no zeroing.
func (p *planner) gather(op *ir.Op, a *ir.Attrs, ins []*ir.Tensor, y *ir.Tensor, dt ir.DType) error {
	xs, index := y.Shape, ins[0]
	if op.Kind == ir.OpGather {
		xs, index = ins[0].Shape, ins[1]
	}
	if a.Axis < 0 || a.Axis >= len(xs) || len(index.Shape) != len(xs) {
		return fmt.Errorf("gather axis %d does not fit x %v and index %v", a.Axis, xs, index.Shape)
	}
	outer, inner := outerInner(xs, a.Axis)
	n, k := int64(xs[a.Axis]), int64(index.Shape[a.Axis])
	if op.Kind == ir.OpGather {
		if outer*k*inner == 0 {
			return nil
		}
		return p.launch("gather", dt, p.elemGrid(outer*k*inner), in(0), in(1), out(0), outer, k, n, inner)
	}
	if outer*n*inner == 0 {
		return nil
	}
	return p.launch("gather_grad", dt, p.elemGrid(outer*n*inner), in(0), in(1), out(0), outer, k, n, inner)
}

// Split reductions. One thread per output element leaves a GPU idle when
// the outputs are few and the sums long: a bias gradient sums a thousand
// rows into 768 columns, 768 threads on a GPU that runs a quarter of a
// million at once (measured on an H200: reductions were 37 of bert-base's
// 81 ms step at batch 8). So a long column sum is split into row ranges,
// one thread per (output, range), and a second launch adds each output's
// ranges in order. The split depends only on the shapes, so the sums (and
// their rounding) are the same on every GPU.
const (
	// splitTargetThreads is the thread count a split aims for: about two
	// waves of a large GPU (132 multiprocessors × 2048 threads ≈ 2^18).
	splitTargetThreads = 1 << 18
	// splitMinChunk is the fewest terms a thread sums: below it the
	// second pass and the partial sums' traffic cost more than they save.
	splitMinChunk = 32
	// rowsMinTerms is the fewest terms for which a sum over x's innermost
	// dimension takes a block per output (reduce_sum_rows) rather than a
	// thread.
	rowsMinTerms = 32
)

// splitReduction divides nred terms into nsplit ranges of chunk terms
// (the last may be shorter) for nout outputs; nsplit = 1 means no split.
func splitReduction(nout, nred int64) (chunk, nsplit int64) {
	nsplit = min((splitTargetThreads+nout-1)/nout, nred/splitMinChunk)
	if nsplit <= 1 {
		return nred, 1
	}
	chunk = (nred + nsplit - 1) / nsplit
	return chunk, (nred + chunk - 1) / chunk
}

// reductionDims splits x's dimensions into kept ones and reduced ones
// (sizes and strides, outermost first), dropping dimensions of size 1 and
// merging neighbours of the same kind that are contiguous in memory (a
// bias gradient's [batch, seq, width] summed over batch and seq is one
// reduced dimension of batch·seq rows), which saves the kernels a division
// per dimension per term.
func reductionDims(shape ir.Shape, axes []int) (ks, kst, rs, rst Dims, kr, rr int32) {
	xs := shape.Strides()
	prev := -1 // the previous dimension: -1 none yet, 0 kept, 1 reduced
	for d, sz := range shape {
		if sz == 1 {
			continue
		}
		reduced := 0
		for _, ax := range axes {
			if ax == d {
				reduced = 1
			}
		}
		size, stride := int64(sz), int64(xs[d])
		if reduced == 1 {
			if prev == 1 && rst[rr-1] == size*stride {
				rs[rr-1], rst[rr-1] = rs[rr-1]*size, stride
			} else {
				rs[rr], rst[rr] = size, stride
				rr++
			}
		} else {
			if prev == 0 && kst[kr-1] == size*stride {
				ks[kr-1], kst[kr-1] = ks[kr-1]*size, stride
			} else {
				ks[kr], kst[kr] = size, stride
				kr++
			}
		}
		prev = reduced
	}
	return ks, kst, rs, rst, kr, rr
}

func (p *planner) reduceSum(axes []int, x *ir.Tensor, dt ir.DType, nout int64) error {
	if len(x.Shape) > MaxRank {
		return fmt.Errorf("rank %d exceeds the kernels' limit of %d", len(x.Shape), MaxRank)
	}
	if nout == 0 {
		return nil
	}
	ks, kst, rs, rst, kr, rr := reductionDims(x.Shape, axes)
	nred := int64(1)
	for d := range rr {
		nred *= rs[d]
	}
	if rr > 0 && rst[rr-1] == 1 && nred >= rowsMinTerms {
		// The innermost dimension is summed: a block per output reads it
		// contiguously.
		return p.launch("reduce_sum_rows", dt, p.rowGrid(nout), in(0), out(0), nout, kr, ks, kst, rr, rs, rst, nred)
	}
	chunk, nsplit := splitReduction(nout, nred)
	if nsplit == 1 {
		return p.launch("reduce_sum", dt, p.elemGrid(nout), in(0), out(0), nout, kr, ks, kst, rr, rs, rst, nred, nred, int64(1))
	}
	p.plan.WorkBytes = nsplit * nout * int64(dt.Size())
	if err := p.launch("reduce_sum", dt, p.elemGrid(nout*nsplit), in(0), work(0), nout, kr, ks, kst, rr, rs, rst, nred, chunk, nsplit); err != nil {
		return err
	}
	return p.sumRanges(work(0), out(0), dt, nout, nsplit)
}

// sumRanges adds a split reduction's partial sums, part[sp·nout + o] for
// sp < nsplit, into y[o], ranges in order.
func (p *planner) sumRanges(part, y BufRef, dt ir.DType, nout, nsplit int64) error {
	var ks, kst, rs, rst Dims
	ks[0], kst[0] = nout, 1
	rs[0], rst[0] = nsplit, nout
	return p.launch("reduce_sum", dt, p.elemGrid(nout), part, y, nout, int32(1), ks, kst, int32(1), rs, rst, nsplit, nsplit, int64(1))
}

func (p *planner) permute(perm []int, x, y *ir.Tensor) error {
	n := numel(y)
	if n == 0 {
		return nil
	}
	if len(perm) != len(x.Shape) {
		return fmt.Errorf("perm %v for rank %d", perm, len(x.Shape))
	}
	shape, err := dims(y.Shape)
	if err != nil {
		return err
	}
	xs := x.Shape.Strides()
	var sst Dims
	for i, d := range perm {
		sst[i] = int64(xs[d])
	}
	return p.launch("permute", y.DType, p.elemGrid(n), in(0), out(0), n, int32(len(perm)), shape, sst)
}

// matmul maps the row-major product y = op(x)·op(w) onto column-major
// cuBLAS: a row-major [r,c] matrix is a column-major [c,r] one, so
// yᵀ = op(w)ᵀ·op(x)ᵀ is one cuBLAS call with w as cuBLAS's A and x as its
// B, and the transposes carry over unchanged.
func (p *planner) matmul(a *ir.Attrs, x, w, y *ir.Tensor) error {
	g, err := MatMulGemm(a, x.Shape, w.Shape)
	if err != nil {
		return err
	}
	if g.Batch == 0 || g.M == 0 || g.N == 0 {
		return nil
	}
	if g.K == 0 {
		p.memset(out(0), numel(y)*int64(y.DType.Size()))
		return nil
	}
	p.plan.Steps = append(p.plan.Steps, Step{Kind: StepGemm, Gemm: g, GemmBuf: [3]BufRef{in(1), in(0), out(0)}, F64: y.DType == ir.Float64})
	return nil
}

// MatMulGemm is the cuBLAS call computing ir's matmul of x and w (shapes
// as the graph records them, attrs TransA/TransB), with A = w, B = x and
// C = y; pointers are left zero.
func MatMulGemm(a *ir.Attrs, xs, ws ir.Shape) (Gemm, error) {
	rx, rw := len(xs), len(ws)
	if rx < 2 || rw < 2 {
		return Gemm{}, fmt.Errorf("matmul operands of rank %d and %d", rx, rw)
	}
	m, k := xs[rx-2], xs[rx-1]
	if a.TransA {
		m, k = k, m
	}
	n := ws[rw-1]
	wk := ws[rw-2]
	if a.TransB {
		n, wk = wk, n
	}
	if wk != k {
		return Gemm{}, fmt.Errorf("matmul inner dimensions %d and %d differ", k, wk)
	}
	batch := xs[:rx-2].Numel()
	ldw := n // w's stored row length
	if a.TransB {
		ldw = k
	}
	g := Gemm{TransA: a.TransB, TransB: a.TransA, N: m, M: n, K: k, LDA: ldw, LDC: n, Batch: batch, Alpha: 1}
	if rw == 2 && !a.TransA {
		// One weight for every batch entry: fold the batch into the rows.
		g.N, g.LDB, g.Batch = batch*m, k, 1
	} else {
		if rw > 2 && ws[:rw-2].Numel() != batch {
			return Gemm{}, fmt.Errorf("matmul batch dimensions %v and %v differ", xs[:rx-2], ws[:rw-2])
		}
		g.LDB = k
		if a.TransA {
			g.LDB = m
		}
		g.StrideB, g.StrideC = int64(m*k), int64(m*n)
		if rw > 2 {
			g.StrideA = int64(k * n)
		}
	}
	for _, v := range []int{g.M, g.N, g.K} {
		if v > math.MaxInt32 {
			return Gemm{}, fmt.Errorf("matmul dimension %d exceeds cuBLAS's 32-bit range", v)
		}
	}
	return g, nil
}

// Buffers are the device addresses of one op's operands and workspace.
type Buffers struct {
	In, Out []DevicePtr
	Work    DevicePtr
}

func (b Buffers) resolve(r BufRef) (DevicePtr, error) {
	var base DevicePtr
	switch r.Kind {
	case BufIn:
		if r.Index >= len(b.In) {
			return 0, fmt.Errorf("input %d of %d", r.Index, len(b.In))
		}
		base = b.In[r.Index]
	case BufOut:
		if r.Index >= len(b.Out) {
			return 0, fmt.Errorf("output %d of %d", r.Index, len(b.Out))
		}
		base = b.Out[r.Index]
	case BufWork:
		base = b.Work
	}
	if base == 0 {
		return 0, fmt.Errorf("buffer %v has no address", r)
	}
	return base.Add(r.Offset), nil
}

// Run enqueues plan on stream s over the buffers b.
func (c *Ctx) Run(plan *OpPlan, b Buffers, s Stream) error {
	if plan.WorkBytes > 0 && b.Work == 0 {
		return fmt.Errorf("%s needs %d bytes of workspace", plan.Kind, plan.WorkBytes)
	}
	for i, st := range plan.Steps {
		if err := c.runStep(plan, st, b, s); err != nil {
			return fmt.Errorf("%s step %d: %w", plan.Kind, i, err)
		}
	}
	return nil
}

func (c *Ctx) runStep(plan *OpPlan, st Step, b Buffers, s Stream) error {
	switch st.Kind {
	case StepKernel:
		f, err := c.builtin(st.DType, st.Kernel)
		if err != nil {
			return err
		}
		args := make([]any, len(st.Args))
		for i, a := range st.Args {
			if r, ok := a.(BufRef); ok {
				ptr, err := b.resolve(r)
				if err != nil {
					return err
				}
				args[i] = ptr
				continue
			}
			args[i] = a
		}
		return c.Launch(f, st.Grid, st.Block, 0, s, args...)
	case StepGemm:
		g := st.Gemm
		var err error
		if g.A, err = b.resolve(st.GemmBuf[0]); err != nil {
			return err
		}
		if g.B, err = b.resolve(st.GemmBuf[1]); err != nil {
			return err
		}
		if g.C, err = b.resolve(st.GemmBuf[2]); err != nil {
			return err
		}
		if g.Batch <= 1 {
			dt, ct := DataR32F, Compute32F
			if st.F64 {
				dt, ct = DataR64F, Compute64F
			} else if plan.TF32 {
				ct = Compute32FFastTF32
			}
			return c.GemmEx(s, dt, ct, g)
		}
		return c.GemmStridedBatched(s, st.F64, g)
	case StepMemset:
		dst, err := b.resolve(st.Dst)
		if err != nil {
			return err
		}
		return c.Memset(dst, 0, st.Bytes, s)
	case StepCopy:
		dst, err := b.resolve(st.Dst)
		if err != nil {
			return err
		}
		src, err := b.resolve(st.Src)
		if err != nil {
			return err
		}
		return c.CopyDtoD(dst, src, st.Bytes, s)
	}
	return fmt.Errorf("unknown step kind %d", st.Kind)
}

// builtin returns a kernel of the built-in module for dt, compiling the
// module the first time this device needs it; functions are cached by
// their full name (which carries the type suffix).
func (c *Ctx) builtin(dt ir.DType, name string) (Function, error) {
	if _, err := c.api(); err != nil {
		return 0, err
	}
	if f, ok := c.st.builtins[name]; ok {
		return f, nil
	}
	f, err := c.Kernel(KernelSource(dt), name)
	if err != nil {
		return 0, err
	}
	if c.st.builtins == nil {
		c.st.builtins = map[string]Function{}
	}
	c.st.builtins[name] = f
	return f, nil
}

// CopyRows enqueues a strided copy on s: rows rows of width elements of
// elemSize bytes (4 or 8), row r read at src + r·srcPitch and written at
// dst + r·dstPitch (pitches in elements). Contiguous copies become one
// cuMemcpyDtoDAsync; the rest use the axis_copy kernel.
func (c *Ctx) CopyRows(elemSize int, dst, src DevicePtr, rows, width, srcPitch, dstPitch int64, s Stream) error {
	if rows <= 0 || width <= 0 {
		return nil
	}
	if rows == 1 || (width == srcPitch && width == dstPitch) {
		return c.CopyDtoD(dst, src, rows*width*int64(elemSize), s)
	}
	var dt ir.DType
	switch elemSize {
	case 4:
		dt = ir.Float32
	case 8:
		dt = ir.Float64
	default:
		return fmt.Errorf("strided copies move 4- or 8-byte elements, not %d-byte ones", elemSize)
	}
	const block = 256
	f, err := c.builtin(dt, KernelName("axis_copy", dt))
	if err != nil {
		return err
	}
	n := rows * width
	grid := D1(int(min((n+block-1)/block, 65535)))
	return c.Launch(f, grid, D1(block), 0, s, dst, src, rows, width, srcPitch, int64(0), dstPitch, int64(0))
}
