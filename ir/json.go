package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
)

// GraphFormat and GraphVersion identify hap's graph JSON documents.
const (
	GraphFormat  = "hap.graph"
	GraphVersion = 1
)

// The graph JSON document. See docs/graph-format.md.
type graphDoc struct {
	Format  string      `json:"format"`
	Version int         `json:"version"`
	Name    string      `json:"name"`
	Tensors []tensorDoc `json:"tensors"`
	Ops     []opDoc     `json:"ops"`
	Loss    string      `json:"loss,omitempty"`
}

type tensorDoc struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Init  string `json:"init,omitempty"`
	// PartOf places a parameter inside an original one (Tensor.Part).
	PartOf *partDoc `json:"part_of,omitempty"`
}

type partDoc struct {
	Name  string `json:"name"`
	Axis  int    `json:"axis"`
	Start int    `json:"start"`
	End   int    `json:"end"`
}

type opDoc struct {
	Name    string   `json:"name"`
	Kind    OpKind   `json:"kind"`
	Inputs  []string `json:"inputs"`
	Outputs []string `json:"outputs"`
	Attrs   *Attrs   `json:"attrs,omitempty"`
}

// EncodeJSON writes a forward graph as indented graph JSON. Every tensor is
// declared, so decoding gives back an identical graph.
func EncodeJSON(w io.Writer, g *Graph) error {
	if g.Train != nil {
		return fmt.Errorf("graph %q is a training step; export its forward graph (training steps are derived)", g.Name)
	}
	doc := graphDoc{Format: GraphFormat, Version: GraphVersion, Name: g.Name}
	for i := range g.Tensors {
		t := &g.Tensors[i]
		shape := t.Shape
		if shape == nil {
			shape = Shape{}
		}
		td := tensorDoc{Name: t.Name, Kind: t.Kind.String(), DType: t.DType.String(), Shape: shape, Init: t.Init}
		if !t.Part.IsZero() {
			td.PartOf = &partDoc{Name: t.Part.Of, Axis: t.Part.Axis, Start: t.Part.Start, End: t.Part.End}
		}
		doc.Tensors = append(doc.Tensors, td)
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Phase != Forward {
			return fmt.Errorf("op %q is a %s op; only forward graphs are exported", op.Name, op.Phase)
		}
		od := opDoc{Name: op.Name, Kind: op.Kind, Inputs: names(g, op.Inputs), Outputs: names(g, op.Outputs)}
		if a := cloneAttrs(op.Attrs); !isZeroAttrs(&a) {
			od.Attrs = &a
		}
		doc.Ops = append(doc.Ops, od)
	}
	if g.Loss != NoTensor {
		doc.Loss = g.Tensors[g.Loss].Name
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(&doc)
}

func names(g *Graph, ids []TensorID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = g.Tensors[id].Name
	}
	return out
}

func isZeroAttrs(a *Attrs) bool {
	b, _ := json.Marshal(a)
	return string(b) == "{}"
}

// decodePart checks a part_of record: only a parameter is a piece of
// another, and the piece's extent along its axis is its own size there.
func decodePart(pd *partDoc, kind TensorKind, shape []int) (Part, error) {
	if pd == nil {
		return Part{}, nil
	}
	switch {
	case kind != Param:
		return Part{}, fmt.Errorf("only a param can be part of another tensor; this is %s", kind)
	case pd.Name == "":
		return Part{}, fmt.Errorf("\"name\" is missing")
	case pd.Axis < 0 || pd.Axis >= len(shape):
		return Part{}, fmt.Errorf("axis %d is outside shape %v", pd.Axis, shape)
	case pd.Start < 0 || pd.End-pd.Start != shape[pd.Axis]:
		return Part{}, fmt.Errorf("[%d, %d) is not %d long (the shape's axis %d) from a non-negative start", pd.Start, pd.End, shape[pd.Axis], pd.Axis)
	}
	return Part{Of: pd.Name, Axis: pd.Axis, Start: pd.Start, End: pd.End}, nil
}

// ErrBadGraphJSON is wrapped by every DecodeJSON error.
var ErrBadGraphJSON = errors.New("bad graph JSON")

// DecodeJSON reads a graph JSON document. Leaf tensors (inputs, labels,
// params, state) must be declared; computed tensors may be declared, in which
// case their shape is checked against inference, or left out. Ops may come
// in any order that has no cycle. Errors name the field, op or tensor at
// fault (and the line for syntax errors) and wrap ErrBadGraphJSON.
func DecodeJSON(data []byte) (*Graph, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadGraphJSON, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc graphDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, bad("%s", DescribeJSONError(data, err))
	}
	if dec.More() {
		return nil, bad("trailing data after the graph document (line %d)", lineOf(data, dec.InputOffset()))
	}
	if doc.Format != GraphFormat {
		return nil, bad("field \"format\" is %q, want %q", doc.Format, GraphFormat)
	}
	if doc.Version != GraphVersion {
		return nil, bad("field \"version\" is %d; this hap reads version %d", doc.Version, GraphVersion)
	}
	g := &Graph{Name: doc.Name, Loss: NoTensor}
	byName := map[string]TensorID{}
	for i, td := range doc.Tensors {
		where := fmt.Sprintf("tensors[%d] (%q)", i, td.Name)
		if td.Name == "" {
			return nil, bad("tensors[%d]: field \"name\" is missing", i)
		}
		if _, dup := byName[td.Name]; dup {
			return nil, bad("%s: name declared twice", where)
		}
		kind, err := ParseTensorKind(td.Kind)
		if err != nil {
			return nil, bad("%s: field \"kind\": %v", where, err)
		}
		dt, err := ParseDType(td.DType)
		if err != nil {
			return nil, bad("%s: field \"dtype\": %v", where, err)
		}
		if td.Shape == nil {
			return nil, bad("%s: field \"shape\" is missing (use [] for a scalar)", where)
		}
		for _, d := range td.Shape {
			if d <= 0 {
				return nil, bad("%s: field \"shape\" %v has a non-positive dimension", where, td.Shape)
			}
		}
		if _, ok := Shape(td.Shape).CheckedNumel(); !ok {
			return nil, bad("%s: field \"shape\" %v has more than 2^50 elements (ir.MaxElements)", where, td.Shape)
		}
		switch td.Init {
		case InitDefault, InitZeros, InitOnes, InitNormal:
		default:
			return nil, bad("%s: field \"init\" is %q (want %q, %q, %q or none)", where, td.Init, InitZeros, InitOnes, InitNormal)
		}
		if td.Init != "" && kind != Param && kind != State {
			return nil, bad("%s: field \"init\" applies only to params", where)
		}
		part, err := decodePart(td.PartOf, kind, td.Shape)
		if err != nil {
			return nil, bad("%s: field \"part_of\": %v", where, err)
		}
		id := TensorID(len(g.Tensors))
		byName[td.Name] = id
		g.Tensors = append(g.Tensors, Tensor{ID: id, Name: td.Name, Shape: Shape(td.Shape).Clone(), DType: dt, Kind: kind, Producer: NoOp, NoGrad: kind != Param, Init: td.Init, Part: part})
	}
	order, err := opOrder(doc.Ops, byName, g)
	if err != nil {
		return nil, bad("%v", err)
	}
	declared := make([]bool, len(g.Tensors))
	for i := range declared {
		declared[i] = true
	}
	for _, i := range order {
		od := doc.Ops[i]
		where := fmt.Sprintf("ops[%d] (%q, %s)", i, od.Name, od.Kind)
		op := Op{ID: OpID(len(g.Ops)), Name: od.Name, Kind: od.Kind, GradOf: NoOp}
		if od.Attrs != nil {
			op.Attrs = cloneAttrs(*od.Attrs)
		}
		if _, ok := lookup(od.Kind); !ok {
			return nil, bad("%s: unknown op kind %q", where, od.Kind)
		}
		for _, in := range od.Inputs {
			op.Inputs = append(op.Inputs, byName[in]) // opOrder checked every name
		}
		specs, err := g.inferRaw(&op)
		if err != nil {
			return nil, bad("%s: %v", where, err)
		}
		if len(specs) != len(od.Outputs) {
			return nil, bad("%s: field \"outputs\" lists %d tensors, the op produces %d", where, len(od.Outputs), len(specs))
		}
		for j, name := range od.Outputs {
			s := specs[j]
			id, ok := byName[name]
			if !ok {
				id = TensorID(len(g.Tensors))
				byName[name] = id
				g.Tensors = append(g.Tensors, Tensor{ID: id, Name: name, Shape: s.Shape, DType: s.DType, Kind: Activation, Producer: NoOp})
				declared = append(declared, false)
			}
			t := &g.Tensors[id]
			if t.Kind != Activation {
				return nil, bad("%s: output %q is declared as %s; ops can only write activations", where, name, t.Kind)
			}
			if t.Producer != NoOp {
				return nil, bad("%s: output %q is also written by op %q", where, name, g.Ops[t.Producer].Name)
			}
			if declared[id] && (!t.Shape.Equal(s.Shape) || t.DType != s.DType) {
				return nil, bad("%s: output %q is declared %s%v but the op computes %s%v", where, name, t.DType, t.Shape, s.DType, s.Shape)
			}
			t.Producer = op.ID
			t.NoGrad = s.NoGrad || !s.DType.IsFloat()
			op.Outputs = append(op.Outputs, id)
		}
		g.Ops = append(g.Ops, op)
	}
	if doc.Loss != "" {
		id, ok := byName[doc.Loss]
		if !ok {
			return nil, bad("field \"loss\": no tensor named %q", doc.Loss)
		}
		g.Loss = id
	}
	if err := g.Check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadGraphJSON, err)
	}
	return g, nil
}

// opOrder returns the ops' indices in a topological order that keeps the
// document's order wherever dependencies allow, or an error naming a cycle
// or an input nobody provides.
func opOrder(ops []opDoc, leaves map[string]TensorID, g *Graph) ([]int, error) {
	producer := map[string]int{}
	seenOp := map[string]bool{}
	for i, od := range ops {
		if od.Name == "" {
			return nil, fmt.Errorf("ops[%d]: field \"name\" is missing", i)
		}
		if seenOp[od.Name] {
			return nil, fmt.Errorf("ops[%d]: op name %q used twice", i, od.Name)
		}
		seenOp[od.Name] = true
		for _, out := range od.Outputs {
			if p, dup := producer[out]; dup {
				return nil, fmt.Errorf("ops[%d] (%q): output %q is also written by op %q", i, od.Name, out, ops[p].Name)
			}
			if id, ok := leaves[out]; ok && g.Tensors[id].Kind.IsLeaf() {
				return nil, fmt.Errorf("ops[%d] (%q): output %q is declared as %s; ops can only write activations", i, od.Name, out, g.Tensors[id].Kind)
			}
			producer[out] = i
		}
	}
	deps := make([][]int, len(ops))
	users := make([][]int, len(ops))
	for i, od := range ops {
		for _, in := range od.Inputs {
			if p, ok := producer[in]; ok {
				deps[i] = append(deps[i], p)
				users[p] = append(users[p], i)
				continue
			}
			id, ok := leaves[in]
			if !ok {
				return nil, fmt.Errorf("ops[%d] (%q): input %q is neither declared in \"tensors\" nor produced by any op", i, od.Name, in)
			}
			if !g.Tensors[id].Kind.IsLeaf() {
				return nil, fmt.Errorf("ops[%d] (%q): input %q is a declared activation that no op produces (dangling)", i, od.Name, in)
			}
		}
	}
	pending := make([]int, len(ops))
	var ready []int
	for i := range ops {
		pending[i] = len(deps[i])
		if pending[i] == 0 {
			ready = append(ready, i)
		}
	}
	var order []int
	for len(ready) > 0 {
		sort.Ints(ready)
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		for _, u := range users[i] {
			if pending[u]--; pending[u] == 0 {
				ready = append(ready, u)
			}
		}
	}
	if len(order) < len(ops) {
		var cyc []string
		for i := range ops {
			if pending[i] > 0 {
				cyc = append(cyc, fmt.Sprintf("%q", ops[i].Name))
			}
		}
		return nil, fmt.Errorf("ops form a cycle (or depend on one): %v", cyc)
	}
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if !t.Kind.IsLeaf() {
			if _, ok := producer[t.Name]; !ok {
				return nil, fmt.Errorf("tensor %q is a declared activation that no op produces (dangling)", t.Name)
			}
		}
	}
	return order, nil
}

// DescribeJSONError turns encoding/json's errors decoding data into one
// line with a line number and, for type errors, the field path; the plan
// reader words its errors with it too.
func DescribeJSONError(data []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("line %d: %v", lineOf(data, se.Offset), se)
	case errors.As(err, &te):
		return fmt.Sprintf("line %d: field %q: got JSON %s, want %s", lineOf(data, te.Offset), te.Field, te.Value, te.Type)
	case errors.Is(err, io.EOF):
		return "empty document"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "document ends early"
	}
	return err.Error()
}

func lineOf(data []byte, off int64) int {
	off = int64(math.Min(float64(off), float64(len(data))))
	return bytes.Count(data[:off], []byte("\n")) + 1
}
