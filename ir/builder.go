package ir

import (
	"fmt"
	"hash/fnv"
	"strconv"
)

// Builder constructs a Graph op by op, inferring every output's shape as it
// goes. The first error is kept and later calls do nothing, so model code can
// chain calls and check Err (or Finish) once, like bufio.Scanner.
type Builder struct {
	g           *Graph
	err         error
	tensorNames map[string]bool
	opNames     map[string]bool
	scope       string
	dtype       DType
	// phase and gradOf stamp the ops autodiff emits.
	phase  Phase
	gradOf OpID
}

// NewBuilder starts an empty graph whose parameters have float type dtype.
func NewBuilder(name string, dtype DType) *Builder {
	return &Builder{
		g:           &Graph{Name: name, Loss: NoTensor},
		tensorNames: map[string]bool{},
		opNames:     map[string]bool{},
		dtype:       dtype,
		gradOf:      NoOp,
	}
}

// builderOn continues an existing graph (autodiff appends to a clone).
func builderOn(g *Graph, dtype DType) *Builder {
	b := &Builder{g: g, tensorNames: map[string]bool{}, opNames: map[string]bool{}, dtype: dtype, gradOf: NoOp}
	for i := range g.Tensors {
		b.tensorNames[g.Tensors[i].Name] = true
	}
	for i := range g.Ops {
		b.opNames[g.Ops[i].Name] = true
	}
	return b
}

// Err returns the first error met, if any.
func (b *Builder) Err() error { return b.err }

// DType is the float type of the graph's parameters.
func (b *Builder) DType() DType { return b.dtype }

func (b *Builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Scope prefixes the names of the ops and parameters created until the
// returned function is called: defer b.Scope("layer3.attn")().
func (b *Builder) Scope(name string) (restore func()) {
	prev := b.scope
	if prev != "" {
		b.scope = prev + "." + name
	} else {
		b.scope = name
	}
	return func() { b.scope = prev }
}

func (b *Builder) scoped(name string) string {
	if b.scope == "" {
		return name
	}
	return b.scope + "." + name
}

func uniqueName(used map[string]bool, name string) string {
	n := name
	for i := 1; used[n]; i++ {
		n = name + "_" + strconv.Itoa(i)
	}
	used[n] = true
	return n
}

// Shape returns the shape of t (nil after an error).
func (b *Builder) Shape(t TensorID) Shape {
	if t < 0 || int(t) >= len(b.g.Tensors) {
		return nil
	}
	return b.g.Tensors[t].Shape
}

func (b *Builder) leaf(kind TensorKind, name string, dt DType, shape []int) TensorID {
	if b.err != nil {
		return NoTensor
	}
	full := b.scoped(name)
	if b.tensorNames[full] {
		b.fail(fmt.Errorf("%s %q declared twice", kind, full))
		return NoTensor
	}
	for _, d := range shape {
		if d < 0 {
			b.fail(fmt.Errorf("%s %q has a negative dimension in shape %v", kind, full, shape))
			return NoTensor
		}
	}
	if _, ok := Shape(shape).CheckedNumel(); !ok {
		b.fail(fmt.Errorf("%s %q: shape %v has more than 2^50 elements (ir.MaxElements)", kind, full, shape))
		return NoTensor
	}
	b.tensorNames[full] = true
	id := TensorID(len(b.g.Tensors))
	t := Tensor{ID: id, Name: full, Shape: Shape(shape).Clone(), DType: dt, Kind: kind, Producer: NoOp, NoGrad: kind != Param}
	if kind == State {
		t.Init = InitZeros
	}
	b.g.Tensors = append(b.g.Tensors, t)
	return id
}

// Leaf declares a fed tensor of any kind under its exact name (no scope),
// keeping init for parameters. Lowering uses it to declare local shards.
func (b *Builder) Leaf(kind TensorKind, name string, dt DType, shape Shape, init string) TensorID {
	saved := b.scope
	b.scope = ""
	defer func() { b.scope = saved }()
	id := b.leaf(kind, name, dt, shape)
	if id != NoTensor && kind == Param {
		b.g.Tensors[id].Init = init
	}
	return id
}

// Input declares fed data.
func (b *Builder) Input(name string, dt DType, shape ...int) TensorID {
	return b.leaf(Input, name, dt, shape)
}

// Label declares int64 training targets.
func (b *Builder) Label(name string, shape ...int) TensorID { return b.leaf(Label, name, Int64, shape) }

// Param declares a trainable parameter of the builder's float type.
func (b *Builder) Param(name string, shape ...int) TensorID {
	return b.leaf(Param, name, b.dtype, shape)
}

// ParamInit declares a parameter with an initialiser other than the default.
func (b *Builder) ParamInit(name, init string, shape ...int) TensorID {
	id := b.leaf(Param, name, b.dtype, shape)
	if id != NoTensor {
		switch init {
		case InitDefault, InitZeros, InitOnes, InitNormal:
			b.g.Tensors[id].Init = init
		default:
			b.fail(fmt.Errorf("param %q: unknown initialiser %q", b.g.Tensors[id].Name, init))
		}
	}
	return id
}

// state declares optimizer state (unscoped: its name derives from a param).
func (b *Builder) state(name string, shape Shape) TensorID {
	saved := b.scope
	b.scope = ""
	defer func() { b.scope = saved }()
	return b.leaf(State, name, b.dtype, shape)
}

// Emit appends one op and returns its outputs. On error it returns NoTensor
// placeholders and records the error.
func (b *Builder) Emit(kind OpKind, attrs Attrs, inputs ...TensorID) []TensorID {
	placeholder := make([]TensorID, len(attrs.Sizes)+3)
	for i := range placeholder {
		placeholder[i] = NoTensor
	}
	if b.err != nil {
		return placeholder
	}
	for i, in := range inputs {
		if in < 0 || int(in) >= len(b.g.Tensors) {
			b.fail(fmt.Errorf("%s op under %q: input %d is not a tensor of this graph", kind, b.scope, i))
			return placeholder
		}
	}
	name := uniqueName(b.opNames, b.scoped(string(kind)))
	op := Op{ID: OpID(len(b.g.Ops)), Name: name, Kind: kind, Inputs: append([]TensorID{}, inputs...), Attrs: cloneAttrs(attrs), Phase: b.phase, GradOf: b.gradOf}
	if kind == OpDropout && op.Attrs.Seed == 0 {
		// Seeds derive from the op's name, so they are stable however the
		// rest of the graph changes.
		h := fnv.New64a()
		h.Write([]byte(name))
		op.Attrs.Seed = h.Sum64()
	}
	specs, err := b.g.infer(&op)
	if err != nil {
		b.fail(err)
		return placeholder
	}
	for i, s := range specs {
		tname := name
		if len(specs) > 1 {
			tname = name + ":" + strconv.Itoa(i)
		}
		if _, ok := s.Shape.CheckedNumel(); !ok {
			b.fail(fmt.Errorf("%s op %q: output %d's shape %v has more than 2^50 elements (ir.MaxElements)", kind, name, i, s.Shape))
			return placeholder
		}
		tname = uniqueName(b.tensorNames, tname)
		id := TensorID(len(b.g.Tensors))
		noGrad := s.NoGrad || !s.DType.IsFloat()
		b.g.Tensors = append(b.g.Tensors, Tensor{ID: id, Name: tname, Shape: s.Shape, DType: s.DType, Kind: Activation, Producer: op.ID, NoGrad: noGrad})
		op.Outputs = append(op.Outputs, id)
	}
	b.g.Ops = append(b.g.Ops, op)
	return op.Outputs
}

func (b *Builder) emit1(kind OpKind, attrs Attrs, inputs ...TensorID) TensorID {
	return b.Emit(kind, attrs, inputs...)[0]
}

// Finish validates the graph and returns it with loss as its objective.
func (b *Builder) Finish(loss TensorID) (*Graph, error) {
	if b.err != nil {
		return nil, fmt.Errorf("building %s: %w", b.g.Name, b.err)
	}
	b.g.Loss = loss
	if err := b.g.Check(); err != nil {
		return nil, fmt.Errorf("building %s: %w", b.g.Name, err)
	}
	return b.g, nil
}

// ---- typed helpers, one per operator ----

// MatMul is a·b.
func (b *Builder) MatMul(x, w TensorID) TensorID { return b.emit1(OpMatMul, Attrs{}, x, w) }

// MatMulT is op(a)·op(b) with optional transposes of the last two dims.
func (b *Builder) MatMulT(x, w TensorID, transA, transB bool) TensorID {
	return b.emit1(OpMatMul, Attrs{TransA: transA, TransB: transB}, x, w)
}

// Add is a+b, broadcast (arith.go).
func (b *Builder) Add(x, y TensorID) TensorID { return b.emit1(OpAdd, Attrs{}, x, y) }

// Mul is a*b, broadcast (arith.go).
func (b *Builder) Mul(x, y TensorID) TensorID { return b.emit1(OpMul, Attrs{}, x, y) }

// Bias adds bias broadcast over all dims of x but axes (default: the last).
func (b *Builder) Bias(x, bias TensorID, axes ...int) TensorID {
	if len(axes) == 0 {
		axes = []int{len(b.Shape(x)) - 1}
	}
	return b.emit1(OpBias, Attrs{Axes: axes}, x, bias)
}

// ReLU is max(x, 0).
func (b *Builder) ReLU(x TensorID) TensorID { return b.emit1(OpReLU, Attrs{}, x) }

// GELU is x·Φ(x).
func (b *Builder) GELU(x TensorID) TensorID { return b.emit1(OpGELU, Attrs{}, x) }

// Sigmoid is 1/(1+e^−x).
func (b *Builder) Sigmoid(x TensorID) TensorID { return b.emit1(OpSigmoid, Attrs{}, x) }

// Tanh is tanh(x).
func (b *Builder) Tanh(x TensorID) TensorID { return b.emit1(OpTanh, Attrs{}, x) }

// Dropout zeroes each element with probability rate and scales the rest by
// 1/(1−rate); rate 0 returns x unchanged without an op.
func (b *Builder) Dropout(x TensorID, rate float64) TensorID {
	if rate == 0 {
		return x
	}
	return b.emit1(OpDropout, Attrs{Rate: rate}, x)
}

// Softmax over the last dim.
func (b *Builder) Softmax(x TensorID) TensorID { return b.emit1(OpSoftmax, Attrs{}, x) }

// LogSoftmax over the last dim.
func (b *Builder) LogSoftmax(x TensorID) TensorID { return b.emit1(OpLogSoftmax, Attrs{}, x) }

// LayerNormEps is the epsilon of BERT, ViT and GPT-2's layer norms.
const LayerNormEps = 1e-5

// LayerNorm normalises over the last dim with scale gamma and shift beta.
func (b *Builder) LayerNorm(x, gamma, beta TensorID) TensorID {
	return b.emit1(OpLayerNorm, Attrs{Eps: LayerNormEps}, x, gamma, beta)
}

// Embedding looks up rows of table[V, d] for int64 ids.
func (b *Builder) Embedding(ids, table TensorID) TensorID {
	return b.emit1(OpEmbedding, Attrs{}, ids, table)
}

// Reshape to shape; one dimension may be −1 (inferred).
func (b *Builder) Reshape(x TensorID, shape ...int) TensorID {
	s := append([]int{}, shape...)
	infer, known := -1, 1
	for i, d := range s {
		if d == -1 && infer < 0 {
			infer = i
		} else {
			known *= d
		}
	}
	if infer >= 0 && known > 0 {
		s[infer] = b.Shape(x).Numel() / known
	}
	return b.emit1(OpReshape, Attrs{Shape: s}, x)
}

// Flatten keeps the first dim and merges the rest.
func (b *Builder) Flatten(x TensorID) TensorID { return b.Reshape(x, b.Shape(x)[0], -1) }

// Permute reorders dims: output dim i is input dim perm[i].
func (b *Builder) Permute(x TensorID, perm ...int) TensorID {
	return b.emit1(OpPermute, Attrs{Perm: perm}, x)
}

// Concat joins xs along axis.
func (b *Builder) Concat(axis int, xs ...TensorID) TensorID {
	return b.emit1(OpConcat, Attrs{Axis: axis}, xs...)
}

// Split cuts x along axis into pieces of the given sizes.
func (b *Builder) Split(x TensorID, axis int, sizes ...int) []TensorID {
	return b.Emit(OpSplit, Attrs{Axis: axis, Sizes: sizes}, x)[:len(sizes)]
}

// Slice keeps [start, end) of axis.
func (b *Builder) Slice(x TensorID, axis, start, end int) TensorID {
	return b.emit1(OpSlice, Attrs{Axis: axis, Start: start, End: end}, x)
}

// Attention is softmax(q·kᵀ/√d [causally masked])·v over the last two dims.
func (b *Builder) Attention(q, k, v TensorID, causal bool) TensorID {
	s := b.Shape(q)
	if len(s) == 0 {
		b.fail(fmt.Errorf("attention under %q: q has no shape", b.scope))
		return NoTensor
	}
	return b.emit1(OpAttention, Attrs{Causal: causal, Scale: DefaultAttentionScale(s[len(s)-1])}, q, k, v)
}

// Conv2D is a 2-D cross-correlation of x[N,C,H,W] with w[O,C,KH,KW].
func (b *Builder) Conv2D(x, w TensorID, stride, pad int) TensorID {
	return b.emit1(OpConv2D, Attrs{Stride: stride, Pad: pad}, x, w)
}

// MaxPool2D takes the max over kernel×kernel windows.
func (b *Builder) MaxPool2D(x TensorID, kernel, stride int) TensorID {
	return b.emit1(OpMaxPool2D, Attrs{Kernel: kernel, Stride: stride}, x)
}

// AdaptiveAvgPool2D averages into an oh×ow grid (PyTorch's bins).
func (b *Builder) AdaptiveAvgPool2D(x TensorID, oh, ow int) TensorID {
	return b.emit1(OpAdaptiveAvgPool2D, Attrs{Shape: []int{oh, ow}}, x)
}

// CrossEntropy is Σᵢ −log softmax(logits[i])[labels[i]] (sum reduction).
func (b *Builder) CrossEntropy(logits, labels TensorID) TensorID {
	return b.emit1(OpCrossEntropy, Attrs{}, logits, labels)
}

// NLLLoss is −Σᵢ logp[i, labels[i]].
func (b *Builder) NLLLoss(logp, labels TensorID) TensorID {
	return b.emit1(OpNLLLoss, Attrs{}, logp, labels)
}

// Top2Gate routes each token to its two highest-scoring experts, up to
// capacity tokens per expert, returning the combine weights and the 0/1
// dispatch mask, both [groups..., tokens, experts, capacity]. Logits are
// [groups..., tokens, experts]: every dim before the last two indexes an
// independent group (GShard), with its own capacity slots, so groups can be
// split among devices like a batch.
func (b *Builder) Top2Gate(logits TensorID, capacity int) (combine, dispatch TensorID) {
	out := b.Emit(OpTop2Gate, Attrs{Capacity: capacity}, logits)
	return out[0], out[1]
}

// Einsum contracts two operands by a "ab,bc->ac" equation.
func (b *Builder) Einsum(equation string, x, y TensorID) TensorID {
	return b.emit1(OpEinsum, Attrs{Equation: equation}, x, y)
}

// ReduceSum sums over axes.
func (b *Builder) ReduceSum(x TensorID, axes ...int) TensorID {
	return b.emit1(OpReduceSum, Attrs{Axes: axes}, x)
}

// Linear is x·w (+ bias when bias is not NoTensor) with w[in, out].
func (b *Builder) Linear(x, w, bias TensorID) TensorID {
	y := b.MatMul(x, w)
	if bias != NoTensor {
		y = b.Bias(y, bias)
	}
	return y
}

// GroupedConv2D is Conv2D with the channels in groups groups: w is
// [O, C/groups, KH, KW] and output channel o reads only its group's inputs
// (depthwise: groups = C).
func (b *Builder) GroupedConv2D(x, w TensorID, stride, pad, groups int) TensorID {
	return b.emit1(OpConv2D, Attrs{Stride: stride, Pad: pad, Groups: groups}, x, w)
}
