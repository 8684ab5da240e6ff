package ir

import (
	"fmt"
	"strconv"
	"strings"
)

// DType is the element type of a tensor.
type DType uint8

const (
	// Float32 is IEEE single precision; the default for models.
	Float32 DType = iota
	// Float64 is IEEE double precision; used for reference runs.
	Float64
	// Int64 holds indices and labels (embedding ids, class labels).
	Int64
)

var dtypeNames = [...]string{Float32: "float32", Float64: "float64", Int64: "int64"}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return "dtype(" + strconv.Itoa(int(d)) + ")"
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == Float32 || d == Float64 }

// Size is the number of bytes of one element.
func (d DType) Size() int {
	if d == Float32 {
		return 4
	}
	return 8
}

// ParseDType is the inverse of DType.String.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if n == s {
			return DType(i), nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (want float32, float64 or int64)", s)
}

// Shape is a static tensor shape; a scalar has the empty shape.
type Shape []int

// MaxElements bounds the elements of one tensor (2^50, a petabyte or more
// of any dtype), so that element counts, and byte sizes at 8 bytes an
// element (2^53), never overflow int64; the builder and DecodeJSON refuse
// a tensor above it, naming it.
const MaxElements = 1 << 50

// CheckedNumel is the number of elements, and whether it is at most
// MaxElements with every dimension non-negative: the product is checked
// for overflow at each step, so a shape such as [2^62, 16] reports false
// rather than a wrapped count.
func (s Shape) CheckedNumel() (int64, bool) {
	for _, d := range s {
		if d < 0 {
			return 0, false
		}
		if d == 0 {
			return 0, true // however large the others, no elements
		}
	}
	n := int64(1)
	for _, d := range s {
		if n > MaxElements/int64(d) {
			return 0, false
		}
		n *= int64(d)
	}
	return n, true
}

// Numel is the number of elements.
func (s Shape) Numel() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether two shapes are identical.
func (s Shape) Equal(t Shape) bool {
	if len(s) != len(t) {
		return false
	}
	for i := range s {
		if s[i] != t[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy that does not alias s.
func (s Shape) Clone() Shape { return append(Shape{}, s...) }

func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// Strides returns row-major strides in elements.
func (s Shape) Strides() []int {
	st := make([]int, len(s))
	acc := 1
	for i := len(s) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= s[i]
	}
	return st
}

// TensorID indexes Graph.Tensors.
type TensorID int32

// OpID indexes Graph.Ops.
type OpID int32

// NoTensor marks an absent tensor (for example, an input that needs no gradient).
const NoTensor TensorID = -1

// NoOp marks an absent op (a leaf tensor's producer, a forward op's GradOf).
const NoOp OpID = -1

// TensorKind says where a tensor's value comes from.
type TensorKind uint8

const (
	// Activation is computed by an op.
	Activation TensorKind = iota
	// Input is fed data (images, token ids).
	Input
	// Label is fed training targets.
	Label
	// Param is a trainable parameter.
	Param
	// State is optimizer state or a step counter, fed and updated each step.
	State
)

var kindNames = [...]string{Activation: "activation", Input: "input", Label: "label", Param: "param", State: "state"}

func (k TensorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// IsLeaf reports whether tensors of this kind are fed rather than computed.
func (k TensorKind) IsLeaf() bool { return k != Activation }

// ParseTensorKind is the inverse of TensorKind.String.
func ParseTensorKind(s string) (TensorKind, error) {
	for i, n := range kindNames {
		if n == s {
			return TensorKind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown tensor kind %q (want one of %s)", s, strings.Join(kindNames[:], ", "))
}

// Phase says which part of a training step an op belongs to.
type Phase uint8

const (
	Forward Phase = iota
	Backward
	Update
)

func (p Phase) String() string {
	switch p {
	case Forward:
		return "forward"
	case Backward:
		return "backward"
	case Update:
		return "update"
	}
	return "phase(" + strconv.Itoa(int(p)) + ")"
}

// Tensor is one value of the program.
type Tensor struct {
	ID       TensorID
	Name     string
	Shape    Shape
	DType    DType
	Kind     TensorKind
	Producer OpID // NoOp for leaves
	// NoGrad marks a value that is not differentiable (a dispatch mask, an
	// integer), so autodiff never propagates into it.
	NoGrad bool
	// Init says how a parameter starts: InitDefault, InitZeros, InitOnes
	// or InitNormal. Runtimes share one initialiser so every backend and
	// every device count starts from the same values.
	Init string
	// Part, for a parameter the importer cut out of a larger one (a packed
	// q/k/v projection split into three), says which piece of which
	// original tensor it is, so weights and gradients map back to the
	// module's state_dict. Zero for every other tensor.
	Part Part
}

// Part is a parameter's place in an original tensor: indices [Start, End)
// along Axis of the tensor named Of.
type Part struct {
	Of         string
	Axis       int
	Start, End int
}

// IsZero says whether p records nothing.
func (p Part) IsZero() bool { return p.Of == "" }

// Parameter initialisers.
const (
	// InitDefault is PyTorch's default for linear and conv weights:
	// uniform in ±1/√fan_in.
	InitDefault = ""
	InitZeros   = "zeros"
	InitOnes    = "ones"
	// InitNormal is N(0, 0.02²), the BERT/GPT embedding initialiser.
	InitNormal = "normal"
)

// Op is one operator application.
type Op struct {
	ID      OpID
	Name    string
	Kind    OpKind
	Inputs  []TensorID
	Outputs []TensorID
	Attrs   Attrs
	Phase   Phase
	// GradOf is the forward op whose gradient this backward op computes, or
	// NoOp. Lowering shards a backward op with its forward op's rule.
	GradOf OpID
}

// Attrs holds every operator attribute; each kind reads the fields its table
// entry documents and leaves the rest zero, so graphs serialise compactly and
// round-trip exactly.
type Attrs struct {
	Axis     int       `json:"axis,omitempty"`     // softmax/concat/split/slice axis
	Axes     []int     `json:"axes,omitempty"`     // reduce_sum axes; bias axes of x
	Perm     []int     `json:"perm,omitempty"`     // permute
	Shape    []int     `json:"shape,omitempty"`    // reshape target, fill shape, grad target shapes
	Sizes    []int     `json:"sizes,omitempty"`    // split sizes
	Start    int       `json:"start,omitempty"`    // slice start
	End      int       `json:"end,omitempty"`      // slice end (exclusive)
	TransA   bool      `json:"trans_a,omitempty"`  // matmul: use Aᵀ
	TransB   bool      `json:"trans_b,omitempty"`  // matmul: use Bᵀ
	Kernel   int       `json:"kernel,omitempty"`   // pooling window
	Stride   int       `json:"stride,omitempty"`   // conv/pool stride
	Pad      int       `json:"pad,omitempty"`      // conv padding (both sides)
	Groups   int       `json:"groups,omitempty"`   // conv groups (0 or absent: 1); ConvGroups reads it
	Rate     float64   `json:"rate,omitempty"`     // dropout probability of zeroing
	Seed     uint64    `json:"seed,omitempty"`     // dropout seed
	Eps      float64   `json:"eps,omitempty"`      // layer-norm / Adam epsilon
	Causal   bool      `json:"causal,omitempty"`   // attention mask
	Scale    float64   `json:"scale,omitempty"`    // attention scale; fill value
	KVGroup  int       `json:"kv_group,omitempty"` // attention: query heads per key/value head (grouped-query attention; 0 or 1: none)
	Capacity int       `json:"capacity,omitempty"` // MoE expert capacity
	Equation string    `json:"equation,omitempty"` // einsum
	LR       float64   `json:"lr,omitempty"`       // optimizer learning rate
	Betas    []float64 `json:"betas,omitempty"`    // Adam β1, β2
	Momentum float64   `json:"momentum,omitempty"` // batch norm running statistics

	KeepDims   bool    `json:"keep_dims,omitempty"`  // mean, var, amax: reduced dims stay as size 1
	Value      float64 `json:"value,omitempty"`      // the number of add_scalar, mul_scalar, pow_scalar (exponent), masked_fill
	Correction int     `json:"correction,omitempty"` // var: divide by N − correction

	// Per-device attributes, set only in the local programs lowering emits.
	Offset  []int `json:"offset,omitempty"`  // dropout: this shard's position in Shape (the global shape); embedding: [first local vocabulary row]
	Partial bool  `json:"partial,omitempty"` // embedding: the table is a vocabulary shard; ids outside it give zeros
	Rank    int   `json:"rank,omitempty"`    // collectives: this device's index in the group
	// Group lists a collective's (or replicate's) member devices in rank
	// order, as the program's global device indices; empty means every
	// device of the program, in device order. 2-D mesh programs use it for
	// sub-group collectives (among a machine's devices, or across replicas).
	Group  []int  `json:"group,omitempty"`
	Split  []int  `json:"split,omitempty"`  // all_to_all: per-rank lengths of the dim that becomes sharded
	Method string `json:"method,omitempty"` // collectives on uneven pieces: "padded" or "grouped"
}

// Clone is a deep copy of a.
func (a Attrs) Clone() Attrs { return cloneAttrs(a) }

func cloneAttrs(a Attrs) Attrs {
	c := a
	c.Axes = cloneInts(a.Axes)
	c.Perm = cloneInts(a.Perm)
	c.Shape = cloneInts(a.Shape)
	c.Sizes = cloneInts(a.Sizes)
	c.Split = cloneInts(a.Split)
	c.Offset = cloneInts(a.Offset)
	c.Group = cloneInts(a.Group)
	if a.Betas != nil {
		c.Betas = append([]float64{}, a.Betas...)
	}
	return c
}

func cloneInts(s []int) []int {
	if s == nil {
		return nil
	}
	return append([]int{}, s...)
}
